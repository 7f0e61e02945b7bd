"""repogym: a Gymnasium environment for coding agents on real repositories.

``import repogym`` registers ``repogym/SWE-v0``: at once when Gymnasium is already imported,
otherwise the moment it is. Importing Gymnasium (and numpy with it) costs about 0.3 s, which
the command line and the task tools do not need, so ``import repogym`` does not do it.
"""

import sys

from repogym._register import RegisterOnImport, register_now
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

if "gymnasium" in sys.modules:
    register_now()
elif not any(isinstance(f, RegisterOnImport) for f in sys.meta_path):
    sys.meta_path.insert(0, RegisterOnImport())
