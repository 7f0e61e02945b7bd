"""Starts from where agents fail.

An env made with ``failure_starts=K`` snapshots its episode after every step that does not end
it, keeping the last K snapshots (:class:`FailureTracker`). When the episode is graded and
not resolved, the snapshot taken K turns before its end is kept in the statistics store's
failure bank for that task, beside its prefix: the turns (action, observation) up to it, and
what it continues (the failed episode's record, steps, reward). The others are deleted.

``reset(options={"start": "failure"})`` (or a sampler's ``failure=P``) then starts an episode
from one of them: the files, the shell's folder and exported variables as they were, the
budgets as they stood, the prefix's turns given to the policy in the first observation (and
in ``info["prefix_turns"]``), and a record that names the episode it continues.

Only graded failures are kept: an episode truncated by a budget would restart with that
budget nearly spent. Snapshots need a container engine (docker or podman); each costs about a
verified in-place reset, paid on every step while ``failure_starts`` is on.
"""

from __future__ import annotations

import json
import random
import warnings
from collections import deque
from collections.abc import Callable
from pathlib import Path
from typing import Any

from repogym.envs.curriculum.stats import StatsStore
from repogym.errors import RepogymError

TRANSCRIPT_CHARS = 4_000  # of each observation in the first observation's transcript
TURNS_FILE, META_FILE = "turns.json", "failure.json"


def usable(entry: dict[str, Any]) -> bool:
    return Path(entry["snapshot"]["folder"], "files.tar").exists()


def choose(store: Any, task_id: str, rng: random.Random) -> dict[str, Any] | None:
    """One kept failure of ``task_id`` whose files are here (others are forgotten)."""
    entries = store.failures(task_id)
    here = [e for e in entries if usable(e)]
    for gone in (e for e in entries if not usable(e)):
        store.drop_failure(task_id, gone["snapshot"]["id"])
    return here[rng.randrange(len(here))] if here else None


def prefix(folder: str) -> tuple[list[dict[str, str]], dict[str, Any]]:
    """A failure snapshot's turns and what it continues."""
    where = Path(folder)
    turns = json.loads((where / TURNS_FILE).read_text()) if (where / TURNS_FILE).exists() else []
    meta = json.loads((where / META_FILE).read_text()) if (where / META_FILE).exists() else {}
    return turns, meta


def transcript(prompt: str, turns: list[dict[str, str]]) -> str:
    """The first observation of a failure start: the task prompt, then the prefix's turns."""
    lines = [prompt, "", "---", f"An earlier attempt at this task made the {len(turns)} "
             "calls below. The repository, the shell's working folder and its exported "
             "variables are as they were after the last of them: continue from there."]
    for n, turn in enumerate(turns, 1):
        obs = turn["observation"]
        if len(obs) > TRANSCRIPT_CHARS:
            half = TRANSCRIPT_CHARS // 2
            obs = f"{obs[:half]}\n[... {len(obs) - 2 * half} characters cut ...]\n{obs[-half:]}"
        lines += [f"[call {n}] {turn['action']}", f"[output {n}]", obs]
    return "\n".join(lines)


class FailureTracker:
    """One env's snapshots of its episode in progress, and its turns so far."""

    def __init__(self, store: Any, rewind: int) -> None:
        self.store, self.rewind = store, rewind
        self.turns: list[dict[str, str]] = []
        self._ring: deque[Any] = deque()

    def begin(self, turns: list[dict[str, str]]) -> None:
        """A new episode, opening with ``turns`` (a failure start's prefix, else none)."""
        self.abandon()
        self.turns = list(turns)

    def stepped(self, action: Any, observation: str, take: Callable[[], Any] | None) -> None:
        """Notes a step; ``take`` snapshots the episode (None when the step ended it)."""
        if not self.rewind:
            return
        text = action if isinstance(action, str) else json.dumps(action, default=str)
        self.turns.append({"action": text, "observation": observation})
        if take is None:
            return
        try:
            self._ring.append(take())
        except RepogymError as exc:  # the episode goes on; only this failure start is lost
            warnings.warn(f"no snapshot for a failure start after this step: {exc}",
                          stacklevel=3)
        while len(self._ring) > self.rewind:
            self._ring.popleft().delete()

    def ended(self, task_id: str, steps: int, failed: bool, meta: dict[str, Any]) -> bool:
        """At the end of an episode of ``steps`` steps: banks the snapshot ``rewind`` turns
        before the end when it ``failed``; True when one was banked."""
        banked = False
        at = steps - self.rewind
        snap = next((s for s in self._ring if s.steps == at), None)
        if failed and self.rewind and snap is not None and at >= 1:
            self._ring.remove(snap)
            # the last turn is step `steps`: the prefix is all but the last `rewind`
            bank(self.store, snap, self.turns[:len(self.turns) - self.rewind],
                 {**meta, "rewind": self.rewind, "parent_steps": steps})
            banked = True
        self.abandon()
        return banked

    def abandon(self) -> None:
        while self._ring:
            self._ring.popleft().delete()


def bank(store: StatsStore | Any, snap: Any, turns: list[dict[str, str]],
         meta: dict[str, Any]) -> None:
    """Keeps ``snap`` as a failure start of its task, its prefix beside its files."""
    folder = Path(snap.folder)
    (folder / TURNS_FILE).write_text(json.dumps(turns))
    meta = {**meta, "snapshot": snap.id, "task_id": snap.task_id, "step": snap.steps}
    (folder / META_FILE).write_text(json.dumps(meta, default=str))
    store.add_failure(snap.task_id, {"snapshot": snap.to_dict(), "time": snap.created,
                                     "parent_record": meta.get("parent_record")})
