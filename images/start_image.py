"""The image a task's own layers start from, when the task names none: the Python base
(:mod:`.python_base`), the base with a C toolchain (:mod:`.build_tools`, for a task whose
environment asks for ``build_tools``), or another language's toolchain image
(:mod:`.toolchains`). Both a shared environment image (:mod:`.env_image`) and a task image
(:mod:`.repository`) start here.
"""

from __future__ import annotations

from repogym.images.build_tools import build_tools_tag, ensure_build_tools
from repogym.images.python_base import base_tag, ensure_base
from repogym.images.toolchains import ensure_toolchain, toolchain_tag
from repogym.progress import Progress
from repogym.schema import Environment


def start_tag(env: Environment) -> str:
    """The tag of the image ``env`` starts from (built or not)."""
    if env.language == "python" and env.build_tools:
        return build_tools_tag(env.python)
    if env.language == "python":
        return base_tag(env.python)
    return toolchain_tag(env.language)


def ensure_start(env: Environment, progress: Progress) -> str:
    """The tag of the image ``env`` starts from, built unless it exists."""
    if env.language == "python" and env.build_tools:
        return ensure_build_tools(env.python, progress).tag
    if env.language == "python":
        return ensure_base(env.python, progress).tag
    return ensure_toolchain(env.language, progress).tag
