"""What a grading run saw and decided: the :class:`GradingReport` (``info["grading"]``)."""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import asdict, dataclass, field
from typing import Any

from repogym.envs.grading.flags import Flag, Protected

# the stages of one grade, in order: the container taken, the patches staged, the test run, the
# decoy run, the results collected from the container, the verdict
STAGES = ("acquire", "stage", "run", "decoy", "collect", "score")


@dataclass
class GradingReport:
    """Everything the grader saw and decided. ``info["grading"]`` is its ``to_dict()``."""

    instance_id: str
    resolved: bool = False
    valid: bool = True
    patch_applied: bool = False
    empty_patch: bool = True
    compiles: bool | None = None
    imports: bool | None = None
    fail_to_pass: dict[str, str] = field(default_factory=dict)
    pass_to_pass: dict[str, str] = field(default_factory=dict)
    f2p_pass_rate: float = 0.0
    p2p_pass_rate: float = 0.0
    stripped: dict[str, Protected] = field(default_factory=dict)  # path: why it was removed
    changed: list[str] = field(default_factory=list)  # paths the applied patch touches
    flags: list[Flag] = field(default_factory=list)
    invalid_reasons: list[str] = field(default_factory=list)
    canaries: dict[str, str] = field(default_factory=dict)
    canary_note: str = ""  # where the canaries went and why there, or why there are none
    statuses: dict[str, str] = field(default_factory=dict)
    # test files that failed to collect: their tests errored; pytest's plain run would have
    # stopped there (nothing passes), so the run does not resolve
    collection_errors: list[str] = field(default_factory=list)
    swebench_status: str = ""
    exit_code: int | None = None
    timed_out: bool = False
    test_seconds: float = 0.0
    total_seconds: float = 0.0
    image: str = ""
    log_tail: str = ""
    differential: dict[str, Any] | None = None  # replication tasks: agreement with the reference
    warm_pytest: bool = False  # the tests ran in the pytest imported ahead of time
    shadowed: list[str] = field(default_factory=list)  # "module:path" imported from elsewhere
    disguised: dict[str, str] = field(default_factory=dict)  # test file: its name in the run
    decoys: dict[str, str] = field(default_factory=dict)  # decoy run: node id: status
    decoy_seconds: float = 0.0
    decoy_warm: bool = False  # the decoy run ran in a second pytest imported ahead of time
    # wall seconds of each stage of the grade (STAGES; "decoy" overlaps "run" when the two
    # runs go at once): what `repogym bench` reports
    stages: dict[str, float] = field(default_factory=dict)

    def invalidate(self, reason: str, flag: Flag | None = None) -> None:
        self.valid = False
        self.invalid_reasons.append(reason)
        if flag and flag not in self.flags:
            self.flags.append(flag)

    @contextmanager
    def timed(self, stage: str) -> Iterator[None]:
        """Adds the wall time of the block to ``stages[stage]``."""
        start = time.monotonic()
        try:
            yield
        finally:
            self.stages[stage] = self.stages.get(stage, 0.0) + time.monotonic() - start

    def flag_names(self) -> list[str]:
        """The flags as the plain names results files hold."""
        return [str(flag) for flag in self.flags]

    def to_dict(self) -> dict[str, Any]:
        data = asdict(self)
        data["flags"] = self.flag_names()
        return data


def report_json(report: GradingReport) -> str:
    return json.dumps(report.to_dict(), sort_keys=True)
