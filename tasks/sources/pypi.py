"""Tasks from a package on the package index: its sdist becomes a repository, then replication
and/or synthetic candidates are made from it.

The sdist is fetched with ``pip download --no-deps --no-binary :all:`` (so ``--index-url``,
``--find-links`` and pip's own configuration apply), unpacked, and committed as a one-commit
repository. How to install it and run its tests is read from its files (see ``detect``).
"""

from __future__ import annotations

import re
import subprocess
import sys
import tarfile
import zipfile
from collections.abc import Iterator
from dataclasses import dataclass, replace
from pathlib import Path, PurePosixPath

from repogym.errors import TaskError
from repogym.schema import Task

from . import mutate
from .common import (
    Candidate,
    Deriver,
    Log,
    SourceOptions,
    TaskSource,
    WorkRepo,
    interleave,
    log_stderr,
)
from .detect import EnvOverrides, detect_environment, has_tests
from .replication import Recorder, ReplicationOptions, ReplicationSource
from .statement_model import LLMConfig
from .synthetic import SyntheticOptions, SyntheticSource

KINDS = ("replication", "synthetic")
REQUIREMENT = re.compile(r"^([A-Za-z0-9][A-Za-z0-9._-]*)(==([A-Za-z0-9.+!_-]+))?$")
ARCHIVES = (".tar.gz", ".tgz", ".tar.bz2", ".tar.xz", ".zip", ".tar")


@dataclass(frozen=True)
class PypiOptions:
    requirement: str  # NAME or NAME==VERSION
    kinds: tuple[str, ...] = KINDS  # which task kinds to make from it
    index_url: str | None = None  # passed to pip download
    find_links: str | None = None  # passed to pip download
    pip_args: tuple[str, ...] = ()  # any other pip download arguments (e.g. --no-index)
    granularity: str = "function"  # for replication, see ReplicationOptions
    min_lines: int = 3  # for replication
    operators: tuple[str, ...] = tuple(mutate.OPERATORS)  # for synthetic

    def __post_init__(self) -> None:
        if not REQUIREMENT.match(self.requirement):
            raise ValueError(f"{self.requirement!r}: give NAME or NAME==VERSION.")
        unknown = [k for k in self.kinds if k not in KINDS]
        if unknown or not self.kinds:
            raise ValueError(f"--kinds {','.join(self.kinds)}: use some of {','.join(KINDS)}.")

    @property
    def name(self) -> str:
        return REQUIREMENT.match(self.requirement).group(1)  # type: ignore[union-attr]


def download_sdist(options: PypiOptions, dest: Path) -> Path:
    """The sdist archive of the requirement, downloaded into ``dest``."""
    dest.mkdir(parents=True, exist_ok=True)
    command = [sys.executable, "-m", "pip", "download", "--no-deps", "--no-binary", ":all:",
               "--disable-pip-version-check", "--dest", str(dest), *options.pip_args]
    if options.index_url:
        command += ["--index-url", options.index_url]
    if options.find_links:
        command += ["--find-links", options.find_links]
    proc = subprocess.run([*command, options.requirement], capture_output=True, text=True)
    if proc.returncode != 0:
        raise TaskError(f"pip could not download the sdist of {options.requirement}: "
                        f"{proc.stderr.strip()[-1500:]} (check the name and version, or pass "
                        "--index-url / --find-links).")
    archives = sorted(p for p in dest.iterdir() if p.name.endswith(ARCHIVES))
    if len(archives) != 1:
        raise TaskError(f"expected one sdist in {dest}, found {[p.name for p in archives]}.")
    return archives[0]


def _safe_names(names: list[str], archive: Path) -> None:
    for name in names:
        path = PurePosixPath(name)
        if path.is_absolute() or ".." in path.parts:
            raise TaskError(f"{archive.name} holds an unsafe path {name!r}; not unpacking it.")


