"""The task format: a superset of a SWE-bench instance (see the manual's docs/tasks.md)."""

from __future__ import annotations

import hashlib
import json
from dataclasses import asdict, dataclass, field, fields, replace
from pathlib import Path
from typing import Any, TypedDict

from repogym.errors import TaskError

KINDS = ("swe", "replication", "synthetic")
SPLITS = ("train", "eval", "adversarial")


class Reference(TypedDict, total=False):
    """A replication or synthetic task's removed code (``Task.reference``): what the similarity
    reward compares the agent's code with, and the cases recorded on it for differential
    testing. It stays on the host: nothing of it reaches the agent. A dict, as tasks files
    hold it."""

    file: str  # the file the code was removed from
    qualname: str  # the function or class, "" for a module
    granularity: str  # function, class or module
    occurrence: int  # which definition of that name, when the file has several
    source: str  # the removed code
    cases: dict[str, Any]  # inputs and the reference's outcomes (tasks/sources/trace.py)


@dataclass(frozen=True)
class Environment:
    """How a task's image is built and how its tests run."""

    python: str = "3.11"
    image: str | None = None
    # a toolchain other than Python's (``repogym.images.toolchains``): javascript, typescript,
    # go, rust or java. Its base image has the toolchain; ``runner`` names the harness's test
    # runner for it (``repogym.envs.grading.runners``), chosen from ``language`` when empty.
    language: str = "python"
    runner: str = ""
    setup: tuple[str, ...] = ()
    # A shared environment image (``repogym.images.env_image``): ``env_setup`` runs once for
    # every task with the same Python, ``env_setup`` and ``env_commit`` (the dependencies:
    # ``pip install -r ...``), and with ``env_commit`` the task's ``setup`` runs there too, in
    # a checkout of the repository at that commit that is removed afterwards, so what the
    # project's own install pulls in is shared as well. ``setup`` then runs in the task's
    # checkout, a thin layer on top. Both empty: one image per task, as before.
    env_setup: tuple[str, ...] = ()
    env_commit: str | None = None
    # the Python base with a C compiler and the Python headers (``repogym.images.build_tools``),
    # for projects that compile extensions
    build_tools: bool = False
    test_cmd: str = "python -m pytest -rA"
    log_parser: str = "pytest"
    test_files: tuple[str, ...] = ()
    timeout: float = 300.0
    # pytest's assertion pass hook, which lets the equality check see what passing assertions
    # compared. Set off only by validation (trusted), for a task whose gold fails with it on:
    # the hook keeps values alive longer (a test that a freed object is gone fails) and
    # pytest's own tests of the hook see it set.
    assertion_pass_hook: bool = True
    # the tests write into the repository (a file beside themselves, a folder at its root):
    # grading opens the repository's root and the test modules' folders to them as /tmp is
    # open (sticky: only a file's owner removes it), the names pytest and Python read on their
    # own kept root's. Set only by validation (trusted), for a task whose gold fails with the
    # folders closed and resolves with them open.
    tests_write: bool = False
    # the hidden tests run under other names and a decoy run follows (``envs/grading/blind.py``).
    # Set off only by validation (trusted), for a task whose tests read their own module's name
    # (sphinx-doc__sphinx-8627's expect ``tests.test_util_typing.MyClass1``): gold fails
    # disguised and resolves as itself. The canaries stay.
    disguise: bool = True

    def __post_init__(self) -> None:
        if self.python not in PYTHON_SUITES and self.image is None:
            raise TaskError(
                f"environment.python={self.python!r} has no base image recipe; use one of "
                f"{sorted(PYTHON_SUITES)} or set environment.image."
            )
        if self.language not in LANGUAGES:
            raise TaskError(f"environment.language={self.language!r}; use one of {LANGUAGES}.")
        if self.timeout <= 0:
            raise TaskError(f"environment.timeout={self.timeout} must be positive.")
        if (self.env_setup or self.env_commit) and (self.image or self.language != "python"):
            raise TaskError("environment.env_setup and env_commit build a shared Python "
                            "environment image: drop them, or drop environment.image and "
                            "use language python.")

    @classmethod
    def from_dict(cls, data: dict[str, Any] | None) -> Environment:
        data = dict(data or {})
        unknown = set(data) - {f.name for f in fields(cls)}
        if unknown:
            raise TaskError(
                f"unknown environment fields {sorted(unknown)}; "
                f"valid: {[f.name for f in fields(cls)]}"
            )
        for key in ("setup", "test_files", "env_setup"):
            if isinstance(data.get(key), str):
                data[key] = (data[key],)
            if key in data:
                data[key] = tuple(data[key])
        if "python" in data:
            data["python"] = str(data["python"])
        for flag, default in (("assertion_pass_hook", True), ("build_tools", False),
                              ("tests_write", False), ("disguise", True)):
            if not isinstance(data.get(flag, default), bool):
                raise TaskError(f"environment.{flag} must be true or false.")
        return cls(**data)


