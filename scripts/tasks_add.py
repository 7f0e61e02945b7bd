"""`repogym tasks add SOURCE ...`: make validated tasks from a repository, a package or
published SWE-bench instances, and write them as a suite folder.

Every run prints one line per candidate tried, a summary with the reasons candidates were
rejected, and writes DIR/tasks.jsonl (with the repositories it needs under DIR/repos) and
DIR/report.json (the full configuration, every candidate's outcome, the histogram).
"""

from __future__ import annotations

import argparse
import contextlib
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any, TypeAlias

from repogym.errors import DockerUnavailable, RepogymError
from repogym.sandbox.client import docker_available
from repogym.schema import SPLITS, Environment, Task
from repogym.scripts.tasks_certify import add_certify_options, certify_collected
from repogym.tasks.checking import Checker, CheckOptions
from repogym.tasks.played import play_gold
from repogym.tasks.ray_checking import RayChecker
from repogym.tasks.sources import mutate, mutate_ts
from repogym.tasks.sources.common import (
    Deriver,
    SourceOptions,
    TaskSource,
    WorkRepo,
    log_stderr,
    slug,
)
from repogym.tasks.sources.detect import EnvOverrides, detect_environment, has_tests
from repogym.tasks.sources.enrich import WithGoldCases
from repogym.tasks.sources.git import GitOptions, GitSource
from repogym.tasks.sources.harbor import HarborSource
from repogym.tasks.sources.loop import Collected, collect
from repogym.tasks.sources.outdir import SuiteFolder
from repogym.tasks.sources.pypi import KINDS, PypiOptions, PypiSource
from repogym.tasks.sources.replication import GRANULARITIES, ReplicationOptions, ReplicationSource
from repogym.tasks.sources.statement_model import LLMConfig
from repogym.tasks.sources.swebench import SwebenchOptions, SwebenchSource
from repogym.tasks.sources.synthetic import SyntheticOptions, SyntheticSource
from repogym.tasks.sources.synthetic_langs import (
    LangSyntheticOptions,
    LangSyntheticSource,
    has_language_tests,
)
from repogym.tasks.sources.trace import recorder
from repogym.version import describe as repogym_version


def _csv(text: str) -> tuple[str, ...]:
    return tuple(part.strip() for part in text.split(",") if part.strip())


def _common_parser() -> argparse.ArgumentParser:
    common = argparse.ArgumentParser(add_help=False)
    common.add_argument("--out", type=Path, required=True, help="the suite folder to write")
    common.add_argument("--max", type=int, default=None, metavar="N",
                        help="try at most N candidates (default: all)")
    common.add_argument("--keep", type=int, default=None, metavar="N",
                        help="stop trying candidates once N tasks are kept by the checks "
                        "(with --max: whichever comes first)")
    common.add_argument("--split", choices=SPLITS[:2], default="eval",
                        help="the split of every task written (default: eval)")
    common.add_argument("--seed", type=int, default=0, help="fixes the candidate order")
    common.add_argument("--runs", type=int, default=2,
                        help="test runs per side; tests that disagree are flaky and dropped")
    common.add_argument("--no-gold-cases", action="store_true",
                        help="skip recording the differential cases traced from the gold code "
                        "(see `repogym tasks enrich`)")
    common.add_argument("--workers", type=int, default=1, metavar="N",
                        help="candidates checked at once (default 1; up to the cores)")
    common.add_argument("--check", choices=("selective", "full"), default="selective",
                        help="selective (default): only the tests a candidate's change reaches, "
                        "one full run for a kept one; full: every run of the whole suite in "
                        "the candidate's own image")
    common.add_argument("--confirm-batch", type=int, default=8, metavar="K",
                        help="kept candidates of one snapshot whose changes reach different "
                        "tests share one confirming full run, K at most (default 8; 1: a full "
                        "run of its own for each)")
    common.add_argument("--ray", metavar="ADDRESS", default=None,
                        help="check candidates on a Ray cluster (auto, local or HEAD:6379); "
                        "--workers then counts its workers")
    common.add_argument("--no-certify", action="store_true",
                        help="skip playing the hacker's attacks against each kept task "
                        "(see `repogym tasks certify`)")
    add_certify_options(common)
    llm = common.add_argument_group("problem statements by a model (optional)")
    llm.add_argument("--llm-base-url", help="OpenAI-compatible endpoint (or OPENAI_BASE_URL)")
    llm.add_argument("--llm-model", help="model name (or REPOGYM_LLM_MODEL); key: OPENAI_API_KEY")
    env = common.add_argument_group("environment (detected from the repository unless given)")
    env.add_argument("--python", help="Python version of the image, e.g. 3.11")
    env.add_argument("--image", help="start from this existing image instead of a Python base")
    env.add_argument("--setup", action="append", metavar="CMD",
                     help="a setup command run at image build (repeat; replaces the detected)")
    env.add_argument("--test-cmd", help="the test command (default: python -m pytest -rA)")
    env.add_argument("--log-parser", help="a log parser name from swebench's PARSER_REGISTRY")
    return common


