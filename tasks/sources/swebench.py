"""Published instances of the SWE-bench family as validated tasks.

``repogym tasks add swebench FILE --out DIR`` reads FILE as published (see ``datasets``), finds
each repository (``mirrors``: ``--repos DIR``, or a clone cached once per machine), takes the
environment from the harness's own specs (``specs``) unless ``--env SPECS.yaml`` overrides it,
and checks that the gold patch resolves each instance and the empty patch does not.

The ``--env`` YAML maps repository and version to a repogym environment:

    pallets/flask:
      "2.0":
        python: "3.11"
        setup: ["python -m pip install -e ."]
        test_cmd: "pytest -rA"
        log_parser: parse_log_flask   # optional: swebench's parser for the repository
      "*": {...}                       # optional: any other version

With ``--pull`` (or ``REPOGYM_PULL=1``) the dataset's own image is used when the engine has it
or can pull it (swebench's ``sweb.eval.*``, SWE-smith's ``image_name``, R2E-Gym's
``docker_image``); ``repogym.images.dataset`` checks that it holds the base commit and adds what
repogym needs on top. The tests run are the harness's test directives (``specs``).

Instances whose tests reach the network keep those tests out of their lists, with the reason in
the task's ``dropped_tests`` (``offline``); a Python with no base image is replaced by the
nearest one that validates, recorded in ``environment_source``.
"""

from __future__ import annotations

import difflib
from collections.abc import Iterator
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import yaml

from repogym import settings
from repogym.envs.grading.grader import Grader, GraderConfig
from repogym.envs.grading.testcmd import runs_pytest
from repogym.errors import RepogymError, TaskError, UsageError
from repogym.images.dataset import available
from repogym.images.repository import ensure_image
from repogym.schema import Task
from repogym.tasks.flaky import without_flaky
from repogym.tasks.validate import (
    derive_lists,
    relaxations,
    validate_task,
    with_longer_limit,
)
from repogym.tls import explain_certificate

from . import datasets, specs, specs_langs
from .common import Candidate, Rejected, SourceOptions
from .detect import detect_environment
from .leak import leak_guard
from .mirrors import Mirrors
from .offline import network_failures
from .tree_view import GitTree

HARNESS_TIMEOUT = 1800.0  # seconds swebench's run_evaluation gives an instance's tests
ENV_KEYS = {"python", "setup", "test_cmd", "log_parser", "image", "timeout", "language", "runner",
            "test_files"}
Specs = dict[str, dict[str, dict[str, Any]]]


@dataclass(frozen=True)
class SwebenchOptions:
    file: Path  # the instances (JSON, JSON Lines, parquet, a saved dataset, a task repository)
    repos: Path | None = None  # a folder of mirrors; without it, clones cached per machine
    env: Path | None = None  # YAML environments by repository and version (overrides specs)
    instances: tuple[str, ...] = ()  # only these instance ids (all when empty)
    validate: bool = True  # check that the gold patch resolves and the empty patch does not
    pull: bool = False  # use the dataset's own images when the engine has or can pull them
    dataset_split: str | None = None  # the split of a saved dataset with several
    clone: bool = True  # clone repositories --repos lacks

    def __post_init__(self) -> None:
        for flag, path in (("FILE", self.file), ("--repos", self.repos), ("--env", self.env)):
            if path is not None and not path.exists():
                raise ValueError(f"{flag} {path} does not exist.")


def load_specs(path: Path) -> Specs:
    data = yaml.safe_load(path.read_text(encoding="utf-8")) or {}
    if not isinstance(data, dict):
        raise TaskError(f"{path} must map repositories to versions to specs.")
    out: Specs = {}
    for repo, versions in data.items():
        if not isinstance(versions, dict):
            raise TaskError(f"{path}: {repo} must map versions to specs.")
        for version, spec in versions.items():
            unknown = set(spec or {}) - ENV_KEYS
            if unknown:
                raise TaskError(f"{path}: {repo} {version} has unknown keys {sorted(unknown)}; "
                                f"valid: {sorted(ENV_KEYS)}.")
            out.setdefault(str(repo), {})[str(version)] = dict(spec or {})
    return out


def spec_for(overrides: Specs, repo: str, version: str) -> dict[str, Any] | None:
    versions = overrides.get(repo) or overrides.get("*") or {}
    return versions.get(version) or versions.get("*")


def default_parser(repo: str) -> str:
    """swebench's log parser for a repository, by its name in ``PARSER_REGISTRY``."""
    from swebench.harness.log_parsers import PARSER_REGISTRY
    from swebench.harness.log_parsers.python import MAP_REPO_TO_PARSER_PY

    parser = MAP_REPO_TO_PARSER_PY.get(repo)
    if parser is None:
        return "parse_log_pytest"
    names = [name for name, fn in PARSER_REGISTRY.items() if fn is parser]
    suffix = repo.split("/")[-1].split("-")[0]
    return next((n for n in names if n.endswith(suffix)), names[0])


