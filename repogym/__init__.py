"""repogym: a Gymnasium environment for coding agents on real repositories.

``import repogym`` registers ``repogym/SWE-v0``.
"""

from repogym.errors import (
    ActionError,
    DockerUnavailable,
    GradingError,
    ImageBuildError,
    RepogymError,
    SandboxError,
    TaskError,
)
from repogym.version import __version__

__all__ = [
    "ActionError",
    "DockerUnavailable",
    "GradingError",
    "ImageBuildError",
    "RepogymError",
    "SandboxError",
    "TaskError",
    "__version__",
]


def _register() -> None:
    from repogym.envs.registration import register_envs

    register_envs()


_register()
