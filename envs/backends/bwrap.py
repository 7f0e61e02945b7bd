"""The bwrap backend: the daemonless sandbox (:mod:`repogym.sandbox.bwrap`) for machines
where neither Docker nor Podman may run.

Images are the Docker backend's, exported as root file systems (:mod:`repogym.sandbox.
trees`): made here when an engine answers, else copied from a machine where one does. Each
reset starts a new sandbox (a bwrap start and a copy of the repository into tmpfs: no pool is
needed). Grading runs the grader's own steps in a sandbox of its own, started from the tree
for each grade; the tests run there as code under test (see docs/backends.md for what one id
costs against Docker's users).
"""

from __future__ import annotations

from typing import Any

from repogym.envs.backends.seams import Backend, BackendSettings
from repogym.envs.grading.box import GradingBox
from repogym.envs.grading.grader import Grader, GradingReport
from repogym.images.recipe import LABEL_COMMIT, BuiltImage
from repogym.images.repository import ensure_image, image_tag
from repogym.sandbox.base import ExecResult, Sandbox, SandboxConfig
from repogym.sandbox.bwrap import (
    BwrapContainer,
    BwrapRunner,
    BwrapSandbox,
    check_bwrap,
    grading_main,
)
from repogym.sandbox.client import docker_available
from repogym.sandbox.trees import Tree, export_tree, find_tree
from repogym.schema import Task


class TreeImages:
    """Task images as exported trees: found, or built and exported where an engine runs."""

    def __init__(self) -> None:
        self.version = check_bwrap()
        self.trees: dict[str, Tree] = {}

    def ensure(self, task: Task) -> BuiltImage:
        tag = image_tag(task)
        if tag not in self.trees:
            cached = find_tree(tag)
            if cached is None and docker_available():
                ensure_image(task, progress=lambda _msg: None)
            self.trees[tag] = cached or export_tree(tag)
        tree = self.trees[tag]
        return BuiltImage(tag, tree.labels.get(LABEL_COMMIT, ""), True, 0.0)

    def tree(self, tag: str) -> Tree:
        if tag not in self.trees:
            self.trees[tag] = export_tree(tag)
        return self.trees[tag]

    def provenance(self, image: BuiltImage) -> dict[str, Any]:
        tree = self.tree(image.tag)
        return {"image": tree.image_id, "docker_engine": None, "engine": "bwrap",
                "bwrap": self.version}


class FreshSandboxes:
    """A new sandbox per episode; a used one is removed."""

    def __init__(self, images: TreeImages, settings: BackendSettings):
        self.images, self.settings = images, settings

    def acquire(self, image: BuiltImage, returning: Sandbox | None) -> Sandbox:
        if returning is not None:
            returning.close()
        config = SandboxConfig(image=image.tag, run_id=self.settings.run_id,
                               output_limit=self.settings.output_limit)
        return BwrapSandbox(config, self.images.tree(image.tag))

    def release(self, sandbox: Sandbox) -> None:
        sandbox.close()

    def discard(self, sandbox: Sandbox) -> None:
        sandbox.close()

    def close(self) -> None:
        """Nothing is held between episodes."""


class BwrapGradingBox(GradingBox):
    """A grading sandbox for the grader's code, which is typed against the Docker one: the
    root runner is the sandbox's first process, ``exec`` runs code under test (or, as
    ``root``, the sandbox's root), files go in as root. No pytest waits ahead of time: the
    tests start in a fresh process. Nothing of Docker's is used (no engine here)."""

    def __init__(self, config: SandboxConfig, tree: Tree):  # no engine: nothing of the parent's
        self.config, self.workdir, self.read_only = config, config.workdir, True
        self.user = tree.user if config.user and config.user == tree.user else None
        self._closed, self._shell = False, None
        self.pytest = self.decoy_pytest = None
        self.container = BwrapContainer(tree, config, grading_main(config, self.user), uid=0)
        self.name = self.container.name
        try:
            self._runner = BwrapRunner(self.container)
        except BaseException:
            self.container.kill()
            raise

    def exec(self, argv: list[str], user: str | None = None, timeout: float = 60.0,
             limit: int | None = None) -> ExecResult:
        return self.container.run(argv, tests=user != "root", timeout=timeout,
                                  limit=limit or self.config.output_limit)

    def put_files(self, files: dict[str, bytes], dest: str, owner: int = 0) -> None:
        BwrapSandbox.container_put(self.container, files, dest)

    def alive(self) -> bool:
        return not self._closed and self.container.alive()

    def close(self) -> None:
        if self._closed:
            return
        self._closed = True
        self.close_processes()
        self.container.kill()


class GradingSandboxes:
    """What the grader takes its containers from (a pool's few methods): a new grading
    sandbox per grade, removed after it."""

    def __init__(self, images: TreeImages):
        self.images = images
        self.kinds: dict[str, Any] = {}  # the grader names its kind here; there is one

    def acquire(self, image: str, role: str = "grader", **config: Any) -> GradingBox:
        return BwrapGradingBox(SandboxConfig(image=image, role=role, **config),
                               self.images.tree(image))

    def release(self, box: GradingBox) -> None:
        box.close()

    def warm(self, image: str, role: str = "grader", **config: Any) -> None:
        """A grading sandbox starts in a fraction of a second: none is kept ahead."""


class TreeGrader:
    def __init__(self, images: TreeImages, settings: BackendSettings):
        # the grader uses a pool's acquire, release, warm and kinds, all GradingSandboxes has
        boxes: Any = GradingSandboxes(images)
        self.grader = Grader(settings.grader, pool=boxes)

    def warm(self, image: str) -> None:
        """Nothing to prepare."""

    def grade(self, task: Task, patch: str, image: str) -> GradingReport:
        return self.grader.grade(task, patch, image)


def bwrap_backend(settings: BackendSettings) -> Backend:
    images = TreeImages()
    return Backend(images, FreshSandboxes(images, settings), TreeGrader(images, settings))