def get_test_directives(test_patch: str, repo: str) -> list[str]:
    return specs.test_directives(test_patch, repo)


def pull_allowed(flag: bool) -> bool:
    return flag or settings.PULL.is_on()


def without_non_tests(task: Task) -> Task:
    """The task less the listed ids that name no test. swebench's pytest parser reads any
    line that starts with a status word, captured output included, so a few published lists
    hold a test's printed line (pytest-dev__pytest-5227: ``[100%]``); no run reports such an
    id, and grading would count it as a disagreement of its sources. A pytest id has ``::``;
    what is dropped is kept in the task with the reason."""
    if not runs_pytest(task.environment):
        return task
    junk = {t: "not a test id: a line of captured output that swebench's parser read as a "
               "result" for t in (*task.FAIL_TO_PASS, *task.PASS_TO_PASS) if "::" not in t}
    if not junk:
        return task
    return Task.from_dict({**task.to_dict(),
                           "FAIL_TO_PASS": [t for t in task.FAIL_TO_PASS if t not in junk],
                           "PASS_TO_PASS": [t for t in task.PASS_TO_PASS if t not in junk],
                           "dropped_tests": {**(task.extra.get("dropped_tests") or {}),
                                             **junk}})


def check_instances(options: SwebenchOptions, ids: list[str]) -> None:
    """``--instances`` names only ids the file holds: a typo would otherwise try nothing and
    look like a suite that has every instance already."""
    missing = [i for i in options.instances if i not in set(ids)]
    if not missing:
        return
    close = sorted({m for i in missing for m in difflib.get_close_matches(i, ids, n=3)})
    raise UsageError(
        f"--instances names {len(missing)} id(s) that {options.file} does not hold: "
        f"{', '.join(missing)} (it holds {len(ids)} instances; close matches: "
        f"{', '.join(close) if close else 'none'}). Check the ids, or the file "
        "(--dataset-split for a saved dataset of several splits).")


