"""A result row: one line of ``results.jsonl``, what one worker made of one task.

The row stays a dict (it is written as JSON and read back by summaries, reports and resumed
runs, older files included); :class:`ResultRow` names its fields and their types.
"""

from __future__ import annotations

from typing import Any, Literal, TypedDict

# where an episode's exception came from (see ``episode.py``'s docstring)
ErrorKind = Literal["agent", "infrastructure", "task", "internal"]


class ResultRow(TypedDict, total=False):
    instance_id: str
    repo: str
    kind: str  # the task's kind (swe, replication, ...)
    split: str
    task_hash: str
    resolved: bool
    reward: float
    reward_components: dict[str, Any]
    steps: int
    flags: list[str]  # the grader's flags (``repogym.envs.grading.flags.Flag`` values)
    truncation: str | None  # why the episode was cut short, None when it was not
    empty_patch: bool | None
    error_kind: ErrorKind | None  # None: the episode ended without an exception
    error: str | None
    traceback: str
    attempts: int
    record: str | None  # the episode's record file
    image: str | None
    image_id: str | None
    host: str
    timings: dict[str, float]  # seconds per phase (reset, agent, env, grading, total)
    agent_stop: str | None  # why the agent stopped, when it says
    model: str | None  # predictions: the model that wrote the patch
    swebench: dict[str, Any]  # predictions: swebench's instance report
