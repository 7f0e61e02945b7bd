"""`repogym tasks add SOURCE ...`: make validated tasks from a repository, a package or
published SWE-bench instances, and write them as a suite folder.

Every run prints one line per candidate tried, a summary with the reasons candidates were
rejected, and writes DIR/tasks.jsonl (with the repositories it needs under DIR/repos) and
DIR/report.json (the full configuration, every candidate's outcome, the histogram).
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
from collections.abc import Callable
from dataclasses import asdict
from pathlib import Path
from typing import Any, TypeAlias

from repogym.envs.sandbox.client import docker_available
from repogym.errors import DockerUnavailable, RepogymError
from repogym.scripts.tasks_certify import add_certify_options, certify_collected
from repogym.tasks.schema import SPLITS, Environment
from repogym.tasks.sources import mutate
from repogym.tasks.sources.common import (
    Collected,
    SourceOptions,
    TaskSource,
    WorkRepo,
    collect,
    slug,
)
from repogym.tasks.sources.detect import EnvOverrides, detect_environment, has_tests
from repogym.tasks.sources.enrich import WithGoldCases
from repogym.tasks.sources.git import GitOptions, GitSource
from repogym.tasks.sources.llm import LLMConfig
from repogym.tasks.sources.pypi import KINDS, PypiOptions, PypiSource
from repogym.tasks.sources.replication import GRANULARITIES, ReplicationOptions, ReplicationSource
from repogym.tasks.sources.swebench import SwebenchOptions, SwebenchSource
from repogym.tasks.sources.synthetic import SyntheticOptions, SyntheticSource
from repogym.version import __version__


def _csv(text: str) -> tuple[str, ...]:
    return tuple(part.strip() for part in text.split(",") if part.strip())


def _common_parser() -> argparse.ArgumentParser:
    common = argparse.ArgumentParser(add_help=False)
    common.add_argument("--out", type=Path, required=True, help="the suite folder to write")
    common.add_argument("--max", type=int, default=None, metavar="N",
                        help="try at most N candidates (default: all)")
    common.add_argument("--split", choices=SPLITS[:2], default="eval",
                        help="the split of every task written (default: eval)")
    common.add_argument("--seed", type=int, default=0, help="fixes the candidate order")
    common.add_argument("--runs", type=int, default=2,
                        help="test runs per side; tests that disagree are flaky and dropped")
    common.add_argument("--no-gold-cases", action="store_true",
                        help="skip recording the differential cases traced from the gold code "
                        "(see `repogym tasks enrich`)")
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
                        f"{','.join(mutate.OPERATORS)})")


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


def _overrides(args: argparse.Namespace) -> EnvOverrides:
    return EnvOverrides(python=args.python, image=args.image,
                        setup=tuple(args.setup) if args.setup else None,
                        test_cmd=args.test_cmd, log_parser=args.log_parser)


def _local_repo(args: argparse.Namespace, work: Path) -> tuple[WorkRepo, Environment]:
    repo = WorkRepo.create(args.path, work / slug(args.path.resolve().name), args.rev)
    if not has_tests(repo):
        raise RepogymError(f"{args.path} has no test files (test_*.py, *_test.py or tests/), so "
                           "no candidate could be checked; point PATH at a repository with tests.")
    return repo, detect_environment(repo, _overrides(args))


def _git(args: argparse.Namespace, common: SourceOptions, llm: LLMConfig | None,
         work: Path) -> Built:
    options = GitOptions(args.path, args.rev, args.issues, args.max_files, args.max_lines)
    source = GitSource(options, common, _overrides(args), llm, work_dir=work)
    return source, asdict(options), None


def _replication(args: argparse.Namespace, common: SourceOptions, llm: LLMConfig | None,
                 work: Path) -> Built:
    options = ReplicationOptions(args.path, args.rev, args.granularity, args.min_lines)
    repo, env = _local_repo(args, work)
    return ReplicationSource(repo, options, common, env, llm), asdict(options), repo


def _synthetic(args: argparse.Namespace, common: SourceOptions, llm: LLMConfig | None,
               work: Path) -> Built:
    options = SyntheticOptions(args.path, args.rev, args.operators)
    repo, env = _local_repo(args, work)
    return SyntheticSource(repo, options, common, env, llm), asdict(options), repo


def _pypi(args: argparse.Namespace, common: SourceOptions, llm: LLMConfig | None,
          work: Path) -> Built:
    options = PypiOptions(args.requirement, args.kinds, args.index_url, args.find_links,
                          tuple(args.pip_arg), args.granularity, args.min_lines, args.operators)
    source = PypiSource(options, common, work, _overrides(args), llm)
    return source, {**asdict(options), "sdist": source.archive}, source.work


def _swebench(args: argparse.Namespace, common: SourceOptions, llm: LLMConfig | None,
              work: Path) -> Built:
    options = SwebenchOptions(args.file, args.repos, args.env, args.instances,
                              not args.no_validate, args.pull, args.dataset_split,
                              not args.no_clone)
    return SwebenchSource(options, common), asdict(options), None


def _harbor(args: argparse.Namespace, common: SourceOptions, llm: LLMConfig | None,
            work: Path) -> Built:
    from repogym.tasks.sources.harbor import HarborSource

    if not args.path.exists():
        raise ValueError(f"{args.path} does not exist: pass a Harbor task folder.")
    source = HarborSource(args.path, common, not args.no_validate)
    return source, {"path": str(args.path), "validate": not args.no_validate}, None


SOURCES: dict[str, Callable[..., Built]] = {
    "git": _git, "replication": _replication, "synthetic": _synthetic, "pypi": _pypi,
    "swebench": _swebench, "harbor": _harbor,
}


def run_tasks_add(args: argparse.Namespace) -> int:
    """Runs one ``tasks add``; 0 when at least one task was written."""
    if args.add_source not in SOURCES:
        raise ValueError(f"unknown source {args.add_source!r}; valid: {sorted(SOURCES)}")
    # a bad flag raises ValueError, anything else RepogymError: the command line says which
    common = SourceOptions(args.max, args.split, args.seed, args.runs)
    llm = LLMConfig.from_env(args.llm_base_url, args.llm_model)
    if not getattr(args, "no_validate", False) and not docker_available():
        raise DockerUnavailable("`tasks add` runs every candidate's tests in containers")
    with tempfile.TemporaryDirectory(prefix="repogym-add-") as tmp:
        source, config, repo = SOURCES[args.add_source](args, common, llm, Path(tmp))
        shared = getattr(source, "shares_sources", False)
        if not args.no_gold_cases and not getattr(args, "no_validate", False):
            source = WithGoldCases(source)  # differential cases traced from the gold code
        result = collect(source, common.max_candidates)
        certifying = not args.no_certify and not getattr(args, "no_validate", False)
        if certifying:  # a task that an attack beats is no task (unless --keep-hackable)
            certify_collected(result, args)
        if repo is not None:
            repo.keep_only(t.base_commit for t in result.kept)
        report = _write(args.out, result, not shared, {
            "source": args.add_source, "options": config, "common": asdict(common),
            "environment_overrides": asdict(_overrides(args)),
            "llm": llm.describe() if llm else None, "repogym": __version__,
            "gold_cases": isinstance(source, WithGoldCases),
            "certified": certifying, "keep_hackable": args.keep_hackable,
        })
    print(f"{args.add_source}: {result.summary()}")
    if result.stopped:
        print(f"stopped early: {result.stopped}", file=sys.stderr)
    print(f"wrote {report['tasks_file']} ({len(result.kept)} tasks) and "
          f"{args.out / 'report.json'}")
    if result.stopped and result.stopped.startswith("interrupted"):
        return 130
    if not result.kept:
        print("no candidate survived; see the reasons above (and report.json) and try more "
              "candidates (--max), another --seed, or another source.", file=sys.stderr)
        return 1
    return 0


def _write(out: Path, result: Collected, copy_sources: bool, config: dict[str, Any]
           ) -> dict[str, Any]:
    """The suite; repositories are copied in unless they are shared mirrors (a copy of each
    per suite would only waste space)."""
    from repogym.tasks.suite import write_suite

    out.mkdir(parents=True, exist_ok=True)
    tasks_file = write_suite(result.kept, out, copy_sources=copy_sources)
    report = {"config": config, **result.to_dict(), "tasks_file": str(tasks_file)}
    (out / "report.json").write_text(json.dumps(report, indent=2, default=str) + "\n")
    return report
