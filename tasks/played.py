"""The gold patch played as an agent's change, and graded the way an agent's diff is graded.

Grading the task's ``patch`` itself proves that the fix passes the hidden tests; it does not
prove that an agent who makes the same change is rewarded for it. An agent's reward comes from
the diff taken out of its container (``git add -A`` against the image's base commit), so
anything between the two breaks that promise: files the image's install wrote into the
repository (a diff that then does not apply in the grading container), a gold file under a
path the repository's ``.gitignore`` leaves out (a diff without it). ``played`` applies the
patch in a container started the way an agent's is and takes the diff the environment would
take; validation grades that.
"""

from __future__ import annotations

from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass

from repogym.envs.grading.grader import Grader, GraderConfig
from repogym.envs.grading.stage import patch_paths
from repogym.errors import RepogymError
from repogym.images.recipe import BuiltImage
from repogym.images.repository import ensure_image
from repogym.sandbox.base import SandboxConfig
from repogym.sandbox.docker import DockerSandbox
from repogym.schema import Task

PATCH_FILE = "/tmp/.repogym-played.patch"


@dataclass(frozen=True)
class Played:
    """An agent's diff after applying a patch, or why there is none."""

    diff: str
    problem: str = ""  # the patch did not apply in the agent's container
    extra: tuple[str, ...] = ()  # paths in the diff the patch does not touch
    missing: tuple[str, ...] = ()  # paths the patch touches that the diff lacks

    def explain(self) -> str:
        """What differs between the patch and the diff an agent who wrote it would submit."""
        parts = [self.problem] if self.problem else []
        if self.extra:
            parts.append(f"the agent's diff also holds {list(self.extra[:5])}, which the image "
                         "already has (written into the repository when it was built?)")
        if self.missing:
            parts.append(f"the agent's diff lacks {list(self.missing[:5])} (paths git ignores "
                         "there: .gitignore, or caches the diff leaves out)")
        return "; ".join(parts)


def played(image: BuiltImage, patch: str) -> Played:
    """The diff an agent would submit after applying ``patch`` in a fresh container of
    ``image`` (as the agent's user, in its persistent shell)."""
    if not patch.strip():
        return Played("")
    with DockerSandbox(SandboxConfig(image=image.tag, role="played")) as box:
        box.write_file(PATCH_FILE, patch.encode("utf-8", errors="surrogateescape"))
        applied = box.run(f"git apply --binary --whitespace=nowarn {PATCH_FILE} && "
                          f"rm -f {PATCH_FILE}", timeout=120)
        if not applied.ok:
            return Played("", f"the patch does not apply in an agent's container: "
                          f"{applied.output.strip()[-300:]}")
        diff = box.diff(image.repo_commit)
    want, got = set(patch_paths(patch)), set(patch_paths(diff))
    return Played(diff, extra=tuple(sorted(got - want)), missing=tuple(sorted(want - got)))


def gold_as_agent(task: Task, grader: Grader | None = None) -> str | None:
    """Why an agent who writes the gold change would not be rewarded for it (one graded run of
    the played diff, in the task's own image), or None when it would be."""
    try:
        image = ensure_image(task, progress=lambda _m: None)
        diff = played(image, task.patch)
        if diff.problem:
            return f"gold played as an agent's diff: {diff.problem}"
        report = (grader or Grader(GraderConfig(cleanup_async=False))).grade(
            task, diff.diff, image.tag)
    except RepogymError as exc:
        return f"gold played as an agent's diff: {str(exc).splitlines()[0][:300]}"
    if report.resolved:
        return None
    failing = [t for t, s in {**report.fail_to_pass, **report.pass_to_pass}.items()
               if s not in ("PASSED", "XFAIL", "SKIPPED")]
    why = diff.explain()
    return (f"gold played as an agent's diff does not resolve it (failing: {failing[:3]}, "
            f"flags: {report.flag_names()}, invalid: {report.invalid_reasons[:2]})"
            + (f": {why}" if why else ""))


def check_kept(tasks: list[Task], workers: int = 1, grader: Grader | None = None,
               log: Callable[[str], None] = lambda _m: None) -> dict[str, str]:
    """``gold_as_agent`` for each task, ``workers`` at once: the ids of those that fail, with
    why."""
    def one(task: Task) -> tuple[str, str | None]:
        return task.instance_id, gold_as_agent(task, grader)

    failed: dict[str, str] = {}
    with ThreadPoolExecutor(max_workers=max(1, workers)) as pool:
        for instance_id, why in pool.map(one, tasks):
            if why is not None:
                failed[instance_id] = why
                log(f"{instance_id}: rejected: {why}")
    return failed
