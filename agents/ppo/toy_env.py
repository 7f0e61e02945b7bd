"""Tiny text environments that test the PPO agent in seconds, without Docker.

`repogym/ToyText-v0` rewards the policy's own characters, so a learner must improve on it;
`repogym/ToyTextControl-v0` scores a string the environment draws itself, so its reward ignores
the policy and must stay flat whatever the learner does.
"""

from __future__ import annotations

import json
import string
import time
import uuid
from pathlib import Path
from typing import Any

import gymnasium as gym
from gymnasium import spaces

TOY_ID = "repogym/ToyText-v0"
CONTROL_ID = "repogym/ToyTextControl-v0"

# Kept short: with a byte-level tokenizer every character of the schema is a token.
TOOLS = [{"type": "function", "function": {"name": "say", "parameters": {"type": "object"}}}]


class ToyTextEnv(gym.Env[str, str]):
    """Write lowercase letters, in several turns.

    ## Action space
    Any string: the text the policy wrote this turn.

    ## Observation space
    A string: the task prompt after `reset`, then a short note on each turn.

    ## Rewards
    0 on every step but the last. On the last turn the reward is the fraction of all characters
    written over the episode that are in `target` (0 when nothing was written). Characters of
    a random byte-level policy are lowercase letters about a fifth of the time. With
    `control=True` the same score is computed on a random string drawn by the environment, so
    the reward does not depend on the actions at all.

    ## Episode end
    Terminates after `turns` actions; never truncates.

    ## Arguments
    `turns`, `target`, `control`, `record_dir` (one JSON Lines file per episode, like the
    SWE environment's records).

    ## Snapshots
    `snapshot()` returns the episode's state (a dict); `reset(options={"snapshot": state})`
    continues from it, as the SWE environment's snapshots do (for tests of `--fork-at`).

    ## Info
    `reset`: `task_id`, `split`, `tools`, and `record` (the record file) with `record_dir`.
    Last step: `reward_components` with `resolved` (every
    character on target) and `score`.

    ## Version history
    v0: first version.
    """

    metadata: dict[str, Any] = {"render_modes": []}

    def __init__(self, turns: int = 2, target: str = string.ascii_lowercase,
                 control: bool = False, record_dir: str | Path | None = None) -> None:
        if turns < 1 or not target:
            raise ValueError(f"turns must be >= 1 and target non-empty (got {turns}, {target!r})")
        self.turns, self.target, self.control = turns, frozenset(target), control
        self.record_dir = Path(record_dir) if record_dir is not None else None
        self.observation_space = spaces.Text(max_length=1024, charset=string.printable)
        self.action_space = spaces.Text(max_length=4096, charset=string.printable)
        self._written: list[str] = []
        self._task = 0
        self._record: Path | None = None
        self._last = ""

    def reset(self, *, seed: int | None = None, options: dict[str, Any] | None = None
              ) -> tuple[str, dict[str, Any]]:
        super().reset(seed=seed)
        self._written = []
        self._task = int(self.np_random.integers(1000))
        snap = (options or {}).get("snapshot")
        parent = None
        if snap is not None:
            self._task, self._written, parent = snap["task"], list(snap["written"]), snap["id"]
        task_id = f"toy-{self._task:03d}"
        prompt = f"Task {task_id}: write lowercase letters."
        obs = snap["observation"] if snap is not None else prompt
        info: dict[str, Any] = {"task_id": task_id, "split": "train", "tools": TOOLS}
        if self.record_dir is not None:
            self.record_dir.mkdir(parents=True, exist_ok=True)
            self._record = self.record_dir / f"{task_id}-{uuid.uuid4().hex[:8]}.jsonl"
            self._log({"event": "reset", "task_id": task_id, "prompt": prompt,
                       "fork": parent and {"snapshot": parent, "step": len(self._written)}})
            info["record"] = str(self._record)
        if snap is not None:
            info["snapshot"] = parent
        self._last = obs
        return obs, info

    def snapshot(self) -> dict[str, Any]:
        return {"id": uuid.uuid4().hex[:8], "task": self._task, "written": list(self._written),
                "observation": self._last}

    def step(self, action: str) -> tuple[str, float, bool, bool, dict[str, Any]]:
        self._written.append(str(action))
        turn = len(self._written)
        info: dict[str, Any] = {}
        reward, terminated = 0.0, turn >= self.turns
        obs = f"Turn {turn} of {self.turns} done."
        self._last = obs
        if terminated:
            text = self._random_text() if self.control else "".join(self._written)
            reward = score(text, self.target)
            info["reward_components"] = {"resolved": reward == 1.0, "score": reward}
        self._log({"event": "step", "action": action, "observation": obs, "reward": reward})
        return obs, reward, terminated, False, info

    def _random_text(self) -> str:
        chars = [chr(int(c)) for c in self.np_random.integers(32, 127, size=8)]
        return "".join(chars)

    def _log(self, line: dict[str, Any]) -> None:
        if self._record is not None:
            with self._record.open("a") as f:
                f.write(json.dumps({**line, "time": time.time()}) + "\n")


def score(text: str, target: frozenset[str]) -> float:
    """Fraction of the characters of `text` that are in `target`; 0 for empty text."""
    return sum(c in target for c in text) / len(text) if text else 0.0


def register_toy_envs() -> None:
    for env_id, kwargs in ((TOY_ID, {}), (CONTROL_ID, {"control": True})):
        if env_id not in gym.registry:
            gym.register(id=env_id, entry_point="repogym.agents.ppo.toy_env:ToyTextEnv",
                         kwargs=kwargs, disable_env_checker=True)


register_toy_envs()