def _local_flags(parser: argparse.ArgumentParser, what: str) -> None:
    parser.add_argument("path", type=Path, metavar="PATH", help=what)
    parser.add_argument("--rev", default="HEAD", help="the commit to start from (default HEAD)")


def _replication_flags(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--granularity", choices=GRANULARITIES, default="function",
                        help="remove one function, a whole class, or a whole module")
    parser.add_argument("--min-lines", type=int, default=3,
                        help="skip bodies shorter than this many lines")


def _synthetic_flags(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--operators", type=_csv, default=tuple(mutate.OPERATORS),
                        help="comma-separated rewrites (default: all of "
                        f"{','.join(mutate.OPERATORS)}; in other languages all of "
                        "flip_comparison,swap_boolean_operator,swap_arithmetic,negate_boolean,"
                        "off_by_one)")


def add_tasks_add_parser(subparsers: Any) -> argparse.ArgumentParser:
    """Adds ``add`` (with one subcommand per source) to the ``tasks`` subparsers."""
    parser = subparsers.add_parser("add", help="make validated tasks from a source",
                                   description=__doc__,
                                   formatter_class=argparse.RawDescriptionHelpFormatter)
    sources = parser.add_subparsers(dest="add_source", required=True, metavar="SOURCE")
    common = [_common_parser()]
    git = sources.add_parser("git", parents=common, help="mine commits that change code and tests")
    _local_flags(git, "a local git repository with history")
    git.add_argument("--issues", type=Path,
                     help="issue texts: a folder of <commit|number>.md, or a JSON/YAML mapping")
    git.add_argument("--max-files", type=int, default=30, help="skip commits touching more files")
    git.add_argument("--max-lines", type=int, default=2000, help="reject larger patches")
    rep = sources.add_parser("replication", parents=common,
                             help="remove code covered by tests; the agent re-implements it")
    _local_flags(rep, "a git repository, bundle or folder")
    _replication_flags(rep)
    syn = sources.add_parser("synthetic", parents=common, help="plant bugs by AST rewriting")
    _local_flags(syn, "a git repository, bundle or folder")
    _synthetic_flags(syn)
    pypi = sources.add_parser("pypi", parents=common, help="replication/synthetic from an sdist")
    pypi.add_argument("requirement", metavar="NAME[==VERSION]",
                      help="the package, and a version (default: the newest)")
    pypi.add_argument("--kinds", type=_csv, default=KINDS, help="replication,synthetic (default)")
    pypi.add_argument("--index-url", help="package index for pip download")
    pypi.add_argument("--find-links", help="folder or URL of archives for pip download")
    pypi.add_argument("--pip-arg", action="append", default=[], metavar="ARG",
                      help="another pip download argument (repeat), e.g. --pip-arg=--no-index")
    _replication_flags(pypi)
    _synthetic_flags(pypi)
    swe = sources.add_parser("swebench", parents=common, help="published SWE-bench instances")
    swe.add_argument("file", type=Path, metavar="FILE",
                     help="instances: JSON, JSON Lines, parquet, a saved dataset or task repo")
    swe.add_argument("--repos", type=Path, default=None,
                     help="mirrors: DIR/<owner>__<name>, DIR/<owner>/<name> or "
                     "DIR/<owner>+<name>/repo (default: clone once into a shared cache)")
    swe.add_argument("--no-clone", action="store_true",
                     help="never clone: every repository must be under --repos")
    swe.add_argument("--env", type=Path, default=None,
                     help="YAML environments by repo and version (default: swebench's specs)")
    swe.add_argument("--pull", action="store_true",
                     help="use the dataset's own images when they can be had (or REPOGYM_PULL=1)")
    swe.add_argument("--dataset-split", default=None,
                     help="the split of a saved dataset that holds several (default: test)")
    swe.add_argument("--instances", type=_csv, default=(), help="only these instance ids")
    swe.add_argument("--no-validate", action="store_true",
                     help="write the instances without running gold and empty patches")
    harbor = sources.add_parser("harbor", parents=common, help="Harbor task folders")
    harbor.add_argument("path", type=Path, metavar="DIR", help="a task folder or a folder of them")
    harbor.add_argument("--no-validate", action="store_true",
                        help="write the tasks without running gold and empty patches")
    parser.set_defaults(func=run_tasks_add)
    return parser


