"""Grading latency (repogym next to SWE-bench's ``run_instance``) and memory per env."""

from __future__ import annotations

import gc
import re
import statistics
import tempfile
import time
import tracemalloc
import uuid
from pathlib import Path
from typing import Any

from repogym.bench.core import (
    Context,
    Row,
    close_env,
    compare,
    docker_box,
    make_env,
    ready_count,
    row,
    settle,
    timed,
    wait_for,
)
from repogym.envs.grading.grader import Grader, GraderConfig, test_files
from repogym.envs.grading.langrun import task_test_files
from repogym.envs.grading.official import run_official
from repogym.envs.grading.report import STAGES
from repogym.envs.grading.runners import get_runner, runner_name
from repogym.envs.grading.stage import OUT
from repogym.errors import RepogymError
from repogym.sandbox.base import SandboxConfig
from repogym.sandbox.docker import DockerSandbox
from repogym.schema import Task

MIB = 1024.0 * 1024.0
# pytest's closing line: "==== 5 passed, 1 failed in 0.12s ====" (or "in 61.20s (0:01:01)")
_PYTEST_TIME = re.compile(r"^=+ .*\bin (\d+(?:\.\d+)?)s\b.*=+\s*$", re.M)


def pytest_seconds(log: str) -> float | None:
    """The run time pytest reports for itself on its last summary line."""
    found = _PYTEST_TIME.findall(log)
    return float(found[-1]) if found else None


# --- grading -------------------------------------------------------------------------------------

def _apply_gold(ctx: Context, env: Any) -> None:
    # the patch as it is: a last context line of a blank line is a single space, which a strip
    # would take away (and git would call the patch corrupt)
    patch = ctx.task.patch if ctx.task.patch.endswith("\n") else ctx.task.patch + "\n"
    command = f"git apply - <<'REPOGYM_BENCH_EOF'\n{patch}REPOGYM_BENCH_EOF"
    _, _, _, _, info = env.step({"tool": "bash", "command": command})
    if info.get("exit_code") != 0:
        raise RepogymError(f"the gold patch of {ctx.task.instance_id} does not apply: {info}; "
                           "run `repogym tasks validate` on the suite")


def _env_submits(ctx: Context, n: int, graders: dict[str, GraderConfig | None]
                 ) -> dict[str, tuple[dict[str, list[float]], str]]:
    """Submit-to-reward wall time of ``env.step(submit)`` with a warm grading container, for
    each grader configuration: one env each, taking turns sample by sample, so that the load
    of the machine weighs on them alike."""
    envs = {name: make_env(ctx, pool_size=1, warm_grader=True, grader=config)
            for name, config in graders.items()}
    out: dict[str, dict[str, list[float]]] = {
        name: {"submit": [], "test": [], "pytest": [], "overhead": [], "harness": [],
               "decoy": [], **{f"stage.{s}": [] for s in STAGES}} for name in graders}
    resolved = dict.fromkeys(graders, 0)
    try:
        for _ in range(n):
            for name, env in envs.items():
                resolved[name] += _one_submit(ctx, env, out[name], list(envs.values()))
    finally:
        for env in envs.values():
            close_env(ctx, env)
    return {name: (out[name], f"gold patch resolved {resolved[name]}/{n}") for name in graders}


def _one_submit(ctx: Context, env: Any, out: dict[str, list[float]],
                envs: list[Any] | None = None) -> bool:
    """One timed submit of the gold patch; ``envs``: every env of the comparison, settled
    before the clock starts (``settle``)."""
    env.reset(seed=0)
    _apply_gold(ctx, env)
    wait_for(lambda: ready_count(env, "grader") >= 1, what="a warm grading container")
    settle(envs or [env])
    seconds, (_, _, _, _, info) = timed(lambda: env.step({"tool": "submit"}))
    report = info["grading"]
    out["submit"].append(seconds)
    out["test"].append(report["test_seconds"])
    out["harness"].append(seconds - report["test_seconds"])
    out["decoy"].append(report.get("decoy_seconds", 0.0))
    for stage in STAGES:  # a stage a grade did not have (no decoy run) counts 0
        out[f"stage.{stage}"].append(report.get("stages", {}).get(stage, 0.0))
    own = pytest_seconds(report["log_tail"])
    if own is not None:
        out["pytest"].append(own)
        out["overhead"].append(seconds - own)
    return bool(report["resolved"])


def _cold_grades(ctx: Context, n: int) -> list[float]:
    """``Grader.grade`` starting its own container, as SWE-bench does."""
    grader = Grader(GraderConfig())
    times = []
    for _ in range(n):
        seconds, report = timed(lambda: grader.grade(ctx.task, ctx.task.patch, ctx.image))
        if not report.resolved:
            raise RepogymError(f"the gold patch did not resolve {ctx.task.instance_id} under a "
                               f"fresh grader: {report.invalid_reasons or report.log_tail[-500:]}")
        times.append(seconds)
    return times


