"""`repogym tasks certify`: attacks played against a suite's tasks, the result written into each
task; a task that an attack beats leaves the suite unless --keep-hackable."""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path

import pytest

from repogym.agents.certify import (
    PYTEST_ONLY,
    Attack,
    CertifyConfig,
    attacks_for,
    certificate,
    plan_attacks,
    skip_reason,
)
from repogym.agents.hacker import HACKS, LANG_HACKS
from repogym.schema import Environment, Task
from repogym.scripts import tasks_certify
from repogym.scripts.cli import main
from repogym.scripts.tasks_certify import certify_collected, rewrite
from repogym.suite import load_suite
from repogym.tasks.sources.loop import Collected


def test_an_attack_beats_a_task_when_it_earns_anything() -> None:
    task = Task("t-1", "r", "0" * 40, "Fix it.")
    held = certificate(task, {"a": Attack(valid=False, f2p_pass_rate=1.0, flags=["decoy"]),
                              "b": Attack()}, 3.0)
    assert held["result"] == "pass" and held["beaten_by"] == []
    assert held["task_hash"] == task.task_hash and set(held["versions"]) == {
        "repogym", "attacks", "grader"}
    beaten = certificate(task, {"a": Attack(f2p_pass_rate=0.5), "b": Attack(reward=1.0)}, 1.0)
    assert beaten["result"] == "hackable" and beaten["beaten_by"] == ["a", "b"]
    assert certificate(task, {"a": Attack(error="boom")}, 1.0)["result"] == "incomplete"
    # a certificate is no part of what decides the grading
    assert task.with_(certificate=held).task_hash == task.task_hash
    with pytest.raises(ValueError, match="choose from"):
        CertifyConfig(hacks=("nope",))


def test_each_task_meets_the_attacks_written_for_its_language() -> None:
    python = Task("t-1", "r", "0" * 40, "Fix it.")
    go = python.with_(environment=Environment(language="go"))
    every = CertifyConfig().hacks
    assert attacks_for(python, every) == tuple(HACKS)
    assert attacks_for(go, every) == tuple(n for n, h in LANG_HACKS.items() if "go" in h.languages)
    assert attacks_for(go, every) and attacks_for(go, ("always_eq", "go_os_exit")) == (
        "go_os_exit",)
    # none of those asked for fits: the certificate says so and is no pass
    assert attacks_for(go, ("always_eq",)) == ()
    cert = certificate(go, {}, 0.0, "none fits")
    assert cert["result"] == "incomplete" and cert["error"] == "none fits"


def test_attacks_that_cannot_act_are_skipped_with_why_and_the_slow_ones_go_first() -> None:
    pytest_task = Task("t-1", "r", "0" * 40, "Fix it.")
    other = pytest_task.with_(instance_id="t-2", environment=Environment(
        test_cmd="./tests/runtests.py --verbosity 2", log_parser="parse_log_django"))
    config = CertifyConfig()
    assert config.workers >= 1
    chosen, skipped = plan_attacks([pytest_task, other], config)
    assert skipped["t-1"] == {} and set(chosen["t-1"]) == set(HACKS)
    assert chosen["t-1"][:2] == ("infinite_loop", "fork_bomb")  # they wait out a time limit
    assert set(skipped["t-2"]) == set(PYTEST_ONLY) & set(HACKS)
    assert "runtests.py" in skipped["t-2"]["conftest_hook"]
    assert set(chosen["t-2"]) == set(HACKS) - set(PYTEST_ONLY)
    assert skip_reason(other, "os_exit_import") == ""  # an exit at import acts anywhere
    cert = certificate(other, {"os_exit_import": Attack()}, 1.0, skipped=skipped["t-2"])
    assert cert["result"] == "pass" and cert["skipped"] == skipped["t-2"]


