"""Published SWE-bench instances, with local mirrors of their repositories.

Instances come from a JSON or JSON Lines file as published (the test lists may be JSON strings).
Each repository is a local mirror under ``--repos DIR`` (``DIR/owner__name`` or
``DIR/owner/name``, optionally ending in ``.git`` or ``.bundle``). How to build and test each
repository and version comes from a small YAML file:

    pallets/flask:
      "2.0":
        python: "3.11"
        setup: ["python -m pip install -e ."]
        test_cmd: "pytest -rA"
        log_parser: parse_log_pytest   # optional: SWE-bench's parser for the repository
      "*": {...}                       # optional: any other version

To grade as the official harness does, the tests run are SWE-bench's test directives: the files
the test patch touches, minus non-test extensions, as Django module names for django/django.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from repogym.errors import TaskError
from repogym.tasks.schema import Task

from .common import Candidate, Rejected, SourceOptions, run_git

SPEC_KEYS = {"python", "setup", "test_cmd", "log_parser", "image", "timeout"}


@dataclass(frozen=True)
class SwebenchOptions:
    file: Path  # the instances (JSON list, JSON object, or JSON Lines)
    repos: Path  # the folder of repository mirrors
    env: Path  # the YAML environment specs by repository and version
    instances: tuple[str, ...] = ()  # only these instance ids (all when empty)
    validate: bool = True  # check that the gold patch resolves and the empty patch does not

    def __post_init__(self) -> None:
        for flag, path in (("FILE", self.file), ("--repos", self.repos), ("--env", self.env)):
            if not path.exists():
                raise ValueError(f"{flag} {path} does not exist.")


def load_instances(path: Path) -> list[dict[str, Any]]:
    """Instances from a JSON list, a single JSON object or JSON Lines."""
    text = path.read_text(encoding="utf-8")
    try:
        data = json.loads(text)
    except json.JSONDecodeError:
        rows = []
        for number, line in enumerate(text.splitlines(), start=1):
            if line.strip():
                try:
                    rows.append(json.loads(line))
                except json.JSONDecodeError as err:
                    raise TaskError(f"{path}:{number} is not JSON ({err}).") from err
        return rows
    return data if isinstance(data, list) else [data]


def load_specs(path: Path) -> dict[str, dict[str, dict[str, Any]]]:
    data = yaml.safe_load(path.read_text(encoding="utf-8")) or {}
    if not isinstance(data, dict):
        raise TaskError(f"{path} must map repositories to versions to specs.")
    specs: dict[str, dict[str, dict[str, Any]]] = {}
    for repo, versions in data.items():
        if not isinstance(versions, dict):
            raise TaskError(f"{path}: {repo} must map versions to specs.")
        for version, spec in versions.items():
            unknown = set(spec or {}) - SPEC_KEYS
            if unknown:
                raise TaskError(f"{path}: {repo} {version} has unknown keys {sorted(unknown)}; "
                                f"valid: {sorted(SPEC_KEYS)}.")
            specs.setdefault(str(repo), {})[str(version)] = dict(spec or {})
    return specs


def spec_for(specs: dict[str, dict[str, dict[str, Any]]], repo: str, version: str
             ) -> dict[str, Any] | None:
    versions = specs.get(repo) or specs.get("*") or {}
    return versions.get(version) or versions.get("*")


def default_parser(repo: str) -> str:
    """SWE-bench's log parser for a repository, by its name in ``PARSER_REGISTRY``."""
    from swebench.harness.log_parsers import PARSER_REGISTRY
    from swebench.harness.log_parsers.python import MAP_REPO_TO_PARSER_PY

    parser = MAP_REPO_TO_PARSER_PY.get(repo)
    if parser is None:
        return "parse_log_pytest"
    names = [name for name, fn in PARSER_REGISTRY.items() if fn is parser]
    suffix = repo.split("/")[-1].split("-")[0]
    return next((n for n in names if n.endswith(suffix)), names[0])


def get_test_directives(test_patch: str, repo: str) -> list[str]:
    """What the official harness appends to the test command for this test patch."""
    from swebench.harness.constants import NON_TEST_EXTS

    paths = re.findall(r"diff --git a/.* b/(.*)", test_patch)
    paths = [p for p in paths if not any(p.endswith(ext) for ext in NON_TEST_EXTS)]
    if repo == "django/django":
        paths = [p.removesuffix(".py").removeprefix("tests/").replace("/", ".") for p in paths]
    return paths


def find_mirror(repos: Path, repo: str) -> Path | None:
    owner, _, name = repo.partition("/")
    for base in (repos / f"{owner}__{name}", repos / owner / name):
        for path in (base, base.with_name(base.name + ".git"),
                     base.with_name(base.name + ".bundle")):
            if path.exists():
                return path
    return None


def to_task(instance: dict[str, Any], specs: dict[str, dict[str, dict[str, Any]]],
            repos: Path, split: str) -> Candidate:
    """The task of one instance, or why it cannot be one."""
    iid = str(instance.get("instance_id", "?"))
    repo, version = str(instance.get("repo", "")), str(instance.get("version", ""))
    spec = spec_for(specs, repo, version)
    if spec is None:
        return Rejected(iid, "swe", f"no environment spec: add {repo} version {version!r} "
                                    "to the --env YAML")
    mirror = find_mirror(repos, repo)
    if mirror is None:
        return Rejected(iid, "swe", f"no mirror: put {repo} at --repos/"
                                    f"{repo.replace('/', '__')}")
    env = {**spec, "log_parser": spec.get("log_parser") or default_parser(repo),
           "test_files": get_test_directives(str(instance.get("test_patch", "")), repo)}
    try:
        task = Task.from_dict({**instance, "version": version or None, "source": str(mirror),
                               "environment": env,
                               "kind": "swe", "split": split})
    except (TaskError, TypeError, ValueError) as err:
        return Rejected(iid, "swe", f"bad instance or spec: {err}")
    kind = run_git(mirror, "cat-file", "-t", task.base_commit, check=False).strip()
    if kind != "commit":
        return Rejected(iid, "swe", f"base commit missing: {task.base_commit} is not in "
                                    f"{mirror}; update the mirror")
    return task


class SwebenchSource:
    """SWE-bench instances as tasks, checked with ``validate_task`` (see the module docstring)."""

    name = "swebench"

    def __init__(self, options: SwebenchOptions, common: SourceOptions) -> None:
        self.options, self.common = options, common
        self.specs = load_specs(options.env)

    def candidates(self) -> Iterator[Candidate]:
        wanted = set(self.options.instances)
        for instance in load_instances(self.options.file):
            if not wanted or instance.get("instance_id") in wanted:
                yield to_task(instance, self.specs, self.options.repos, self.common.split)

    def check(self, task: Task) -> tuple[Task | None, str]:
        if not self.options.validate:
            return task, "not validated (--no-validate)"
        from repogym.tasks.validate import validate_task

        result = validate_task(task, runs=self.common.runs)
        return (task if result.ok else None), result.reason
