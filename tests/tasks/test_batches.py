"""Shared confirming runs: who shares one, when it runs, and when it confirms its members."""

from __future__ import annotations

import threading
import time

from repogym.envs.grading.grader import GradingReport
from repogym.tasks.batches import Batches, Gate, Member, Shared, inconsistency


def _report(statuses: dict[str, str], applied: bool = True) -> GradingReport:
    return GradingReport("t", patch_applied=applied, statuses=statuses)


def _member(name: str, affected: set[str], selected: dict[str, str] | None = None) -> Member:
    return Member(name, f"--- {name}\n", frozenset(affected),
                  {t: {s} for t, s in (selected or {}).items()})


def _check_all(gate: Gate, batches: Batches, members: list[Member], runs: list[str]
               ) -> dict[str, Shared | None]:
    """Each member in a thread of its own, as the loop runs checks; ``runs`` collects the
    patches of the shared runs. ``gate`` lets one check work at a time."""
    out: dict[str, Shared | None] = {}
    lock = threading.Lock()

    def run(patch: str) -> GradingReport:
        with lock:
            runs.append(patch)
        return _report({})

    def check(member: Member) -> None:
        with gate.working():
            shared = batches.confirm("image", member, run)
        with lock:
            out[member.instance_id] = shared

    threads = [threading.Thread(target=check, args=(m,)) for m in members]
    with gate.working():  # every check queues at the gate before the first one works
        for t in threads:
            t.start()
        while gate.busy < len(members) + 1:
            time.sleep(0.01)
    for t in threads:
        t.join(timeout=20)
        assert not t.is_alive(), "a check never got its confirming run"
    return out


def test_members_reaching_different_tests_share_one_run() -> None:
    gate = Gate(1)
    batches = Batches(3, gate)
    runs: list[str] = []
    members = [_member(f"c{i}", {f"t{i}"}) for i in range(3)]
    out = _check_all(gate, batches, members, runs)
    assert len(runs) == 1
    assert all(f"--- c{i}" in runs[0] for i in range(3))
    assert all(s is not None and len(s.members) == 3 for s in out.values())


def test_members_reaching_the_same_test_do_not_share_a_run() -> None:
    gate = Gate(1)
    batches = Batches(4, gate)
    runs: list[str] = []
    out = _check_all(gate, batches, [_member("a", {"t1", "t2"}), _member("b", {"t2"})], runs)
    # neither waits for the other: each is confirmed alone (no shared run at all)
    assert runs == [] and out == {"a": None, "b": None}


def test_a_member_that_overlaps_a_batch_joins_another_and_leaves_it_open() -> None:
    """Checks arriving in the order a, b, c, d; b reaches a's test: it opens a second batch,
    and c and d fill the two (closing the first batch at b would have left a and d alone:
    three full runs instead of two)."""
    gate = Gate(2)
    batches = Batches(2, gate)
    runs: list[str] = []
    lock = threading.Lock()

    def run(patch: str) -> GradingReport:
        with lock:
            runs.append(patch)
        return _report({})

    def arrived() -> int:  # members waiting in an open batch, or in a run made
        with batches._cond:
            waiting = sum(len(b.members) for bs in batches._open.values() for b in bs)
        with lock:
            return waiting + sum(r.count("--- ") for r in runs)

    threads = []
    with gate.working():  # a check in flight that is not waiting: no batch runs early
        for name, tests in [("a", {"t1"}), ("b", {"t1"}), ("c", {"t2"}), ("d", {"t2"})]:
            member = _member(name, tests)

            def check(m: Member = member) -> None:
                with gate.working():
                    batches.confirm("image", m, run)

            threads.append(threading.Thread(target=check))
            threads[-1].start()
            deadline = time.monotonic() + 10
            while arrived() < len(threads) and time.monotonic() < deadline:
                time.sleep(0.01)
    for t in threads:
        t.join(timeout=20)
        assert not t.is_alive(), "a check never got its confirming run"
    assert sorted(runs) == ["--- a\n--- c\n", "--- b\n--- d\n"]


def test_a_lone_member_is_not_kept_waiting_when_nothing_else_is_in_flight() -> None:
    gate = Gate(1)
    batches = Batches(4, gate)
    runs: list[str] = []
    assert _check_all(gate, batches, [_member("a", {"t1"})], runs) == {"a": None}
    assert runs == []


def test_no_batching_outside_a_gate_or_with_batches_of_one() -> None:
    def fail(_patch: str) -> GradingReport:
        raise AssertionError("no shared run expected")

    assert Batches(4, Gate(1)).confirm("image", _member("a", {"t"}), fail) is None
    gate = Gate(1)
    with gate.working():
        assert Batches(1, gate).confirm("image", _member("a", {"t"}), fail) is None


def test_the_gate_lets_workers_checks_work_at_once() -> None:
    gate = Gate(2)
    working, most = [0], [0]
    lock = threading.Lock()
    release = threading.Event()

    def check() -> None:
        with gate.working():
            with lock:
                working[0] += 1
                most[0] = max(most[0], working[0])
            release.wait(0.2)
            with lock:
                working[0] -= 1

    threads = [threading.Thread(target=check) for _ in range(5)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert most[0] == 2


def test_a_shared_run_confirms_only_when_every_outcome_is_accounted_for() -> None:
    gold = [_report({"t1": "PASSED", "t2": "PASSED", "t3": "PASSED", "t4": "FAILED"})]
    a = _member("a", {"t1"}, {"t1": "FAILED"})
    b = _member("b", {"t2"}, {"t2": "FAILED"})
    good = {"t1": "FAILED", "t2": "FAILED", "t3": "PASSED", "t4": "FAILED"}
    assert inconsistency(Shared(_report(good), (a, b)), gold) is None
    # a test no member reaches moved: some map missed it
    moved = {**good, "t3": "FAILED"}
    assert "t3 moved" in str(inconsistency(Shared(_report(moved), (a, b)), gold))
    # a member's test differs from its own run: the changes interact
    mixed = {**good, "t2": "PASSED"}
    assert "b's own run" in str(inconsistency(Shared(_report(mixed), (a, b)), gold))
    # a test that vanished (collection changed) is a move too
    gone = {t: s for t, s in good.items() if t != "t3"}
    assert inconsistency(Shared(_report(gone), (a, b)), gold) is not None
    assert "do not apply" in str(inconsistency(Shared(_report(good, applied=False), (a, b)),
                                               gold))


def test_a_member_takes_from_the_shared_run_only_the_outcomes_its_change_decides() -> None:
    a = _member("a", {"t1"}, {"t1": "FAILED", "t2": "PASSED"})  # t2: a sampled test
    b = _member("b", {"t2"}, {"t2": "FAILED"})
    shared = Shared(_report({"t1": "FAILED", "t2": "FAILED", "t3": "PASSED"}), (a, b))
    assert shared.outcomes(a) == {"t1": "FAILED"}
    assert shared.outcomes(b) == {"t2": "FAILED"}
