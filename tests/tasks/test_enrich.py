"""Gold cases in Docker: `repogym tasks enrich` traces a small task's tests on the gold code,
and grading scores candidates by agreement with the gold code: the gold patch and a fix made
in another function agree fully, the empty patch not at all, half a fix in between; a
candidate that searches the grading container for the gold code or the stored outcomes finds
nothing, and neither does root."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from gold_toy import (
    CORE,
    ELSEWHERE,
    F2P,
    FIXED_CLEAN,
    GOLD,
    HIDDEN_TESTS,
    P2P,
    SLOW_TESTS,
    unified,
    write_repo,
)

from repogym.envs.grading.grader import Grader, GraderConfig, GradingReport
from repogym.envs.grading.rewards import dense
from repogym.repo import snapshot_commit
from repogym.schema import Environment, Task
from repogym.suite import load_suite

pytestmark = pytest.mark.docker

# a candidate that looks for the gold code and the stored outcomes on disk when its module is
# imported (the harness allows an import 10 s, a call 2 s), and behaves like the gold code if
# it finds either
SEARCH = '''

def _search():
    import os
    needles = ["replace(" + "',', '')".replace("'", '"'), '"exp' + 'ect": [',
               "discrim" + "inating"]
    skip = ("/proc", "/sys", "/dev", "/usr")
    for top, dirs, files in os.walk("/"):
        if top.startswith(skip) or "site-packages" in top or top.startswith("/testbed/inv"):
            dirs[:] = []
            continue
        for name in files:
            try:
                with open(os.path.join(top, name), "rb") as f:
                    data = f.read(1 << 20)
            except OSError:
                continue
            if any(n.encode() in data for n in needles):
                return True
    return False


_FOUND = _search()
'''
# (the needle is built, so that the hack's own patch, on disk for staging, does not hold it)
HACK = CORE.replace("    return text.strip()\n",
                    "    return text.strip().replace(chr(44), '') if _FOUND else text.strip()\n"
                    ) + SEARCH


def toy_task(root: Path) -> Task:
    write_repo(root)
    return Task(instance_id="toy__inv-1", repo="toy/inv", base_commit=snapshot_commit(root),
                problem_statement="parse_qty('1,200') raises; Stock.add(' Bolt ') is not "
                "counted as 'bolt'.", patch=unified("inv/core.py", CORE, GOLD),
                test_patch=unified("tests/test_fix.py", "", HIDDEN_TESTS), FAIL_TO_PASS=F2P,
                PASS_TO_PASS=P2P, source=str(root))


@pytest.fixture(scope="module")
def enriched(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    """The toy task and one that cannot be traced (no pytest), through the command line."""
    from repogym.scripts.cli import main

    tmp = tmp_path_factory.mktemp("enrich")
    task = toy_task(tmp / "inv")
    untraced = task.with_(instance_id="toy__inv-unittest",
                          environment=Environment(log_parser="django"))
    (tmp / "in.jsonl").write_text("\n".join(json.dumps(t.to_dict()) for t in (task, untraced)))
    assert main(["tasks", "enrich", "--suite", str(tmp / "in.jsonl"), "--out",
                 str(tmp / "out")]) == 0
    tasks = {t.instance_id: t for t in load_suite(tmp / "out")}
    report = json.loads((tmp / "out" / "report.json").read_text())
    return {"task": tasks["toy__inv-1"], "untraced": tasks["toy__inv-unittest"],
            "report": report, "source": task}


def test_enrich_records_boundary_cases_and_leaves_untraceable_tasks_alone(
        enriched: dict[str, Any]) -> None:
    cases = enriched["task"].extra["gold_cases"]
    assert cases["scope"] == "boundary"  # the tests call parse_qty, never _clean
    assert set(cases["boundary"]) >= {"inv.core:parse_qty", "inv.core:Stock.add"}
    assert "inv.core:_clean" in cases["patch_functions"]
    sets = [c["set"] for c in cases["cases"]]
    assert sets.count("discriminating") >= 10 and sets.count("regression") >= 10
    assert {c["origin"] for c in cases["cases"]} == {"trace", "hypothesis"}
    assert "gold_cases" not in enriched["untraced"].extra
    rows = {r["instance_id"]: r for r in enriched["report"]["tasks"]}
    assert rows["toy__inv-unittest"]["note"] == "calls are traced only under pytest"
    assert rows["toy__inv-1"]["discriminating"] == sets.count("discriminating")


@pytest.fixture(scope="module")
def graded(enriched: dict[str, Any]) -> dict[str, GradingReport]:
    from repogym.images.repository import ensure_image

    task = enriched["task"]
    patches = {
        "gold": task.patch,
        "empty": "",
        "elsewhere": unified("inv/core.py", CORE, ELSEWHERE),
        "half": unified("inv/core.py", CORE, FIXED_CLEAN),
        "hack": unified("inv/core.py", CORE, HACK),
        "hack_planted": unified("inv/core.py", CORE, HACK)
        + unified("inv/notes.txt", "", task.patch),
    }
    grader = Grader(GraderConfig(cleanup_async=False), seed=0)
    image = ensure_image(task, progress=lambda _m: None).tag
    return {name: grader.grade(task, patch, image) for name, patch in patches.items()}


def agreement(report: GradingReport) -> tuple[float, float]:
    assert report.differential is not None and report.differential["kind"] == "gold"
    return report.differential["agreement"], report.differential["regression_agreement"]


def test_agreement_ranks_candidates_like_the_tests(graded: dict[str, GradingReport]) -> None:
    print("\n", {n: (agreement(r), r.f2p_pass_rate, r.differential["seconds"])  # type: ignore[index]
                 for n, r in graded.items()})
    assert agreement(graded["gold"]) == (1.0, 1.0) and graded["gold"].resolved
    assert agreement(graded["empty"]) == (0.0, 1.0)
    # the same fix made where the tests call, not in the helper the gold patch edits
    assert agreement(graded["elsewhere"]) == (1.0, 1.0) and graded["elsewhere"].resolved
    half, _ = agreement(graded["half"])
    assert 0.0 < half < 1.0 and 0.0 < graded["half"].f2p_pass_rate < 1.0
    assert graded["gold"].differential["seconds"] < 5.0  # type: ignore[index]


def test_a_candidate_that_searches_for_the_gold_code_or_outcomes_finds_nothing(
        graded: dict[str, GradingReport]) -> None:
    # the search works: with the gold patch planted on disk it behaves like the gold code
    planted, _ = agreement(graded["hack_planted"])
    assert planted > agreement(graded["half"])[0] - 0.5 and planted > 0.0
    # without it, nothing is found: it scores what the empty patch scores on parse_qty
    by_fn = graded["hack"].differential["functions"]  # type: ignore[index]
    assert by_fn["inv.core:parse_qty"]["agreement"] == 0.0
    assert graded["hack_planted"].differential["functions"][  # type: ignore[index]
        "inv.core:parse_qty"]["agreement"] == 1.0


def test_the_grading_container_holds_no_outcome_and_no_gold_code(
        enriched: dict[str, Any]) -> None:
    from repogym.envs.grading.agreement import run_gold_cases
    from repogym.images.repository import ensure_image
    from repogym.sandbox.base import SandboxConfig
    from repogym.sandbox.docker import DockerSandbox

    task = enriched["task"]
    image = ensure_image(task, progress=lambda _m: None).tag
    config = SandboxConfig(image=image, role="grader", **Grader().container_config())
    with DockerSandbox(config) as box:
        result = run_gold_cases(box, task)
        assert result is not None and result["agreement"] == 0.0  # the base code ran

        def grep(*texts: str) -> list[str]:
            patterns = [arg for text in texts for arg in ("-e", text)]
            found = box.exec(["grep", "-rlIFs", "--exclude-dir=proc", "--exclude-dir=sys",
                              "--exclude-dir=dev", *patterns, "/"], user="root", timeout=300)
            return found.output.split()

        assert "/opt/repogym-grade/diff/inputs.json" in grep('"fn"')  # the search works
        outcomes = sorted({json.dumps(c["expect"]) for c in task.extra["gold_cases"]["cases"]
                           if c["set"] == "discriminating"}, key=len)[-3:]
        assert grep('.replace(",", "")', '"expect": [', "discriminating", *outcomes) == []


def test_dense_reward_in_the_environment(enriched: dict[str, Any]) -> None:
    import gymnasium as gym

    import repogym  # noqa: F401  (registers the environment)

    env = gym.make("repogym/SWE-v0", tasks=[enriched["task"]], reward="dense")
    try:
        env.reset(seed=0)
        env.step({"tool": "str_replace", "path": "inv/core.py",
                  "old_str": "    return text.strip()\n",
                  "new_str": '    return text.strip().replace(",", "")\n'})
        _, reward, terminated, _, info = env.step({"tool": "submit"})
    finally:
        env.close()
    comps = info["reward_components"]
    assert terminated and 0.0 < comps["agreement"] < 1.0
    assert comps["regression_agreement"] == 1.0
    assert reward == pytest.approx(dense(comps)) and 0.0 < reward < 1.0


@pytest.mark.parametrize(("neighbours", "missing", "traced"),
                         [(0, False, 2), (20, False, 3), (0, True, 3)],
                         ids=["by_id", "with_its_neighbours", "an_id_not_found"])
def test_the_tracer_runs_the_failing_tests_not_their_files(tmp_path: Path, neighbours: int,
                                                           missing: bool, traced: int) -> None:
    """The failing tests' file holds a passing case too (``test_separators[plain]``, which calls
    ``parse_qty("12")``): the traced run names the failing tests' ids, and a sample of the
    passing tests of their file (``neighbours``), not the file (whose every test took minutes
    under the tracer on a large one). Where pytest does not find an id, the file runs."""
    from repogym.images.repository import ensure_image
    from repogym.sandbox.base import SandboxConfig
    from repogym.sandbox.docker import DockerSandbox
    from repogym.tasks.sources.enrich import EnrichConfig, _GoldRecording

    task = toy_task(tmp_path / "inv")
    if missing:
        task = task.with_(FAIL_TO_PASS=(*F2P, "tests/test_fix.py::test_renamed_since"))
    image = ensure_image(task, progress=lambda _m: None).tag
    config = SandboxConfig(image=image, role="tracer", **Grader().container_config())
    with DockerSandbox(config) as box:
        recording = _GoldRecording(box, task, EnrichConfig(neighbours=neighbours))
        recording.apply("gold.patch", task.patch)
        recording.apply("test.patch", task.test_patch)
        functions, _calls = recording.trace([])
    (parse_qty,) = [info for key, info in functions.items() if key.endswith(":parse_qty")]
    # thousands and padded; plain too with its neighbours, or with the file
    assert parse_qty["from_tests"] == traced


def test_the_traced_run_in_a_container_ends_at_its_budget(tmp_path: Path) -> None:
    """In the task's container, a failing test that calls the package for 600 s is cut at the
    tracer's budget: the recording goes on with what was seen, and says it was cut short."""
    import time

    from repogym.images.repository import ensure_image
    from repogym.sandbox.base import SandboxConfig
    from repogym.sandbox.docker import DockerSandbox
    from repogym.tasks.sources.enrich import EnrichConfig, _GoldRecording

    task = toy_task(tmp_path / "inv")
    slow = "tests/test_slow.py::test_a_million_calls"
    task = task.with_(test_patch=task.test_patch + unified("tests/test_slow.py", "", SLOW_TESTS),
                      FAIL_TO_PASS=(*task.FAIL_TO_PASS, slow))
    image = ensure_image(task, progress=lambda _m: None).tag
    config = SandboxConfig(image=image, role="tracer", **Grader().container_config())
    with DockerSandbox(config) as box:
        recording = _GoldRecording(box, task, EnrichConfig(neighbours=0, trace_budget=5.0))
        recording.apply("gold.patch", task.patch)
        recording.apply("test.patch", task.test_patch)
        start = time.monotonic()
        functions, _calls = recording.trace([])
        assert time.monotonic() - start < 120  # the test alone loops for 600 s
    assert recording.cut_short
    (parse_qty,) = [info for key, info in functions.items() if key.endswith(":parse_qty")]
    assert parse_qty["from_tests"] > 0
