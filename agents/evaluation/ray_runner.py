"""The same eval run spread over a Ray cluster: one actor per CPU slot, each with its own
environment and agent, fed one task at a time (a slow task never holds up a queue behind it).

Each actor runs episodes against its own node's Docker engine and builds or reuses that node's
images (one build per image per node, under a file lock). Results come back to the driver,
which writes ``results.jsonl`` as on one machine.

Addresses: ``local`` starts a private Ray instance on this machine for the run; ``auto``
joins the cluster this machine is part of (``ray start --head`` here, or ``ray start
--address=HEAD:6379`` on a worker node); anything else is passed to ``ray.init(address=...)``
(``HEAD:6379``, or ``ray://HEAD:10001`` for Ray Client). Every node that runs actors needs
Docker, the same repogym installation, and the suite's sources at the same path; when some
nodes offer the custom resource ``docker`` (``ray start --resources='{"docker": N}'``), actors
run only on those.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from repogym.agents.evaluation.episode import Failure, Worker, error_row
from repogym.agents.evaluation.rows import ResultRow
from repogym.progress import Progress
from repogym.ray_cluster import connect, ray_module, slots
from repogym.schema import Task

OnResult = Callable[[ResultRow], None]


class _Actor:
    """Holds one worker for the actor's lifetime (so its env and agent are reused)."""

    def __init__(self, make_worker: Callable[[], Worker]) -> None:
        self.worker = make_worker()

    def run(self, task: Task) -> ResultRow:
        return self.worker.run(task)

    def close(self) -> None:
        self.worker.close()


def run_on_ray(address: str, workers: int | None, make_worker: Callable[[], Worker],
               tasks: list[Task], on_result: OnResult,
               message: Progress = print, retries: int = 1) -> None:
    """Runs every task on Ray, calling ``on_result`` on the driver as each one finishes.

    An actor that dies (its node lost, its process killed) is replaced, and its task runs
    again up to ``retries`` times before it is reported as an infrastructure failure.
    """
    if not tasks:
        return
    ray = ray_module()
    started = connect(address, workers)
    # nodes that offer the `docker` resource (as for `repogym train --ray`) are the only ones
    # with an engine: when the cluster names them, actors go there and nowhere else
    docker = {"docker": 1} if ray.cluster_resources().get("docker") else {}
    remote = ray.remote(num_cpus=1, resources=docker)(_Actor)

    def spawn() -> Any:
        # SPREAD: the actors go to as many nodes as there are, not all onto the head node
        return remote.options(scheduling_strategy="SPREAD").remote(make_worker)

    actors = [spawn() for _ in range(slots(workers, len(tasks), message))]
    message(f"ray: {len(actors)} workers on {len(ray.nodes())} nodes")
    queue, tries = list(tasks), {t.instance_id: 0 for t in tasks}
    pending: dict[Any, tuple[Any, Task]] = {}

    def submit(actor: Any) -> None:
        task = queue.pop(0)
        tries[task.instance_id] += 1
        pending[actor.run.remote(task)] = (actor, task)

    try:
        for actor in actors[: len(queue)]:
            submit(actor)
        while pending:
            [ref], _ = ray.wait(list(pending), num_returns=1)
            actor, task = pending.pop(ref)
            try:
                on_result(ray.get(ref))
            except ray.exceptions.RayActorError as exc:
                actor = spawn()
                actors.append(actor)
                if tries[task.instance_id] <= retries:
                    queue.insert(0, task)
                else:
                    on_result(error_row(task, Failure("infrastructure", exc), {}))
            except ray.exceptions.RayTaskError as exc:  # the worker itself raised: a bug
                on_result(error_row(task, Failure("internal", exc), {}))
            if queue:
                submit(actor)
    finally:
        _stop(ray, actors)
        if started:
            ray.shutdown()


def _stop(ray: Any, actors: list[Any]) -> None:
    closing = [a.close.remote() for a in actors]
    try:
        ray.wait(closing, num_returns=len(closing), timeout=120)
    finally:
        for actor in actors:
            ray.kill(actor)