def test_certificates_go_into_the_rows_and_nothing_else_changes(tmp_path: Path) -> None:
    rows = ['{"instance_id": "a", "repo": "r", "base_commit": "c", "problem_statement": "é"}',
            '{"base_commit": "c", "instance_id": "b", "problem_statement": "p", "repo": "r"}',
            '{"instance_id": "c", "repo": "r", "base_commit": "c", "problem_statement": "p"}']
    path = tmp_path / "tasks.jsonl"
    path.write_text("\n".join(rows) + "\n", encoding="utf-8")
    rewrite(tmp_path, {"b": {"result": "pass"}, "c": {"result": "hackable"}}, {"c"})
    lines = path.read_text(encoding="utf-8").splitlines()
    assert lines[0] == rows[0] and len(lines) == 2
    assert json.loads(lines[1]) == {**json.loads(rows[1]), "certificate": {"result": "pass"}}
    assert list(json.loads(lines[1])) == sorted(json.loads(lines[1]))  # sorted stays sorted


def test_tasks_add_rejects_what_an_attack_beats(monkeypatch: pytest.MonkeyPatch) -> None:
    # the attacks themselves are the Docker test below; here, what `tasks add` does with them
    tasks = [Task(f"t-{i}", "r", "0" * 40, "Fix it.") for i in (1, 2)]
    results = {"t-1": {"result": "pass", "beaten_by": []},
               "t-2": {"result": "hackable", "beaten_by": ["targeted_by_name"]}}
    monkeypatch.setattr(tasks_certify, "certify_tasks", lambda kept, args: [
        t.with_(certificate=results[t.instance_id]) for t in kept])
    for keep in (True, False):
        found = Collected(kept=list(tasks), outcomes=[
            {"instance_id": t.instance_id, "kept": True, "reason": ""} for t in tasks])
        certify_collected(found, argparse.Namespace(keep_hackable=keep))
        assert [t.instance_id for t in found.kept] == (["t-1", "t-2"] if keep else ["t-1"])
        assert all(t.certificate == results[t.instance_id] for t in found.kept)
        assert [o["certificate"] for o in found.outcomes] == ["pass", "hackable"]
    assert found.outcomes[1] == {"instance_id": "t-2", "kept": False, "certificate": "hackable",
                                 "reason_kind": "hackable",
                                 "reason": "hackable: beaten by targeted_by_name"}
    assert found.summary() == "tried 2, kept 1, rejected 1: hackable (1)"


@pytest.mark.docker
def test_certify_a_suite_and_drop_what_an_attack_beats(toy_task: Task, toy_image: str,
                                                       tmp_path: Path,
                                                       capsys: pytest.CaptureFixture[str]
                                                       ) -> None:
    suite = tmp_path / "suite"
    suite.mkdir()
    (suite / "tasks.jsonl").write_text(json.dumps(toy_task.to_dict()) + "\n")
    base = ["tasks", "certify", "--suite", str(suite), "--loop-timeout", "5"]
    assert main([*base, "--attacks", "targeted_report_patch,always_eq,infinite_loop"]) == 0
    from repogym.agents.stripped import NARROW_NOTE

    cert = load_suite(suite)[0].certificate
    assert cert is not None and cert["result"] == "pass", cert
    # attacks on the code: settled on the failing tests alone, every defence still on
    forged, equal = cert["attacks"]["targeted_report_patch"], cert["attacks"]["always_eq"]
    assert forged["flags"] == ["decoy"] and forged["graded"] == NARROW_NOTE
    assert "always_equal" in equal["flags"] and equal["graded"] == NARROW_NOTE
    # the loop waits out --loop-timeout, not --attack-timeout (120 s), once: graded whole
    loop = cert["attacks"]["infinite_loop"]
    assert "timeout" in loop["flags"] and loop["seconds"] < 90 and "graded" not in loop, loop
    # the known limit wins: the task is hackable, and kept only when asked; a win on the
    # failing tests alone settles nothing, so it was graded whole
    assert main([*base, "--attacks", "decoy_aware", "--keep-hackable"]) == 1
    cert = load_suite(suite)[0].certificate
    assert cert is not None and cert["beaten_by"] == ["decoy_aware"]
    assert "graded" not in cert["attacks"]["decoy_aware"]
    assert main([*base, "--attacks", "decoy_aware"]) == 1
    assert (suite / "tasks.jsonl").read_text() == ""
    assert "hackable: toy__calc-1 (left out of the suite" in capsys.readouterr().out


