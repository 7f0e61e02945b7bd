"""One confirming full run for several kept candidates of a snapshot (``--confirm-batch``).

A candidate that its selected runs keep still needs a run of the whole suite: the tests its
change was not mapped to must keep their outcomes. Candidates of one snapshot whose changes
reach disjoint sets of tests can share that run: their changes are applied together and the
suite runs once. The run confirms all of them when every test

- that one member's change reaches has the outcome that member's own selected run gave, and
- that no member's change reaches has one of the outcomes the snapshot's own runs gave.

Anything else (a test moved that no map predicted, a combined change that does not apply, a
run that failed) and each member is confirmed alone, as with a batch of one. How the lists can
then differ from those of a member's own full run: only when a member's change moves a test its
map does not reach (a map miss) while another member's change moves the same test the same way,
so that the shared run cannot tell them apart; both changes would have to break the same test
that one of them is not known to run.

Concurrency: a ``Gate`` lets ``workers`` checks work at once. A check that waits for its
batch steps out of the gate, so that further candidates are checked meanwhile; when every check
in flight is waiting, the open batches run as they are (no batch waits for a candidate that
cannot come).
"""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field

from repogym.envs.grading.grader import GradingReport


class Gate:
    """At most ``workers`` checks work at once (see the module docstring)."""

    def __init__(self, workers: int) -> None:
        self.workers = workers
        self._cond = threading.Condition()
        self._free = workers
        self._busy = 0  # checks working or waiting to work (not those waiting for a batch)
        self._inside = threading.local()
        self.on_idle: list[Callable[[], None]] = []

    @property
    def busy(self) -> int:
        """Checks working or waiting to work."""
        with self._cond:
            return self._busy

    def inside(self) -> bool:
        return bool(getattr(self._inside, "held", False))

    @contextlib.contextmanager
    def working(self) -> Iterator[None]:
        self._enter()
        try:
            yield
        finally:
            self._leave()

    @contextlib.contextmanager
    def stepped_out(self) -> Iterator[None]:
        self._leave()
        try:
            yield
        finally:
            self._enter()

    def _enter(self) -> None:
        with self._cond:
            self._busy += 1
            while self._free == 0:
                self._cond.wait()
            self._free -= 1
        self._inside.held = True

    def _leave(self) -> None:
        self._inside.held = False
        with self._cond:
            self._free += 1
            self._busy -= 1
            idle = self._busy == 0
            self._cond.notify_all()
        if idle:
            for hook in self.on_idle:
                hook()


@dataclass
class Member:
    """One kept candidate waiting for its confirming run."""

    instance_id: str
    patch: str  # its change to the snapshot
    affected: frozenset[str]  # the tests its change reaches (the map's)
    selected: dict[str, set[str]]  # outcomes of its selected runs, per test


@dataclass
class _Batch:
    members: list[Member] = field(default_factory=list)
    closed: bool = False
    runner: Member | None = None
    done: bool = False
    report: GradingReport | BaseException | None = None

    def accepts(self, member: Member) -> bool:
        return all(not (m.affected & member.affected) for m in self.members)

    def patch(self) -> str:
        return "".join(m.patch if m.patch.endswith("\n") else m.patch + "\n"
                       for m in self.members)


@dataclass(frozen=True)
class Shared:
    """A confirming run shared by ``members`` (the member's own among them)."""

    report: GradingReport
    members: tuple[Member, ...]

    def outcomes(self, member: Member) -> dict[str, str]:
        """The member's own outcomes in the shared run: those of its selected tests but the
        ones another member's change reaches (its sample may hold some: theirs, there)."""
        others = set().union(*(m.affected for m in self.members if m is not member))
        return {t: s for t, s in self.report.statuses.items()
                if t in member.selected and t not in others}


class Batches:
    """Open batches per snapshot image; ``size`` members at most. A member joins the first
    open batch none of whose members' changes reach a test of its own, or opens another: one
    that overlaps a batch does not cut it short."""

    def __init__(self, size: int, gate: Gate | None) -> None:
        self.size, self.gate = size, gate
        self._cond = threading.Condition()
        self._open: dict[str, list[_Batch]] = {}
        if gate is not None:
            gate.on_idle.append(self.flush)

    def flush(self) -> None:
        """Closes every open batch: they run with the members they have."""
        with self._cond:
            for batches in self._open.values():
                for batch in batches:
                    batch.closed = True
            self._open.clear()
            self._cond.notify_all()

    def confirm(self, image: str, member: Member, run: Callable[[str], GradingReport]
                ) -> Shared | None:
        """The run shared with other members, or None: confirm alone (a batch of one, no
        gate to step out of, or the shared run failed)."""
        if self.size < 2 or self.gate is None or not self.gate.inside():
            return None
        with self._cond:
            batches = self._open.setdefault(image, [])
            batch = next((b for b in batches if b.accepts(member)), None)
            if batch is None:
                batch = _Batch()
                batches.append(batch)
            batch.members.append(member)
            if len(batch.members) >= self.size:
                batch.closed = True
                batches.remove(batch)
                self._cond.notify_all()
        with self.gate.stepped_out():
            with self._cond:
                while not batch.closed:
                    self._cond.wait()
                runner = batch.runner is None
                if runner:
                    batch.runner = member
                else:
                    while not batch.done:
                        self._cond.wait()
        if runner:
            self._run(batch, run)
        if len(batch.members) < 2 or not isinstance(batch.report, GradingReport):
            return None
        return Shared(batch.report, tuple(batch.members))

    def _run(self, batch: _Batch, run: Callable[[str], GradingReport]) -> None:
        try:
            if len(batch.members) > 1:
                batch.report = run(batch.patch())
        except Exception as exc:  # noqa: BLE001 - every member then confirms alone
            batch.report = exc
        finally:
            with self._cond:
                batch.done = True
                self._cond.notify_all()


def inconsistency(shared: Shared, gold: list[GradingReport]) -> str | None:
    """Why the shared run does not confirm its members (see the module docstring), or None."""
    report = shared.report
    if not report.patch_applied or report.stripped:
        return "the members' changes do not apply together"
    if not report.valid:
        return "the shared run is not valid"
    owner = {t: m for m in shared.members for t in m.affected}
    for test, statuses in _gold_statuses(gold).items():
        now = report.statuses.get(test)
        member = owner.get(test)
        if member is None:
            if now not in statuses:
                return f"{test} moved ({'/'.join(sorted(map(str, statuses)))} -> {now})"
        elif len(member.selected.get(test, ())) == 1 and now not in member.selected[test]:
            return f"{test} is {now}, {member.instance_id}'s own run gave " \
                   f"{next(iter(member.selected[test]))}"
    return None


def _gold_statuses(gold: list[GradingReport]) -> dict[str, set[str]]:
    seen: dict[str, set[str]] = {}
    for run in gold:
        for test, status in run.statuses.items():
            seen.setdefault(test, set()).add(status)
    return seen