def plain_command(task: Task) -> str:
    """The test command a grading run of ``task`` runs, without the harness around it: pytest's
    on the test files, or the language runner's (``cargo test ...``, ``go test -json ...``; a
    task of another language keeps Python's default ``test_cmd``, which would collect nothing
    there)."""
    name = runner_name(task.environment)
    if name is None:
        return f"{task.environment.test_cmd} {' '.join(test_files(task))}"
    return get_runner(name).command(task.environment, task_test_files(task))


def _plain_runs(ctx: Context, n: int, fresh: bool = False) -> list[float]:
    """The same tests run by hand: the gold and test patches applied in a container of the same
    image, then the test command of a grading run (``plain_command``) with docker-py's
    ``exec_run``; ``n`` times in one container, or with ``fresh`` once in each of ``n`` new
    containers, as every grade runs them (a compiled language builds the patched code once
    there, where the runs after the first in one container find it built)."""
    if fresh:
        return [_plain_runs(ctx, 1)[0] for _ in range(n)]
    box = DockerSandbox(SandboxConfig(image=ctx.image, role="bench"))
    try:
        box.put_files({"gold.patch": ctx.task.patch.encode(),
                       "test.patch": ctx.task.test_patch.encode()}, "/tmp", owner=1000)
        applied = box.run("git apply /tmp/gold.patch && git apply /tmp/test.patch", timeout=60)
        if applied.exit_code != 0:
            raise RepogymError(f"the patches of {ctx.task.instance_id} do not apply: "
                               f"{applied.output[-300:]}; run `repogym tasks validate`")
        command = plain_command(ctx.task)
        if runner_name(ctx.task.environment):  # its results go to the grader's folder
            box.exec(["bash", "-c", f"mkdir -p {OUT} && chown 1000:1000 {OUT}"], user="root")
        out = []
        for _ in range(n):
            seconds, _ = timed(lambda: box.container.exec_run(
                ["bash", "-c", command], workdir="/testbed", user=box.user or ""))
            out.append(seconds)
        return out
    finally:
        box.close()


STAGE_NAMES = {
    "acquire": "the grading container taken from the pool",
    "stage": "staging: the patches, canaries, disguise and decoys, reporter (one root script)",
    "run": "the test run (the decoy run collects meanwhile)",
    "decoy": "the decoy run's tests, after the test run (what the grade waits for)",
    "collect": "the results read from the container (root scripts)",
    "score": "the verdict",
}


def grading_latency(ctx: Context, n: int) -> list[Row]:
    ctx.progress(f"grading latency: {n} submits with a warm grader (every defence, without the "
                 f"disguise, without the disguise and reporter, taking turns), {n} with a fresh "
                 f"container, {n} plain test runs")
    # without the disguise and decoy run, and also without the reporter (the grading before
    # issue 22): what they cost, measured turn by turn with the full grade
    runs = _env_submits(ctx, n, {"all": None, "nodisguise": GraderConfig(disguise=False),
                                 "open": GraderConfig(disguise=False, reporter=False),
                                 "sequential": GraderConfig(decoy_overlap=False)})
    (env, note), (plain_disguise, _), (before, _) = runs["all"], runs["nodisguise"], runs["open"]
    sequential = runs["sequential"][0]
    cold = _cold_grades(ctx, n)
    plain = _plain_runs(ctx, n)
    plain_median = statistics.median(plain)
    fresh = _plain_runs(ctx, n, fresh=True)
    fresh_median = statistics.median(fresh)
    stages = [row(f"grade.stage.{s}", f"stage {s}: {STAGE_NAMES[s]}", "s", env[f"stage.{s}"])
              for s in STAGES]
    return [
        row("grade.pytest", "pytest's own run time (its summary line)", "s", env["pytest"]),
        row("grade.plain", "the same tests run by hand (exec_run of the test command)", "s",
            plain),
        row("grade.test_cmd", "test command wall time (GradingReport.test_seconds)", "s",
            env["test"]),
        row("grade.submit", "repogym submit-to-reward (env.step submit, warm grader)", "s",
            env["submit"], note),
        row("grade.plain_fresh", "the same tests run by hand once in a new container (as "
            "each grade runs them)", "s", fresh),
        row("grade.overhead", "repogym submit-to-reward minus the tests run by hand (median)",
            "s", [s - plain_median for s in env["submit"]]),
        row("grade.overhead_fresh", "repogym submit-to-reward minus the tests run by hand in a "
            "new container (median)", "s", [s - fresh_median for s in env["submit"]]),
        row("grade.over_summary", "repogym submit-to-reward minus pytest's summary time", "s",
            env["overhead"]),
        row("grade.harness", "repogym submit-to-reward minus the test command's wall time", "s",
            env["harness"]),
        *stages,
        row("grade.cold", "repogym Grader.grade, fresh container", "s", cold),
        row("grade.decoy", "the decoy run, from its start with the test run to its end "
            "(GradingReport.decoy_seconds)", "s", env["decoy"]),
        row("grade.nodisguise", "submit-to-reward with disguise=False (no decoy run; the "
            "reporter on)", "s", plain_disguise["submit"]),
        row("grade.open", "submit-to-reward without the disguise, decoy run and reporter "
            "(the grading before them)", "s", before["submit"]),
        row("grade.sequential", "submit-to-reward with the decoy run whole after the test run "
            "(decoy_overlap=False)", "s", sequential["submit"]),
        row("grade.sequential.decoy", "its decoy run (what the grade waits for)", "s",
            sequential["stage.decoy"]),
    ]


