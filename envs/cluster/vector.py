"""A Gymnasium vector env whose environments run on a Ray cluster's Docker nodes."""

from __future__ import annotations

from collections.abc import Sequence
from concurrent.futures import Future
from typing import Any

import numpy as np
from gymnasium.vector import AutoresetMode, VectorEnv
from gymnasium.vector.utils import batch_space, concatenate, create_empty_array, iterate

from repogym.envs.cluster.fleet import EpisodeLost, Fleet, FleetConfig
from repogym.errors import DockerUnavailable

SLOT_WAIT = 600.0  # seconds a lost environment may wait for a replacement worker


class RayVectorEnv(VectorEnv[Any, Any, Any]):
    """``num_envs`` environments spread over the Docker nodes of a Ray cluster.

    ## Description
    The vector API of Gymnasium 1.x (``reset``, ``step`` on a batch, next-step autoreset)
    over environments that live in Ray actors on the nodes offering the ``docker`` resource
    (``ray start ... --resources='{"docker": N}'``), so any RL library that speaks Gymnasium's
    vector API gets the whole cluster. Every call runs on all environments at once; this
    process only sends actions and receives observations.

    ```python
    from repogym.envs.cluster import RayVectorEnv

    envs = RayVectorEnv(64, suite="demo", ray="auto")      # or ray="local"
    obs, infos = envs.reset(seed=0)                         # a tuple of 64 prompts
    obs, rewards, terminated, truncated, infos = envs.step(actions)
    envs.close()
    ```

    ## Spaces
    Those of the single environment (asked of a worker), batched with
    ``gymnasium.vector.utils.batch_space``: for ``repogym/SWE-v0`` a tuple of texts.

    ## Lost environments
    When an environment's worker, node or engine is lost, the episode it was running ends
    truncated (never terminated, so no reward is learned from it) with reward 0.0, an empty
    observation and ``info["lost"]`` holding the reason. The next step resets it (next-step
    autoreset, as always) on a slot of a replacement worker, waiting for one to start if
    need be. ``placement()`` says where each environment runs.

    ## Arguments
    - ``num_envs``: environments in all.
    - ``env_id``: the Gymnasium id each worker makes (default ``repogym/SWE-v0``).
    - ``ray``: ``auto`` (the running cluster), ``local`` (a private one here) or
      ``HOST:PORT``.
    - ``envs_per_worker``: environments per worker process (4).
    - every other keyword goes to ``gym.make`` on the workers (``suite=...``, ``split=...``).

    ## Version History
    - v0: first version.
    """

    def __init__(self, num_envs: int, env_id: str = "repogym/SWE-v0", ray: str = "auto",
                 envs_per_worker: int = 4, **env_kwargs: Any) -> None:
        self.fleet = Fleet(FleetConfig(env_id=env_id, env_kwargs=env_kwargs, num_envs=num_envs,
                                       envs_per_worker=min(envs_per_worker, num_envs),
                                       address=ray, needs_docker="SWE-v0" in env_id))
        self.num_envs = num_envs
        self.metadata = {"autoreset_mode": AutoresetMode.NEXT_STEP}
        self.render_mode = None
        self._spare: list[int] = []
        try:
            self._slots: list[int | None] = [self._take_slot() for _ in range(num_envs)]
            spaces = self.fleet.ray.get(self.fleet.spaces(self._take_slot_of(0)))
        except BaseException:
            self.fleet.close()
            raise
        self.single_observation_space, self.single_action_space = spaces
        self.observation_space = batch_space(self.single_observation_space, num_envs)
        self.action_space = batch_space(self.single_action_space, num_envs)
        self._obs: Any = create_empty_array(self.single_observation_space, num_envs)
        self._autoreset = np.zeros(num_envs, dtype=np.bool_)
        self.lost = 0  # episodes lost so far

    def placement(self) -> list[dict[str, Any]]:
        """Where each environment runs now: its worker's node, host and Docker engine ({} for
        one that lost its worker and has not moved yet)."""
        return [self.fleet.info(slot) if slot is not None else {} for slot in self._slots]

    def _take_slot_of(self, i: int) -> int:
        slot = self._slots[i]
        if slot is None:  # lost with its worker: it moves to a replacement's slot now
            slot = self._slots[i] = self._take_slot()
        return slot

    def _take_slot(self) -> int:
        while True:
            self._spare += self.fleet.free()
            if self._spare:
                return self._spare.pop(0)
            if not self.fleet.wait_for_slots(SLOT_WAIT):
                raise DockerUnavailable("an environment was lost and no worker of the cluster "
                                        "can take it (see `ray status`)")

    # --- the vector API ------------------------------------------------------------------------

    def reset(self, *, seed: int | Sequence[int | None] | None = None,
              options: dict[str, Any] | None = None) -> tuple[Any, dict[str, Any]]:
        seeds = _seeds(seed, self.num_envs)
        results = self._gather([(i, "reset", s) for i, s in enumerate(seeds)], options)
        infos: dict[str, Any] = {}
        obs = []
        for i, (value, lost) in enumerate(results):
            if lost:  # a reset that is lost is simply run again on the new slot
                value = self._gather([(i, "reset", seeds[i])], options)[0][0] or ("", {})
            obs.append(value[0])
            infos = self._add_info(infos, value[1], i)
        self._autoreset[:] = False
        self._obs = concatenate(self.single_observation_space, obs, self._obs)
        return self._obs, infos

    def step(self, actions: Any) -> tuple[Any, np.ndarray, np.ndarray, np.ndarray,
                                          dict[str, Any]]:
        calls = [(i, "reset", None) if self._autoreset[i] else (i, "step", action)
                 for i, action in enumerate(iterate(self.action_space, actions))]
        results = self._gather(calls, None)
        rewards = np.zeros(self.num_envs, dtype=np.float64)
        terminated = np.zeros(self.num_envs, dtype=np.bool_)
        truncated = np.zeros(self.num_envs, dtype=np.bool_)
        infos: dict[str, Any] = {}
        obs = []
        for i, ((_, kind, _), (value, lost)) in enumerate(zip(calls, results, strict=True)):
            if lost:
                obs.append("")
                truncated[i] = True
                infos = self._add_info(infos, {"lost": lost}, i)
            elif kind == "reset":
                obs.append(value[0])
                infos = self._add_info(infos, value[1], i)
            else:
                o, r, term, trunc, info = value
                obs.append(o)
                rewards[i], terminated[i], truncated[i] = float(r), bool(term), bool(trunc)
                infos = self._add_info(infos, info, i)
        self._autoreset = terminated | truncated
        self._obs = concatenate(self.single_observation_space, obs, self._obs)
        return self._obs, rewards, terminated, truncated, infos

    def _gather(self, calls: list[tuple[int, str, Any]], options: dict[str, Any] | None
                ) -> list[tuple[Any, str]]:
        """Runs every call at once; ``(value, "")`` or ``(None, why it was lost)`` each. A
        lost environment moves to another slot before this returns."""
        futures: list[Future[tuple[Any, float]]] = []
        for i, kind, arg in calls:
            slot = self._take_slot_of(i)
            futures.append(self.fleet.reset(slot, arg, options) if kind == "reset"
                           else self.fleet.step(slot, arg))
        out: list[tuple[Any, str]] = []
        for (i, _, _), future in zip(calls, futures, strict=True):
            try:
                out.append((future.result()[0], ""))
            except EpisodeLost as exc:
                self.lost += 1
                if exc.slot_reusable:
                    self.fleet.release(self._take_slot_of(i))
                self._slots[i] = None  # a new slot is taken when it resets, not now: the
                out.append((None, exc.reason))  # replacement may need its engine back first
        return out

    def close_extras(self, **kwargs: Any) -> None:
        self.fleet.close()


def _seeds(seed: int | Sequence[int | None] | None, n: int) -> list[int | None]:
    if seed is None:
        return [None] * n
    if isinstance(seed, int):
        return [seed + i for i in range(n)]
    if len(seed) != n:
        raise ValueError(f"{len(seed)} seeds for {n} environments: give one per environment")
    return list(seed)
