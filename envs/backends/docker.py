"""The Docker backend: images built by :mod:`repogym.images.repository`, containers from a warm pool
(the process's shared one by default, see :mod:`repogym.envs.pooling`), grading in a fresh
container of the same image."""

from __future__ import annotations

from typing import Any

from repogym.envs import pooling
from repogym.envs.backends.seams import Backend, BackendSettings
from repogym.envs.grading.grader import GraderConfig, GradingReport
from repogym.images.recipe import BuiltImage, image_info
from repogym.images.repository import ensure_image, image_tag
from repogym.sandbox.base import Sandbox
from repogym.sandbox.client import current_engine, docker_client
from repogym.sandbox.features import engine_features
from repogym.sandbox.pool import SandboxPool
from repogym.sandbox.shared import PoolKey
from repogym.schema import Task


class DockerImages:
    """Task images, built or looked up once per provider."""

    def __init__(self) -> None:
        self._built: dict[str, BuiltImage] = {}

    def ensure(self, task: Task) -> BuiltImage:
        tag = image_tag(task)
        if tag not in self._built:
            self._built[tag] = ensure_image(task, progress=lambda _msg: None)
        return self._built[tag]

    def provenance(self, image: BuiltImage) -> dict[str, Any]:
        out: dict[str, Any] = {"image": None, "docker_engine": None, "engine": None}
        try:
            out["image"] = str(image_info(image.tag)["id"])
            features = engine_features(docker_client())
            out["docker_engine"], out["engine"] = features.version, features.kind
        except Exception:  # noqa: BLE001 - a record without them is still a record
            pass
        return out


class PoolSandboxes:
    """Containers from a pool: the process's shared one (``pool_size=None``) or the env's own.
    The pool's grader comes with it: a leased pool's is the parent process's."""

    def __init__(self, settings: BackendSettings):
        self.settings = settings
        self.pool: pooling.Pool | None = None
        self.grader: Any = None
        self._shared = False
        self._open()

    def _open(self) -> None:
        s = self.settings
        if s.pool_size is not None:
            self.pool = SandboxPool(size=s.pool_size, reuse=s.reuse_containers,
                                    grader_size=int(s.warm_grader), run_id=s.run_id)
        else:
            self._shared = True
            engine = current_engine()  # envs on other engines never share containers
            self.pool = pooling.open_pool(PoolKey(s.run_id, s.output_limit, s.reuse_containers,
                                                  s.warm_grader, s.grader or GraderConfig(),
                                                  engine.url if engine else None))
        self.grader = pooling.grader_for(self.pool, s.grader)

    def acquire(self, image: BuiltImage, returning: Sandbox | None) -> Sandbox:
        if self.pool is None:  # a reset after close(): the env opens its pool again
            self._open()
        assert self.pool is not None
        return self.pool.acquire(image.tag, returning=returning, run_id=self.settings.run_id,
                                 output_limit=self.settings.output_limit)

    def release(self, sandbox: Sandbox) -> None:
        if self.pool is not None:
            self.pool.release(sandbox)
        else:
            sandbox.close()

    def discard(self, sandbox: Sandbox) -> None:
        if self.pool is not None:
            self.pool.discard(sandbox)  # closing: no point resetting it for reuse
        else:
            sandbox.close()

    def close(self) -> None:
        if self.pool is None:
            return
        pool, self.pool = self.pool, None
        pooling.close_pool(pool) if self._shared else pool.close()


class PoolGrader:
    """The grader of the sandboxes' current pool (opened again after a close)."""

    def __init__(self, sandboxes: PoolSandboxes):
        self.sandboxes = sandboxes

    def warm(self, image: str) -> None:
        self.sandboxes.grader.warm(image)

    def grade(self, task: Task, patch: str, image: str) -> GradingReport:
        report: GradingReport = self.sandboxes.grader.grade(task, patch, image)
        return report


def docker_backend(settings: BackendSettings) -> Backend:
    sandboxes = PoolSandboxes(settings)
    return Backend(DockerImages(), sandboxes, PoolGrader(sandboxes))
