"""Joining or starting a Ray cluster, and sizing the work to it: what ``repogym eval --ray`` and
``repogym tasks add --ray`` share (:mod:`repogym.agents.evaluation.ray_runner`,
:mod:`repogym.tasks.ray_checking`). Ray is imported only when a run asks for it."""

from __future__ import annotations

import os
from typing import Any

from repogym.progress import Progress


def ray_module() -> Any:
    """The ``ray`` package, or a ValueError that says how to install it."""
    try:
        import ray  # an optional dependency, and seconds to import
    except ImportError as exc:
        raise ValueError("--ray needs Ray: pip install 'repogym[ray]' (or 'ray>=2.9')") from exc
    return ray


def connect(address: str, workers: int | None) -> bool:
    """Joins or starts Ray; True when this call started it (and so must shut it down).
    ``local`` starts a private Ray on this machine, ``auto`` joins the cluster this machine
    belongs to, anything else goes to ``ray.init(address=...)``."""
    ray = ray_module()
    if ray.is_initialized():
        return False
    if address == "local":
        cpus = max(workers or 0, os.cpu_count() or 1)
        ray.init(address="local", num_cpus=cpus, include_dashboard=False)
    else:
        ray.init(address=address)
    return True


def slots(workers: int | None, n_tasks: int, message: Progress) -> int:
    """Actors to start: ``workers`` (default: every CPU slot), never more than the cluster's
    CPU slots, nor its ``docker`` slots when it has some (the extra actors would only wait), nor
    than there are tasks."""
    resources = ray_module().cluster_resources()
    cpus = int(resources.get("CPU", 1))
    if resources.get("docker"):
        cpus = min(cpus, int(resources["docker"]))
    wanted = workers or cpus
    if wanted > cpus:
        message(f"the cluster has {cpus} slots: running {cpus} workers, not {wanted}")
        wanted = cpus
    return max(1, min(wanted, n_tasks))