def unpack_sdist(archive: Path, dest: Path) -> Path:
    """Unpacks ``archive`` into ``dest``; returns the project folder (the archive's single
    top-level folder, as sdists have)."""
    dest.mkdir(parents=True, exist_ok=True)
    if archive.name.endswith(".zip"):
        with zipfile.ZipFile(archive) as zf:
            _safe_names(zf.namelist(), archive)
            zf.extractall(dest)
    else:
        with tarfile.open(archive) as tf:
            members = [m for m in tf.getmembers() if m.isfile() or m.isdir()]
            _safe_names([m.name for m in members], archive)
            if hasattr(tarfile, "data_filter"):  # refuses links and devices too
                tf.extractall(dest, members=members, filter="data")
            else:
                tf.extractall(dest, members=members)
    tops = list(dest.iterdir())
    return tops[0] if len(tops) == 1 and tops[0].is_dir() else dest


def sdist_version(project: Path) -> str | None:
    """The version an sdist's ``PKG-INFO`` declares."""
    try:
        text = (project / "PKG-INFO").read_text(encoding="utf-8", errors="replace")
    except OSError:
        return None
    match = re.search(r"^Version:\s*(\S+)\s*$", text, re.M)
    return match.group(1) if match else None


def pin_scm_version(setup: tuple[str, ...], version: str | None) -> tuple[str, ...]:
    """The commands that install the project itself, told its version. A project versioned by
    setuptools-scm or hatch-vcs reads it from git tags, which the one-commit snapshot lacks:
    it would install as 0.1.dev1, and a later install whose requirements exclude that version
    (pytest needing iniconfig>=2) replaces it with a copy from the index that shadows /testbed,
    so the tests never see the code under test."""
    if not version or not re.fullmatch(r"[A-Za-z0-9.+!_-]+", version):
        return setup
    own = re.compile(r"pip install (-e )?'?\.(\[[^\]]*\])?'?$")
    return tuple(f"SETUPTOOLS_SCM_PRETEND_VERSION={version} {cmd}" if own.search(cmd) else cmd
                 for cmd in setup)


class PypiSource:
    """Replication and synthetic candidates of one sdist, interleaved."""

    name = "pypi"

    def __init__(self, options: PypiOptions, common: SourceOptions, work_dir: Path,
                 overrides: EnvOverrides | None = None, llm: LLMConfig | None = None,
                 derive: Deriver | None = None, log: Log = log_stderr, *,
                 record: Recorder | None = None) -> None:
        self.options = options
        log(f"downloading the sdist of {options.requirement}")
        archive = download_sdist(options, work_dir / "download")
        project = unpack_sdist(archive, work_dir / "unpacked")
        self.archive = archive.name
        self.work = WorkRepo.create(project, work_dir / project.name,
                                    name=f"pypi/{options.name}")
        if not has_tests(self.work):
            raise TaskError(f"the sdist {archive.name} ships no tests, so no task can be "
                            "checked; try another version, or clone the project's repository "
                            "and use `tasks add replication`/`synthetic` on it.")
        env = detect_environment(self.work, overrides)
        if overrides is None or overrides.setup is None:
            env = replace(env, setup=pin_scm_version(env.setup, sdist_version(project)))
        self.sources: dict[str, TaskSource] = {}
        if "replication" in options.kinds:
            self.sources["replication"] = ReplicationSource(
                self.work, ReplicationOptions(project, granularity=options.granularity,
                                              min_lines=options.min_lines),
                common, env, llm, derive, log, record=record)  # record: differential testing
        if "synthetic" in options.kinds:
            self.sources["synthetic"] = SyntheticSource(
                self.work, SyntheticOptions(project, operators=options.operators),
                common, env, llm, derive, log)

    def candidates(self) -> Iterator[Candidate]:
        return interleave([source.candidates() for source in self.sources.values()])

    def check(self, task: Task) -> tuple[Task | None, str]:
        return self.sources[task.kind].check(task)