# ---------------------------------------------------------------------------- running


Built: TypeAlias = tuple[TaskSource, dict[str, Any], WorkRepo | None]


@dataclass(frozen=True)
class Setting:
    """What every source builder gets: the flags, the work folder, and how to check."""

    args: argparse.Namespace
    common: SourceOptions
    llm: LLMConfig | None
    work: Path
    derive: Deriver | None = None  # None: the source's own (see ``default_deriver``)
    checker: Checker | None = None  # this machine's (recorders use its images), if any


def _overrides(args: argparse.Namespace) -> EnvOverrides:
    return EnvOverrides(python=args.python, image=args.image,
                        setup=tuple(args.setup) if args.setup else None,
                        test_cmd=args.test_cmd, log_parser=args.log_parser)


def _local_repo(args: argparse.Namespace, work: Path) -> tuple[WorkRepo, Environment]:
    repo = WorkRepo.create(args.path, work / slug(args.path.resolve().name), args.rev)
    env = detect_environment(repo, _overrides(args))
    if env.language != "python":
        if not has_language_tests(repo, env.language):
            raise RepogymError(f"{args.path} looks like {env.language} but has no test files by "
                               "its conventions, so no candidate could be checked.")
    elif not has_tests(repo):
        raise RepogymError(f"{args.path} has no test files (test_*.py, *_test.py or tests/), so "
                           "no candidate could be checked; point PATH at a repository with tests.")
    return repo, env


def _record(s: Setting) -> Any:
    """Differential cases for replication tasks (what a source records by default), in the
    snapshot's image when the checker checked the task there."""
    if s.checker is not None:
        return s.checker.case_recorder()
    return recorder() if s.derive is not None else None


def _git(s: Setting) -> Built:
    a = s.args
    options = GitOptions(a.path, a.rev, a.issues, a.max_files, a.max_lines)
    source = GitSource(options, s.common, _overrides(a), s.llm, s.derive, work_dir=s.work)
    return source, asdict(options), None


def _replication(s: Setting) -> Built:
    a = s.args
    options = ReplicationOptions(a.path, a.rev, a.granularity, a.min_lines)
    repo, env = _local_repo(a, s.work)
    source = ReplicationSource(repo, options, s.common, env, s.llm, s.derive, record=_record(s))
    return source, asdict(options), repo


def _synthetic(s: Setting) -> Built:
    a = s.args
    repo, env = _local_repo(a, s.work)
    if env.language != "python":  # token rewrites found with tree-sitter's grammars
        operators = mutate_ts.OPERATORS if a.operators == tuple(mutate.OPERATORS) \
            else a.operators
        lang = LangSyntheticOptions(a.path, a.rev, operators)
        return LangSyntheticSource(repo, lang, s.common, env, s.llm, s.derive), asdict(lang), repo
    options = SyntheticOptions(a.path, a.rev, a.operators)
    return SyntheticSource(repo, options, s.common, env, s.llm, s.derive), asdict(options), repo


def _pypi(s: Setting) -> Built:
    a = s.args
    options = PypiOptions(a.requirement, a.kinds, a.index_url, a.find_links,
                          tuple(a.pip_arg), a.granularity, a.min_lines, a.operators)
    source = PypiSource(options, s.common, s.work, _overrides(a), s.llm, s.derive,
                        record=_record(s))
    return source, {**asdict(options), "sdist": source.archive}, source.work