class SwebenchSource:
    """Dataset instances as tasks, checked with ``validate_task`` (see the module docstring)."""

    name = "swebench"
    published_lists = True  # the lists are the dataset's: tests it marks flaky stay
    shares_sources = True  # tasks point at the shared mirrors; suites do not copy them

    def __init__(self, options: SwebenchOptions, common: SourceOptions) -> None:
        self.options, self.common = options, common
        self.overrides = load_specs(options.env) if options.env else {}
        self.mirrors = Mirrors(options.repos, options.clone)
        self.pull = pull_allowed(options.pull)
        self._retry: dict[str, tuple[dict[str, Any], Path | None, list[str]]] = {}
        self.guard = leak_guard()
        self.rows = [datasets.normalize(row) for row in
                     datasets.load_rows(options.file, options.dataset_split)]
        check_instances(options, [str(row.get("instance_id", "")) for row in self.rows])

    def candidates(self) -> Iterator[Candidate]:
        wanted = set(self.options.instances)
        for instance in self.rows:
            if not wanted or instance.get("instance_id") in wanted:
                yield self.to_task(instance)

    # --- one instance ---------------------------------------------------------------------------

    def to_task(self, instance: dict[str, Any]) -> Candidate:
        iid = str(instance.get("instance_id", "?"))
        try:
            return self._to_task(instance)
        except specs.SpecError as err:
            return Rejected(iid, "swe", f"cannot build here: {err}")
        except TaskError as err:
            return Rejected(iid, "swe", str(err))

    def _to_task(self, instance: dict[str, Any]) -> Task:
        repo, version = str(instance.get("repo", "")), str(instance.get("version", ""))
        image = self._dataset_image(instance)
        if (image is None and specs_langs.language_of(repo) and not instance.get("install_config")
                and spec_for(self.overrides, repo, version) is None):
            specs_langs.precheck(repo, version)  # no clone for what cannot be built anyway
        mirror = self._mirror(instance, repo, needed=image is None)
        if instance["flavor"] == "swe-smith" and mirror is not None:
            instance = datasets.resolve_branch(instance, mirror)
        elif instance["flavor"] == "r2e-gym" and mirror is not None:
            instance = datasets.resolve_commit(instance, mirror)
        env, provenance = self._environment(instance, repo, version, mirror, image)
        env.setdefault("log_parser", default_parser(repo))
        env.setdefault("test_files", get_test_directives(str(instance.get("test_patch", "")),
                                                         repo))
        extra = {k: instance[k] for k in ("expected_output_json",) if k in instance}
        fields = {k: v for k, v in instance.items()
                  if not k.startswith("_") and k not in ("flavor", "dataset_image")}
        try:
            task = Task.from_dict({**fields, **extra, "version": version or None,
                                   "source": str(mirror) if mirror else None,
                                   "environment": env, "kind": "swe",
                                   "split": self.common.split,
                                   "environment_source": provenance,
                                   "dataset_flavor": instance["flavor"]})
        except (TaskError, TypeError, ValueError) as err:
            raise TaskError(f"bad instance or spec: {err}") from err
        return without_non_tests(task)

    def _mirror(self, instance: dict[str, Any], repo: str, needed: bool) -> Path | None:
        commit = instance.get("base_commit") if instance["flavor"] in (
            "swebench", "swebench5", "swe-rebench") else None
        try:
            return self.mirrors.get(repo, str(commit) if commit else None)
        except TaskError:
            if needed:
                raise
            return None  # the dataset's image holds the repository

    def _dataset_image(self, instance: dict[str, Any]) -> str | None:
        """The dataset's image when pulls are allowed and the engine has or gets it."""
        name = instance.get("dataset_image")
        if not self.pull or not name:
            return None
        return str(name) if available(str(name), pull=True) else None

    def _environment(self, instance: dict[str, Any], repo: str, version: str,
                     mirror: Path | None, image: str | None
                     ) -> tuple[dict[str, Any], dict[str, Any]]:
        iid = str(instance["instance_id"])
        override = spec_for(self.overrides, repo, version)
        if override is not None:
            return dict(override), {"from": f"--env {self.options.env}"}
        if image is not None:
            return self._image_environment(instance, repo, version, image)
        commit = str(instance.get("environment_setup_commit") or instance["base_commit"])
        if specs_langs.language_of(repo) and not instance.get("install_config"):
            return self._language_environment(instance, repo, version, mirror, commit)
        config = instance.get("install_config")
        spec = (dict(config) if isinstance(config, dict) else None) or specs.harness_spec(
            repo, version)
        if spec is not None:
            source = ("the dataset's install_config" if config else
                      f"swebench {specs.published()['swebench']} specs ({repo} {version})")
            wanted = str(spec.get("python", "3.11"))
            translated = specs.translate(spec, repo, mirror, commit, version=version)
            self._retry[iid] = (spec, mirror, specs.nearest_python(wanted)[1:2])
            return translated.environment, {"from": source, **translated.provenance}
        if mirror is None:
            raise TaskError(specs.unknown_spec_reason(repo, version))
        env = detect_environment(GitTree(mirror, str(instance["base_commit"])))
        return ({"python": env.python, "setup": list(env.setup), "test_cmd": env.test_cmd},
                {"from": "detected from the repository's files",
                 "why": specs.unknown_spec_reason(repo, version)})

    def _language_environment(self, instance: dict[str, Any], repo: str, version: str,
                              mirror: Path | None, commit: str
                              ) -> tuple[dict[str, Any], dict[str, Any]]:
        """A SWE-bench Multilingual instance (JavaScript, Go, Rust, Java): its spec from
        swebench 4.1 translated (``specs_langs``), or refused with the reason."""
        spec = specs_langs.language_spec(repo, version)
        if spec is None:
            raise specs.SpecError(specs_langs.unknown_version_reason(repo, version))
        translated = specs_langs.translate(spec, repo, version,
                                           str(instance.get("test_patch", "")), mirror, commit)
        source = f"swebench {specs.published()['swebench']} specs ({repo} {version})"
        return translated.environment, {"from": source, **translated.provenance}

    def _image_environment(self, instance: dict[str, Any], repo: str, version: str,
                           image: str) -> tuple[dict[str, Any], dict[str, Any]]:
        if instance["flavor"] == "swebench5":
            translated = specs.from_eval_script({**instance, "image": image})
            return translated.environment, {"from": f"image {image}", **translated.provenance}
        config = instance.get("install_config")
        spec = (dict(config) if isinstance(config, dict) else None) or specs.harness_spec(
            repo, version) or {}
        env: dict[str, Any] = {"image": image, "test_cmd": str(spec.get("test_cmd") or
                                                               "pytest -rA")}
        return env, {"from": f"image {image}"}

    # --- validation -----------------------------------------------------------------------------

    def check(self, task: Task) -> tuple[Task | None, str]:
        if not self.options.validate:
            return task, "not validated (--no-validate)"
        leak = self.guard(task)
        if leak is not None:
            return None, leak
        if not task.FAIL_TO_PASS:  # R2E-Gym and hand-made rows: measure the lists first
            derived, reason = derive_lists(task, runs=self.common.runs)
            if derived is None:
                return None, reason
            task = derived
        result = validate_task(task, runs=self.common.runs)
        task, result = with_longer_limit(task, result, HARNESS_TIMEOUT, runs=self.common.runs)
        if not result.ok and result.reason.startswith("setup fails"):
            task, result = self._other_python(task, result)
            result = replace(result, reason=setup_reason(task, result.reason))
        task, result = without_flaky(task, result, runs=self.common.runs)
        if not result.ok and "gold does not resolve" in result.reason:
            task, result = self._without_network_tests(task, result)
        task, result = self._dated(task, result)
        task, result = relaxations(task, result, runs=self.common.runs)
        return (task if result.ok else None), result.reason

    def _other_python(self, task: Task, result: Any) -> tuple[Task, Any]:
        """A spec whose Python has no base image: the next nearest one, once."""
        spec, mirror, others = self._retry.get(task.instance_id, ({}, None, []))
        requested = (task.extra.get("environment_source") or {}).get("python_requested")
        if not others or requested == task.environment.python:
            return task, result
        retried = self._translated(task, spec, mirror, python=others[0])
        again = validate_task(retried, runs=self.common.runs)
        return (retried, again) if again.ok else (task, result)

    def _dated(self, task: Task, result: Any) -> tuple[Task, Any]:
        """Gold failing: the project installed with what it pulls in as of its environment
        commit's date (``build_backend.dated``), validated again, and kept so when gold then
        resolves (sphinx-doc__sphinx-8474: docutils 0.21 against Sphinx 3.5's tests)."""
        spec, mirror, _ = self._retry.get(task.instance_id, ({}, None, []))
        if (result.ok or "gold does not resolve" not in result.reason or mirror is None
                or not spec.get("install")):
            return task, result
        commit = str(task.extra.get("environment_setup_commit") or task.base_commit)
        when = specs.commit_date(mirror, commit)
        retried = self._translated(task, spec, mirror, python=task.environment.python,
                                   install_as_of=when)
        again = validate_task(retried, runs=self.common.runs)
        if not again.ok:
            return task, result
        return retried, replace(again, reason=f"ok (the project's install dated to {when}, its "
                                              "environment commit's: gold fails with today's "
                                              "packages)")

    def _translated(self, task: Task, spec: dict[str, Any], mirror: Path | None,
                    **how: Any) -> Task:
        """``task`` with its environment translated again from ``spec`` (``how``: the
        arguments of ``specs.translate``)."""
        commit = str(task.extra.get("environment_setup_commit") or task.base_commit)
        translated = specs.translate(spec, task.repo, mirror, commit, version=task.version,
                                     **how)
        env = {**task.to_dict()["environment"], **translated.environment}
        source = {**task.extra["environment_source"], **translated.provenance}
        return Task.from_dict({**task.to_dict(), "environment": env,
                               "environment_source": source})

    def _without_network_tests(self, task: Task, result: Any) -> tuple[Task, Any]:
        try:
            image = ensure_image(task, progress=lambda _m: None).tag
            gold = Grader(GraderConfig(cleanup_async=False)).grade(task, task.patch, image)
            failing = [t for t, s in {**gold.fail_to_pass, **gold.pass_to_pass}.items()
                       if s not in ("PASSED", "XFAIL")]
            offline = network_failures(task, image, failing)
        except RepogymError as exc:
            said = explain_certificate(str(exc)) or str(exc).splitlines()[0][:200]
            return task, replace(result, reason=f"{result.reason}; the check for tests that "
                                 f"need the network failed: {said}")
        if not offline or set(offline) != set(failing):
            return task, result  # a failure the network does not explain: a real rejection
        f2p = tuple(t for t in task.FAIL_TO_PASS if t not in offline)
        if not f2p:
            return task, replace(result, reason=(
                f"every FAIL_TO_PASS test needs the network ({len(offline)} dropped: "
                f"{next(iter(offline.values()))})"))
        dropped = {**(task.extra.get("dropped_tests") or {}), **offline}
        reduced = Task.from_dict({**task.to_dict(), "FAIL_TO_PASS": list(f2p),
                                  "PASS_TO_PASS": [t for t in task.PASS_TO_PASS
                                                   if t not in offline],
                                  "dropped_tests": dropped})
        return reduced, validate_task(reduced, runs=self.common.runs)


def setup_reason(task: Task, reason: str) -> str:
    """A setup failure in an environment built with another Python than the spec's (it has no
    base image here) says so: the instance fails outside what repogym can build, and a base
    image of that Python is what would tell (astropy__astropy-6938 asks for 3.6)."""
    requested = (task.extra.get("environment_source") or {}).get("python_requested")
    if (not reason.startswith("setup fails") or not requested
            or str(requested) == task.environment.python):
        return reason
    detail = reason.split(":", 1)[1].strip() if ":" in reason else reason
    return (f"setup fails without the spec's Python ({requested} requested, no base image "
            f"for it; built with {task.environment.python}): {detail}")
