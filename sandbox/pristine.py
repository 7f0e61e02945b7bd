"""Filling a container's writable paths from the pristine copy its image carries.

Repository images keep an untouched copy of the repository and of the user's home under
:data:`PRISTINE` (readable by root only). A container with a read-only root gets empty tmpfs
mounts at those paths; the harness fills them, as root, when the container starts and again
when the pool resets a used container in place.
"""

from __future__ import annotations

import shlex

PRISTINE = "/opt/repogym-pristine"
NO_PRISTINE = "NO_PRISTINE"


def sources(workdir: str, user: str | None) -> dict[str, str]:
    """Writable path -> its pristine copy."""
    found = {workdir: f"{PRISTINE}/testbed"}
    if user:
        found[f"/home/{user}"] = f"{PRISTINE}/home"
    return found


def fill_script(targets: dict[str, str], clear: bool, owners: bool = True) -> str:
    """Shell lines that (optionally empty and) fill every target from its source.

    Copying ``SRC/.`` onto the existing folder keeps the mount point and restores its owner and
    mode too (``owners=False``: not the owner, where the copy's ids are not the sandbox's).
    Exits 3 with ``NO_PRISTINE`` when the image has no pristine copy.
    """
    copy = "cp -a" if owners else "cp -a --no-preserve=ownership"
    lines = [f"[ -d {PRISTINE}/testbed ] || {{ echo {NO_PRISTINE}; exit 3; }}"]
    for target, source in targets.items():
        t, s = shlex.quote(target), shlex.quote(source)
        if clear:
            lines.append(f"find {t} -mindepth 1 -delete || exit 5")
        lines.append(f"if [ -d {s} ] && [ -d {t} ]; then {copy} {s}/. {t}/ || exit 6; fi")
    return "\n".join(lines) + "\n"