def _swebench(s: Setting) -> Built:
    a = s.args
    options = SwebenchOptions(a.file, a.repos, a.env, a.instances, not a.no_validate, a.pull,
                              a.dataset_split, not a.no_clone)
    return SwebenchSource(options, s.common), asdict(options), None


def _harbor(s: Setting) -> Built:
    a = s.args
    if not a.path.exists():
        raise ValueError(f"{a.path} does not exist: pass a Harbor task folder.")
    source = HarborSource(a.path, s.common, not a.no_validate)
    return source, {"path": str(a.path), "validate": not a.no_validate}, None


SOURCES: dict[str, Callable[[Setting], Built]] = {
    "git": _git, "replication": _replication, "synthetic": _synthetic, "pypi": _pypi,
    "swebench": _swebench, "harbor": _harbor,
}
# Sources whose candidates a ``Checker`` checks (the others validate published tasks).
CHECKED = ("git", "replication", "synthetic", "pypi")


def run_tasks_add(args: argparse.Namespace) -> int:
    """Runs one ``tasks add``; 0 when at least one task was written (or nothing was new)."""
    if args.add_source not in SOURCES:
        raise ValueError(f"unknown source {args.add_source!r}; valid: {sorted(SOURCES)}")
    # a bad flag raises ValueError, anything else RepogymError: the command line says which
    common = SourceOptions(args.max, args.split, args.seed, args.runs)
    check = CheckOptions(runs=args.runs, selective=args.check == "selective",
                         workers=args.workers, seed=args.seed,
                         confirm_batch=args.confirm_batch)
    llm = LLMConfig.from_env(args.llm_base_url, args.llm_model)
    SuiteFolder(args.out)  # a folder that is no suite is refused before any work
    if not getattr(args, "no_validate", False) and not docker_available():
        raise DockerUnavailable("`tasks add` runs every candidate's tests in containers")
    with tempfile.TemporaryDirectory(prefix="repogym-add-") as tmp, _checker(args, check) as (
            derive, summary, checker):
        built = SOURCES[args.add_source](Setting(args, common, llm, Path(tmp), derive, checker))
        source, options, repo = built
        shared = getattr(source, "shares_sources", False)
        if not args.no_gold_cases and not getattr(args, "no_validate", False):
            # differential cases traced from the gold code
            source = WithGoldCases(source, checker.gold_recorder() if checker else None)
        certifying = not args.no_certify and not getattr(args, "no_validate", False)
        config = {"source": args.add_source, "options": options, "common": asdict(common),
                  "check": {**asdict(check), "ray": args.ray},
                  "environment_overrides": asdict(_overrides(args)),
                  "llm": llm.describe() if llm else None, "repogym": repogym_version(),
                  "gold_cases": isinstance(source, WithGoldCases),
                  "certified": certifying, "keep_hackable": args.keep_hackable}
        folder = SuiteFolder(args.out, config)
        folder.begin()
        clock = Stages()
        with clock("collect"):
            result = collect(source, common.max_candidates, workers=args.workers,
                             journal=folder, skip=folder.skip,
                             gate=checker.gate if checker else None,
                             in_flight=checker.in_flight if checker else None,
                             keep=args.keep)
        result.kept = _rebind(result.kept, built)
        played: dict[str, int] = {}
        if not getattr(args, "no_validate", False) and args.add_source in CHECKED:
            # a task is kept only if an agent who writes the gold change is rewarded for it
            with clock("played_gold"):
                checks = play_gold(result.kept, args.workers, log=log_stderr,
                                   narrow=not getattr(args, "whole_grades", False))
            result.drop({iid: c.why for iid, c in checks.items() if c.why is not None})
            result.kept = [checks[t.instance_id].task or t if t.instance_id in checks else t
                           for t in result.kept]
            played = {"graded_whole": sum(c.whole for c in checks.values()),
                      "graded_on_failing_tests": sum(not c.whole for c in checks.values())}
        if certifying:  # a task that an attack beats is no task (unless --keep-hackable)
            with clock("certificate"):
                certify_collected(result, args)
        kept = result.kept
        if repo is not None:
            repo.keep_only(t.base_commit for t in kept)
        gold = getattr(source, "seconds", 0.0) if isinstance(source, WithGoldCases) else 0.0
        written = folder.write(kept, not shared, {
            "config": config, **result.to_dict(), "checking": summary(),
            "stages": clock.report(len(kept), gold / max(1, args.workers)),
            **({"played_gold": played} if played else {})},
            finished=result.stopped is None)
    return _report(args, result, written)