def swebench_latency(ctx: Context, n: int, logs_dir: str | None) -> list[Row]:
    """SWE-bench's ``run_instance`` on the same image and patch; 'not measured' if it fails."""
    ctx.progress(f"swebench run_instance: {n} runs (each waits for its `docker stop`)")
    folder = Path(logs_dir) if logs_dir else Path(tempfile.mkdtemp(prefix="repogym-bench-"))
    report, total, own, why = [], [], [], ""
    try:
        for _ in range(n):
            # no network, like repogym's grader (and engines without docker0 need it)
            result = run_official(ctx.task, ctx.image, ctx.task.patch, folder,
                                  f"bench-{uuid.uuid4().hex[:8]}", network_mode="none")
            if not result.resolved:
                raise RepogymError(f"swebench did not resolve the gold patch: {result.log_dir}")
            report.append(result.report_seconds)
            total.append(result.total_seconds)
            log = result.log_dir / "test_output.txt"
            seconds = pytest_seconds(log.read_text(errors="replace")) if log.exists() else None
            if seconds is not None:
                own.append(seconds)
    except (ImportError, RepogymError, OSError) as exc:
        why = f"not measured: {exc}"
    rows = [
        row("swebench.pytest", "pytest's own run time under swebench", "s", own, why),
        row("swebench.report", "swebench run_instance until report.json exists", "s", report,
            why),
        row("swebench.total", "swebench run_instance until it returns", "s", total,
            why or f"logs in {folder}"),
    ]
    return rows


def compare_grading(rows: list[Row]) -> list[Row]:
    rows = compare(rows, "grade.submit", "grade.nodisguise")
    rows = compare(rows, "grade.sequential", "grade.submit")
    rows = compare(rows, "grade.cold", "grade.submit")
    rows = compare(rows, "grade.open", "grade.submit")
    rows = compare(rows, "swebench.report", "grade.submit")
    return compare(rows, "swebench.total", "grade.submit")


# --- memory --------------------------------------------------------------------------------------

def _rss(pid: int | str = "self") -> float:
    """Resident memory of a process, bytes (0 when it is gone)."""
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith("VmRSS:"):
                return float(line.split()[1]) * 1024.0
    except OSError:
        pass
    return 0.0


def _shim_rss(container_id: str) -> float:
    """The containerd shim that keeps this container: host memory outside the container."""
    for proc in Path("/proc").iterdir():
        if not proc.name.isdigit():
            continue
        try:
            argv = (proc / "cmdline").read_bytes().split(b"\0")
        except OSError:
            continue
        if argv and b"containerd-shim" in argv[0] and container_id.encode() in argv:
            return _rss(proc.name)
    return 0.0


def container_memory(container: Any) -> float:
    """Memory the container uses, bytes: ``usage`` minus the page cache (as ``docker stats``)."""
    mem = container.stats(stream=False, one_shot=True).get("memory_stats") or {}
    stats = mem.get("stats") or {}
    cache = stats.get("cache", stats.get("inactive_file", 0))  # cgroup v1, v2
    return float(mem.get("usage", 0)) - float(cache)


def memory_per_env(ctx: Context, k: int) -> list[Row]:
    ctx.progress(f"memory: {k} idle envs")
    first = make_env(ctx, pool_size=0, warm_grader=False)
    envs: list[Any] = []
    try:
        first.reset(seed=0)  # imports and caches are paid before the first reading
        first.step({"tool": "bash", "command": "ls"})
        gc.collect()
        before = _rss()
        tracemalloc.start()
        for _ in range(k):
            envs.append(make_env(ctx, pool_size=0, warm_grader=False))
            envs[-1].reset(seed=0)
            envs[-1].step({"tool": "bash", "command": "ls"})
        time.sleep(1.0)  # idle
        gc.collect()
        heap = tracemalloc.get_traced_memory()[0] / k
        tracemalloc.stop()
        growth = (_rss() - before) / k
        boxes = [docker_box(e) for e in envs]
        inside = [container_memory(b.container) for b in boxes]
        shims = [_shim_rss(b.container.id) for b in boxes]
    finally:
        for env in [first, *envs]:
            close_env(ctx, env)
    shim_note = "" if all(shims) else "shim processes not visible from here"
    return [
        row("memory.container", "container memory, idle env (usage - cache)", "MiB",
            [m / MIB for m in inside]),
        row("memory.process", "repogym process RSS growth per env", "MiB", [growth / MIB],
            "0 when the process reuses memory it freed earlier"),
        row("memory.python", "Python heap per env (tracemalloc)", "MiB", [heap / MIB]),
        row("memory.shim", "containerd-shim RSS per container", "MiB",
            [s / MIB for s in shims if s], shim_note),
        row("memory.host", "host memory per env (process growth + shim)", "MiB",
            [(growth + s) / MIB for s in shims]),
    ]