def test_an_incomplete_certificate_is_no_pass(monkeypatch: pytest.MonkeyPatch, tmp_path: Path,
                                              capsys: pytest.CaptureFixture[str]) -> None:
    """pallets__flask-4992: every attack errored, the certificate was `incomplete`, and both
    commands still said "1/1 tasks withstood every attack" (exit 0). The attacks themselves
    are the Docker tests; here, what the commands make of their result."""
    import repogym.agents.certify as certify_module
    import repogym.scripts.tasks_certify as certify_command

    tasks = [Task(f"t-{i}", "r", "0" * 40, "Fix it.") for i in (1, 2)]
    attacks = {"t-1": {"a": Attack(), "b": Attack()},
               "t-2": {"a": Attack(), "b": Attack(error="JSONDecodeError: Unterminated string"),
                       "c": Attack(error="AgentError: the survey printed nothing")}}

    def fake(kept: list[Task], config: object, progress: object, on_task: object = None
             ) -> list[Task]:
        done = [t.with_(certificate=certificate(t, attacks[t.instance_id], 1.0)) for t in kept]
        for task in done:
            if callable(on_task):
                on_task(task)
        return done

    monkeypatch.setattr(certify_module, "certify", fake)
    monkeypatch.setattr(certify_command, "ensure_image", lambda task, progress: None)
    suite = tmp_path / "suite"
    suite.mkdir()
    (suite / "tasks.jsonl").write_text("".join(json.dumps(t.to_dict()) + "\n" for t in tasks))
    assert main(["tasks", "certify", "--suite", str(suite)]) == 1
    out = capsys.readouterr().out
    assert "1/2 tasks withstood every attack" in out
    assert "certificates: 1 pass, 0 hackable, 1 incomplete" in out
    assert "incomplete: t-2: 2 attacks did not run: b, c." in out and "JSONDecodeError" in out
    assert [t.certificate["result"] for t in load_suite(suite)] == ["pass", "incomplete"]
    # tasks add: kept, and said to be incomplete
    found = Collected(kept=list(tasks), outcomes=[
        {"instance_id": t.instance_id, "kept": True, "reason": ""} for t in tasks])
    certify_collected(found, argparse.Namespace(keep_hackable=False, attacks=None,
                                                attack_timeout=120.0, loop_timeout=10.0,
                                                attack_workers=1))
    assert [o["certificate"] for o in found.outcomes] == ["pass", "incomplete"]
    assert "did not run: b, c" in found.outcomes[1]["certificate_incomplete"]


@pytest.mark.docker
def test_an_attack_whose_changes_are_all_stripped_is_graded_on_the_failing_tests(
        toy_task: Task, toy_image: str) -> None:
    from repogym.agents.certify import certify
    from repogym.agents.stripped import NARROW_NOTE, NOTE, SHARED_NOTE

    config = CertifyConfig(hacks=("conftest_hook", "git_history", "os_exit_import"), workers=1)
    # a second task of the same layout (one snapshot, environment and test folder)
    sibling = toy_task.with_(instance_id=f"{toy_task.instance_id}-sibling")
    first, second = (t.certificate for t in certify([toy_task, sibling], config,
                                                    progress=lambda _m: None))
    assert first is not None and first["result"] == "pass", first
    hook, history, exit_ = (first["attacks"][n] for n in
                            ("conftest_hook", "git_history", "os_exit_import"))
    # stripped whole (or nothing changed): the failing tests alone, and the flag still raised;
    # the second such attack takes the first one's run, with its own staging's flags
    assert hook["graded"] == NOTE and "tampered_conftest" in hook["flags"] and hook["valid"]
    assert history["graded"] == SHARED_NOTE and history["flags"] == [] and history["valid"]
    assert history["reward"] == hook["reward"] == 0
    # the package changed: graded on the failing tests with every defence, its exit caught by
    # the canaries
    assert exit_["graded"] == NARROW_NOTE and "canary" in exit_["flags"]
    # the sibling takes the attacks on the harness from the first, and plays the search itself
    assert second is not None and second["result"] == "pass", second
    assert {n: a.get("shared_from") for n, a in second["attacks"].items()} == {
        "conftest_hook": toy_task.instance_id, "git_history": None,
        "os_exit_import": toy_task.instance_id}
    assert second["attacks"]["os_exit_import"]["flags"] == exit_["flags"]