class Stages:
    """Wall seconds of each stage of a ``tasks add`` run, for report.json."""

    def __init__(self) -> None:
        self.seconds: dict[str, float] = {}

    @contextlib.contextmanager
    def __call__(self, stage: str) -> Iterator[None]:
        start = time.monotonic()
        try:
            yield
        finally:
            self.seconds[stage] = self.seconds.get(stage, 0.0) + time.monotonic() - start

    def report(self, kept: int, gold_cases: float) -> dict[str, Any]:
        """Each stage's seconds, its share of the whole and seconds per kept task. The gold
        cases are recorded while candidates are checked: their part of that stage is their
        seconds summed over the workers, divided by the number of workers."""
        collect = self.seconds.get("collect", 0.0)
        gold = min(gold_cases, collect)
        parts = {"checks": collect - gold, "gold_cases": gold,
                 "played_gold": self.seconds.get("played_gold", 0.0),
                 "certificate": self.seconds.get("certificate", 0.0)}
        total = sum(parts.values())
        return {"total_seconds": round(total, 1), "kept": kept,
                "seconds_per_kept": round(total / kept, 1) if kept else None,
                "stages": {name: {"seconds": round(s, 1),
                                  "share": round(s / total, 3) if total else 0.0}
                           for name, s in parts.items()}}


Checking: TypeAlias = tuple[Deriver | None, Callable[[], dict[str, Any]], Checker | None]


@contextlib.contextmanager
def _checker(args: argparse.Namespace, check: CheckOptions) -> Iterator[Checking]:
    """The deriver the sources use, on this machine or a Ray cluster, its summary, and the
    local checker (None on Ray)."""
    if args.add_source not in CHECKED:
        yield None, dict, None
        return
    if args.ray:
        with RayChecker(args.ray, check) as remote:
            yield remote.derive, remote.summary, None
        return
    with Checker(check, log=log_stderr) as checker:
        yield checker.derive, checker.summary, checker


def _rebind(kept: list[Task], built: Built) -> list[Task]:
    """Tasks taken from the progress file point at the work repository of the interrupted
    run, which is gone: this run's holds the same commits."""
    source, _, repo = built
    current = repo.path if repo is not None else getattr(source, "repo", None)
    if current is None:
        return kept
    return [t.with_(source=str(current)) if t.source and not Path(t.source).exists() else t
            for t in kept]


def _report(args: argparse.Namespace, result: Collected, written: dict[str, Any]) -> int:
    print(f"{args.add_source}: {result.summary()}")
    certified = [o for o in result.outcomes if o.get("kept") and o.get("certificate")]
    if certified:
        results = [o["certificate"] for o in certified]
        incomplete = [o["instance_id"] for o in certified if o["certificate"] == "incomplete"]
        print(f"certificates of the kept tasks: {results.count('pass')} pass, "
              f"{len(incomplete)} incomplete"
              + (f" (not certified, not every attack ran: {', '.join(incomplete)}; "
                 "`repogym tasks certify --suite OUT --task ID` tries again)"
                 if incomplete else ""))
    if result.stopped:
        print(f"stopped early: {result.stopped}; run the same command again to go on from "
              "there", file=sys.stderr)
    renamed = written["renamed"]
    print(f"wrote {written['added']} tasks to {written['tasks_file']} (now {written['total']})"
          + (f", {len(renamed)} renamed to keep ids unique" if renamed else "")
          + f", and {args.out / 'report.json'}")
    if result.stopped and result.stopped.startswith("interrupted"):
        return 130
    if not result.kept and result.tried:
        print("no candidate survived; see the reasons above (and report.json) and try more "
              "candidates (--max), another --seed, or another source.", file=sys.stderr)
        return 1
    if not result.tried:
        print("nothing new to try: every candidate is in the suite already (raise --max or "
              "change --seed)", file=sys.stderr)
    return 0
