"""repogym in skyrl-gym: a text environment for SkyRL's trainers.

skyrl-gym's environments take the model's text as the action and answer with chat messages.
Here each one holds a ``repogym/SWE-v0`` environment: ``init`` resets it to the row's task and
appends the task prompt as a user turn; ``step`` passes the model's text on as is (the env reads
a ``<tool_call>`` block or a JSON call from it, and answers a malformed one with how to call a
tool); the episode ends when the model submits, or after ``max_turns``, when the work so far is
submitted and graded. The reward is the env's graded reward; its components are in the step's
metadata.

Example::

    from repogym.agents import skyrl_env
    skyrl_env.register()                     # the id "repogym" in skyrl_gym's registry
    rows = skyrl_env.dataset_rows("demo")    # {"prompt", "env_class", "task_id", ...} per task
    env = skyrl_gym.make("repogym", env_config={"suite": "demo"}, extras=rows[0])
    messages, info = env.init(rows[0]["prompt"])

``env_config`` holds ``gym.make`` arguments (``suite``, ``split``, ``reward``, ...) and
``max_turns``; a row's extras name its task as ``task_id`` (or ``extra_info.task_id``).

With a curriculum (``env_config={"sampler": "band:0.1-0.9", "group_size": 4, ...}``, see
docs/curricula.md) rows name groups instead (``dataset_rows(suite, sampled=N)``: ``task_id``
``"sample"`` and a ``group`` key). SkyRL makes one env per sample of a row in one process; the
first of a group to ``init`` draws (a task, maybe a kept failure to start from) and the next
``group_size - 1`` play the same draw, so a group compares samples of one task.
"""

from __future__ import annotations

import random
import threading
from typing import Any

import gymnasium as gym
from skyrl_gym.envs.base_text_env import BaseTextEnv, BaseTextEnvStepOutput

from repogym.agents.llm import SYSTEM_PROMPT
from repogym.envs.curriculum.draws import draw
from repogym.suite import load_suite

ENV_ID = "repogym"
DEFAULT_MAX_TURNS = 30
SAMPLE = "sample"  # a row's task_id when the curriculum draws its task


class GroupDraws:
    """One draw per group of ``group_size`` inits with the same group key (this process)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._open: dict[str, tuple[dict[str, Any], int]] = {}
        self._rng = random.Random(0)

    def options(self, key: str, group_size: int, env: Any) -> dict[str, Any]:
        with self._lock:
            options, used = self._open.get(key, ({}, group_size))
            if used >= group_size:
                base = env.unwrapped
                options, used = draw(base.tasks, base.curriculum, base.task_stats,
                                     self._rng).options(), 0
            self._open[key] = (options, used + 1)
            return options


GROUPS = GroupDraws()


def register(env_id: str = ENV_ID) -> None:
    """Registers :class:`RepogymTextEnv` in skyrl_gym's registry (once)."""
    import skyrl_gym

    if env_id not in skyrl_gym.envs.registration.registry:
        skyrl_gym.register(id=env_id, entry_point=f"{__name__}:RepogymTextEnv")


def dataset_rows(suite: str = "demo", split: str = "train", env_id: str = ENV_ID,
                 sampled: int = 0) -> list[dict[str, Any]]:
    """SkyRL dataset rows, one per task of ``split``: the system prompt alone (the task's
    prompt comes from the environment at ``init``), the env class and the task's id; with
    ``sampled=N``, N rows whose tasks a curriculum draws (``env_config["sampler"]``)."""
    if sampled:
        return [{"data_source": f"repogym/{suite}", "env_class": env_id,
                 "prompt": [{"role": "system", "content": SYSTEM_PROMPT}], "task_id": SAMPLE,
                 "group": f"sample-{i}", "reward_spec": {"method": "rule"}}
                for i in range(sampled)]
    return [{"data_source": f"repogym/{suite}", "env_class": env_id,
             "prompt": [{"role": "system", "content": SYSTEM_PROMPT}],
             "task_id": task.instance_id, "reward_spec": {"method": "rule"}}
            for task in load_suite(suite, split)]


def _task_id(extras: dict[str, Any]) -> str:
    task_id = extras.get("task_id") or (extras.get("extra_info") or {}).get("task_id")
    if not task_id:
        raise ValueError("a repogym row names its task: put task_id (or extra_info.task_id) "
                         "in the dataset row; dataset_rows(suite) writes such rows")
    return str(task_id)


class RepogymTextEnv(BaseTextEnv):  # type: ignore[misc]  # skyrl_gym ships no type hints
    """One repogym episode behind skyrl-gym's ``init``/``step``/``close``."""

    def __init__(self, env_config: Any = None, extras: dict[str, Any] | None = None) -> None:
        super().__init__()
        config: dict[str, Any] = dict(env_config or {})
        extras = extras or {}
        self.task_id = _task_id(extras)
        self.max_turns = int(extras.get("max_turns", config.pop("max_turns", DEFAULT_MAX_TURNS)))
        self.group_size = int(config.pop("group_size", 1))
        self.group = str(extras.get("group") or extras.get("uid") or id(self))
        if self.task_id == SAMPLE and not config.get("sampler"):
            raise ValueError("a 'sample' row draws its task from a curriculum: put sampler "
                             "(e.g. band:0.1-0.9) and group_size in env_config")
        self.env = gym.make("repogym/SWE-v0", **config)
        self.info: dict[str, Any] = {}

    def init(self, prompt: list[dict[str, str]] | None = None
             ) -> tuple[list[dict[str, str]], dict[str, Any]]:
        options = ({"task_id": self.task_id} if self.task_id != SAMPLE
                   else GROUPS.options(self.group, self.group_size, self.env))
        obs, info = self.env.reset(options=options)
        self.turns, self.info = 0, {}
        messages = [*(prompt or []), {"role": "user", "content": obs}]
        if info.get("start") == "failure":  # the failed episode's turns as earlier chat turns
            messages[-1]["content"] = info["prompt"]
            for turn in info["prefix_turns"]:
                messages += [{"role": "assistant", "content": turn["action"]},
                             {"role": "user", "content": turn["observation"]}]
        return messages, {"task_id": info["task_id"], "tools": info["tools"],
                          "start": info["start"]}

    def step(self, action: str) -> BaseTextEnvStepOutput:
        self.turns += 1
        obs, reward, terminated, truncated, info = self.env.step(action)
        if not (terminated or truncated) and self.turns >= self.max_turns:
            # out of turns: the work so far is graded, as the PPO trainer and TRL adapter do
            obs, reward, terminated, truncated, info = self.env.step({"tool": "submit"})
        done = bool(terminated or truncated)
        self.info = info
        metadata = {key: info[key] for key in ("resolved", "reward_components", "flags")
                    if key in info}
        return BaseTextEnvStepOutput(
            observations=[] if done else [{"role": "user", "content": obs}],
            reward=float(reward), done=done, metadata=metadata)

    def get_metrics(self) -> dict[str, Any]:
        return {"turns": self.turns, "resolved": float(bool(self.info.get("resolved")))}

    def close(self) -> None:
        self.env.close()