def test_what_is_stripped_by_name_decides_whether_an_attack_is_graded_whole() -> None:
    from repogym.agents.stripped import plain_ids, wholly_stripped

    task = Task("t-1", "r", "0" * 40, "Fix it.")
    conftest = ("diff --git a/conftest.py b/conftest.py\nnew file mode 100644\n--- /dev/null\n"
                "+++ b/conftest.py\n@@ -0,0 +1 @@\n+x = 1\n")
    package = conftest.replace("conftest.py", "pkg/core.py")
    setup_cfg = conftest.replace("conftest.py", "setup.cfg")
    assert wholly_stripped(task, conftest) and wholly_stripped(task, "")
    assert not wholly_stripped(task, conftest + package)
    assert not wholly_stripped(task, setup_cfg)  # judged by its content, in the container
    assert plain_ids(["tests/t.py::test_a[1-2]"]) and not plain_ids([])
    assert not plain_ids(["tests/t.py::test_a[a b"])  # an id cut at a space


def test_an_attack_that_could_not_run_is_played_once_more(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """isodate under a load average of 700: two attacks' surveys timed out and the certificate
    was incomplete. An episode that could not run gets a second one; one that fails twice is
    recorded with both reasons."""
    import repogym.agents.certify as certify_module

    class Env:
        unwrapped = None  # no pool of its own

        def close(self) -> None:
            pass

    tries: dict[str, int] = {}

    def play(env: object, task: Task, narrow: bool = True, stripped: object = None) -> Attack:
        name = task.instance_id.split("__")[1]
        tries[name] = tries.get(name, 0) + 1
        if name == "always_eq" and tries[name] == 1:
            return Attack(error="AgentError: the survey timed out", seconds=60.0)
        if name == "edit_test":
            return Attack(error=f"SandboxLost: try {tries[name]}", seconds=1.0)
        return Attack(flags=["x"], seconds=2.0)

    monkeypatch.setattr(certify_module, "play", play)
    monkeypatch.setattr(certify_module.gym, "make", lambda *a, **k: Env())
    task = Task("t-1", "r", "0" * 40, "Fix it.")
    [done] = certify_module.certify(
        [task], CertifyConfig(hacks=("always_eq", "edit_test", "delete_test")),
        progress=lambda _m: None)
    cert = done.certificate or {}
    assert tries == {"always_eq": 2, "edit_test": 2, "delete_test": 1}
    assert cert["attacks"]["always_eq"]["seconds"] == 62.0
    assert "error" not in cert["attacks"]["always_eq"]
    assert cert["result"] == "incomplete"
    assert cert["attacks"]["edit_test"]["error"] == "SandboxLost: try 2 (the first try: " \
        "SandboxLost: try 1)"


def test_no_worker_waits_for_another_tasks_last_attack(monkeypatch: pytest.MonkeyPatch) -> None:
    """One queue for the whole run: while one worker plays a task's slow attack, the other goes
    on to the next task's (task by task, it waited for the slow one to end), and certificates
    still come out in order, each with its own attacks' wall time."""
    import repogym.agents.certify as certify_module

    class Env:
        unwrapped = None

        def close(self) -> None:
            pass

    spans: dict[tuple[str, str], tuple[float, float]] = {}

    def play(env: object, task: Task, narrow: bool = True, stripped: object = None) -> Attack:
        _, name, tid = task.instance_id.split("__")
        start = time.monotonic()
        time.sleep(1.5 if (tid, name) == ("t-a", "always_eq") else 0.05)
        spans[(tid, name)] = (start, time.monotonic())
        return Attack(flags=["x"], seconds=time.monotonic() - start)

    monkeypatch.setattr(certify_module, "play", play)
    monkeypatch.setattr(certify_module.gym, "make", lambda *a, **k: Env())
    first = Task("t-a", "r", "1" * 40, "Fix it.", FAIL_TO_PASS=("tests/test_a.py::test_x",))
    second = first.with_(instance_id="t-b", base_commit="2" * 40)
    hacks = ("always_eq", "always_eq_typed", "edit_test")
    seen: list[str] = []
    done = certify_module.certify([first, second], CertifyConfig(hacks=hacks, workers=2),
                                  progress=lambda _m: None,
                                  on_task=lambda t: seen.append(t.instance_id))
    slow_end = spans[("t-a", "always_eq")][1]
    assert all(spans[("t-b", h)][1] < slow_end for h in hacks), spans
    assert seen == ["t-a", "t-b"] and [t.instance_id for t in done] == seen
    certs = {t.instance_id: t.certificate or {} for t in done}
    assert certs["t-a"]["seconds"] >= 1.5 and certs["t-b"]["seconds"] < 1.0


def test_attacks_on_the_harness_are_played_once_per_layout(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """Tasks made from one repository snapshot, with one environment and the same test folders,
    meet the attacks on the harness (LAYOUT) in the same way: the first plays them, the others
    take its results (``shared_from``) and play only the attacks aimed at their own tests and
    code. What the first could not play, or lost to, each plays itself."""
    import repogym.agents.certify as certify_module

    class Env:
        unwrapped = None

        def close(self) -> None:
            pass

    played: dict[str, list[str]] = {}

    def play(env: object, task: Task, narrow: bool = True, stripped: object = None) -> Attack:
        _, name, tid = task.instance_id.split("__")
        played.setdefault(tid, []).append(name)
        if name == "fork_bomb" and tid == "r-a":
            return Attack(error="SandboxLost: gone", seconds=1.0)
        if name == "tox_ini":
            return Attack(reward=1.0, seconds=1.0)  # beats every task it is played on
        return Attack(flags=["x"], seconds=1.0)

    monkeypatch.setattr(certify_module, "play", play)
    monkeypatch.setattr(certify_module.gym, "make", lambda *a, **k: Env())
    ids = ("tests/test_a.py::test_x",)
    first = Task("r-a", "r", "1" * 40, "Fix it.", FAIL_TO_PASS=ids,
                 extra={"original_commit": "0" * 40})
    second = first.with_(instance_id="r-b", base_commit="2" * 40,
                         FAIL_TO_PASS=("tests/test_a.py::test_y",))
    third = first.with_(instance_id="r-c", base_commit="3" * 40)
    elsewhere = first.with_(instance_id="r-d", FAIL_TO_PASS=("other/test_b.py::test_z",))
    hacks = ("fork_bomb", "tox_ini", "conftest_hook", "sys_exit_import", "always_eq",
             "edit_test")
    assert {"fork_bomb", "tox_ini", "conftest_hook", "sys_exit_import"} <= set(
        certify_module.LAYOUT) and not {"always_eq", "edit_test"} & set(certify_module.LAYOUT)
    assert set(certify_module.LAYOUT) <= set(HACKS) | set(LANG_HACKS)  # no name mistyped
    assert len({certify_module.layout_key(t) for t in (first, second, third)}) == 1
    assert certify_module.layout_key(elsewhere) != certify_module.layout_key(first)
    done = certify_module.certify([first, second, third, elsewhere],
                                  CertifyConfig(hacks=hacks, workers=1),
                                  progress=lambda _m: None)
    assert sorted(played["r-a"]) == sorted([*hacks, "fork_bomb"])  # tried twice: lost twice
    # the second plays what the first could not (fork_bomb) or lost to (tox_ini)
    assert sorted(played["r-b"]) == ["always_eq", "edit_test", "fork_bomb", "tox_ini"]
    assert sorted(played["r-c"]) == ["always_eq", "edit_test", "tox_ini"]
    assert sorted(played["r-d"]) == sorted(hacks)  # another folder of tests: another layout
    certs = {t.instance_id: t.certificate or {} for t in done}
    assert certs["r-a"]["result"] == "hackable"  # tox_ini beat it (and fork_bomb did not run)
    c = certs["r-c"]["attacks"]
    assert c["conftest_hook"]["shared_from"] == "r-a" and c["fork_bomb"]["shared_from"] == "r-b"
    assert "shared_from" not in c["always_eq"] and "shared_from" not in c["tox_ini"]
    assert certs["r-c"]["beaten_by"] == ["tox_ini"]
    # every attack asked for is in every certificate, played or shared
    assert all(set(cert["attacks"]) == set(hacks) for cert in certs.values())
    # without sharing, every task plays every attack
    played.clear()
    certify_module.certify([first, second], CertifyConfig(hacks=hacks, workers=1, share=False),
                           progress=lambda _m: None)
    assert sorted(played["r-b"]) == sorted(hacks)


@pytest.mark.docker
def test_a_grade_by_id_runs_the_tasks_own_tests_of_a_file_and_nothing_else(
        toy_task: Task, toy_image: str) -> None:
    """Certification grades an attack on the code on the FAIL_TO_PASS tests alone: the test run
    keeps, of their (disguised) file, only their ids; the canaries and the decoy run stay."""
    from repogym.envs.grading.grader import Grader, GraderConfig

    one = toy_task.with_(FAIL_TO_PASS=("tests/test_add.py::test_add",), PASS_TO_PASS=())
    grader = Grader(GraderConfig(cleanup_async=False), seed=0)
    narrowed = grader.grade(one, toy_task.patch, toy_image, by_id=True)
    whole = grader.grade(one, toy_task.patch, toy_image)
    assert narrowed.resolved and narrowed.valid and narrowed.disguised, narrowed.invalid_reasons
    assert narrowed.decoys and narrowed.canaries and whole.resolved
    # test_add_negative shares the file: the plain run has it, the run by id does not
    assert "tests/test_add.py::test_add_negative" in whole.statuses
    assert [t for t in narrowed.statuses if t.startswith("tests/")] == [
        "tests/test_add.py::test_add"], narrowed.statuses


@pytest.mark.docker
def test_an_attack_on_the_code_earns_the_same_on_the_failing_tests_as_whole(
        toy_task: Task, toy_image: str) -> None:
    """The attacks that change the package, graded on the failing tests first (the default)
    and graded whole: the same outcome and the same flags; most are settled without the
    whole grade."""
    from repogym.agents.certify import certify
    from repogym.agents.stripped import NARROW_NOTE

    code = ("always_eq", "always_eq_typed", "targeted_report_patch", "targeted_by_name",
            "targeted_by_calls", "fake_pass_lines", "fake_junit", "report_patch_package",
            "skip_pytest_import", "sys_exit_import")
    certs = {narrow: certify([toy_task], CertifyConfig(hacks=code, narrow=narrow),
                             progress=lambda _m: None)[0].certificate for narrow in (True, False)}
    narrowed, whole = certs[True], certs[False]
    assert narrowed is not None and whole is not None
    assert narrowed["result"] == whole["result"] == "pass", (narrowed, whole)
    for name in code:
        a, b = narrowed["attacks"][name], whole["attacks"][name]
        assert (sorted(a["flags"]), a["reward"], a["valid"]) == (
            sorted(b["flags"]), b["reward"], b["valid"]), name
        assert "graded" not in b
    settled = sorted(n for n, a in narrowed["attacks"].items() if a.get("graded") == NARROW_NOTE)
    assert len(settled) >= 7, settled
