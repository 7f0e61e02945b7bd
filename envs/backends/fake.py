"""The fake backend: no Docker at all. A task's "image" is a local folder holding its source at
the base commit (a one-commit repository, as in a real image), its sandboxes are copies of that
folder with a local bash (:class:`~repogym.sandbox.fake.FakeSandbox`), and its grader runs
the tests in another copy (:class:`~repogym.envs.grading.local.LocalGrader`).

For fast tests of the code above the sandbox: it isolates nothing, limits nothing and defends
against nothing.
"""

from __future__ import annotations

import hashlib
import shutil
import tempfile
import time
import weakref
from pathlib import Path
from typing import Any

from repogym.envs.backends.seams import Backend, BackendSettings
from repogym.envs.grading.local import LocalGrader
from repogym.images.recipe import BuiltImage
from repogym.repo import export_tree, snapshot
from repogym.sandbox.base import Sandbox, SandboxConfig
from repogym.sandbox.fake import FakeSandbox
from repogym.schema import Task


class FolderImages:
    """One folder per task source and commit, made once, removed with the provider."""

    def __init__(self) -> None:
        self.root = Path(tempfile.mkdtemp(prefix="repogym-images-"))
        self._remove = weakref.finalize(self, shutil.rmtree, self.root, True)
        self._built: dict[str, BuiltImage] = {}
        self.folders: dict[str, Path] = {}

    def ensure(self, task: Task) -> BuiltImage:
        key = hashlib.sha256(f"{task.source}\0{task.base_commit}".encode()).hexdigest()[:12]
        tag = f"fake/{key}"
        if tag not in self._built:
            start = time.monotonic()
            tree = self.root / key / "testbed"
            export_tree(task.source or "", task.base_commit, tree)
            commit = snapshot(tree)
            self.folders[tag] = tree
            self._built[tag] = BuiltImage(tag, commit, False, time.monotonic() - start)
        return self._built[tag]

    def provenance(self, image: BuiltImage) -> dict[str, Any]:
        return {"image": f"tree:{image.repo_commit}", "docker_engine": None, "engine": None}


class FolderSandboxes:
    """A fresh copy of the image's folder per episode, always at the same path (the env's one
    sandbox at a time), so that the first observation is the same for the same seed; used ones
    are removed."""

    def __init__(self, images: FolderImages, settings: BackendSettings):
        self.images, self.settings = images, settings
        self.path = images.root / "sandbox"

    def acquire(self, image: BuiltImage, returning: Sandbox | None) -> Sandbox:
        if returning is not None:
            returning.close()
        config = SandboxConfig(image=image.tag, run_id=self.settings.run_id,
                               output_limit=self.settings.output_limit)
        # a sandbox the env still holds keeps its folder: the new one takes a temporary one
        root = None if self.path.exists() else self.path
        return FakeSandbox(config, source=self.images.folders[image.tag], root=root)

    def release(self, sandbox: Sandbox) -> None:
        sandbox.close()

    def discard(self, sandbox: Sandbox) -> None:
        sandbox.close()

    def close(self) -> None:
        """Nothing is held between episodes."""


def fake_backend(settings: BackendSettings) -> Backend:
    images = FolderImages()
    return Backend(images, FolderSandboxes(images, settings), LocalGrader(settings.grader))