LANGUAGES = ("python", "javascript", "typescript", "go", "rust", "java")

# Debian suite that ships each Python, for the locally built base images.
PYTHON_SUITES = {"3.9": "bullseye", "3.11": "bookworm", "3.13": "trixie"}


@dataclass(frozen=True)
class Task:
    """One episode's task. SWE-bench instances load as they are."""

    instance_id: str
    repo: str
    base_commit: str
    problem_statement: str
    patch: str = ""
    test_patch: str = ""
    FAIL_TO_PASS: tuple[str, ...] = ()
    PASS_TO_PASS: tuple[str, ...] = ()
    source: str | None = None
    environment: Environment = field(default_factory=Environment)
    kind: str = "swe"
    split: str = "eval"
    version: str | None = None
    hints_text: str = ""
    created_at: str | None = None
    reference: Reference | None = None
    certificate: dict[str, Any] | None = None  # the attacks tried on it (`tasks certify`)
    extra: dict[str, Any] = field(default_factory=dict)

    def __post_init__(self) -> None:
        if not self.instance_id:
            raise TaskError("a task has no instance_id.")
        if self.kind not in KINDS:
            raise TaskError(f"task {self.instance_id}: kind={self.kind!r}; use one of {KINDS}.")
        if self.split not in SPLITS:
            raise TaskError(f"task {self.instance_id}: split={self.split!r}; use one of {SPLITS}.")

    @classmethod
    def from_dict(cls, data: dict[str, Any], base_dir: Path | None = None) -> Task:
        data = dict(data)
        missing = [
            k for k in ("instance_id", "repo", "base_commit", "problem_statement") if k not in data
        ]
        if missing:
            raise TaskError(f"task {data.get('instance_id', '?')}: missing fields {missing}.")
        for key in ("FAIL_TO_PASS", "PASS_TO_PASS"):
            value = data.get(key, [])
            if isinstance(value, str):
                value = json.loads(value) if value.strip() else []
            data[key] = tuple(value)
        data["environment"] = Environment.from_dict(data.get("environment"))
        source = data.get("source")
        if source and base_dir is not None and not Path(source).is_absolute():
            data["source"] = str((base_dir / source).resolve())
        known = {f.name for f in fields(cls)}
        extra = {k: v for k, v in data.items() if k not in known}
        data = {k: v for k, v in data.items() if k in known}
        data["extra"] = {**data.get("extra", {}), **extra}
        return cls(**data)

    def to_dict(self) -> dict[str, Any]:
        out = asdict(self)
        out["FAIL_TO_PASS"] = list(self.FAIL_TO_PASS)
        out["PASS_TO_PASS"] = list(self.PASS_TO_PASS)
        env = out["environment"]
        env["setup"] = list(self.environment.setup)
        env["test_files"] = list(self.environment.test_files)
        env["env_setup"] = list(self.environment.env_setup)
        for key, default in (("language", "python"), ("runner", ""),
                             ("assertion_pass_hook", True), ("env_setup", []),
                             ("env_commit", None), ("build_tools", False),
                             ("tests_write", False), ("disguise", True)):
            if env.get(key) == default:  # Python tasks read (and hash) as they always did
                del env[key]
        extra = out.pop("extra")
        if out["certificate"] is None:
            del out["certificate"]
        return {**extra, **out}

    @property
    def task_hash(self) -> str:
        """A content hash of everything that decides the task's grading (its certificate,
        which records this hash, does not)."""
        data = self.to_dict()
        data.pop("certificate", None)
        blob = json.dumps(data, sort_keys=True, default=str).encode()
        return hashlib.sha256(blob).hexdigest()[:16]

    def with_(self, **changes: Any) -> Task:
        return replace(self, **changes)
