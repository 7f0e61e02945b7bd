"""Whether a task's test run is pytest's, and what its command line gives pytest.

A run gets the harness's pytest treatment (its options, the JUnit file, canaries, the exit
status check) when both hold:

- its log parser reads pytest's report: swebench names parsers per repository
  (``parse_log_flask``, ``parse_log_requests``, ``parse_log_astropy``...), most of them the
  pytest parser under another name or a wrapper of it. So the parser is asked, not its name:
  it is given a few lines of pytest's ``-rA`` summary and must return those tests with their
  statuses.
- its test command runs pytest: ``pytest``, ``py.test``, ``python -m pytest`` (also after
  wrappers such as ``env VAR=1`` or ``timeout 600``, in the last command of a ``&&``/``;``
  chain that runs it), or ``tox ... --``, whose words after ``--`` reach the test runner
  that the parser says is pytest.
"""

from __future__ import annotations

import functools
import re
import shlex

from repogym.envs.grading.results import parser_for
from repogym.envs.grading.stage import deleted_paths, header_paths
from repogym.schema import Environment, Task

_SAMPLE = {
    "tests/test_rg_probe.py::test_passes": "PASSED",
    "tests/test_rg_probe.py::TestGroup::test_fails": "FAILED",
    "tests/test_rg_probe.py::test_skipped[a-1]": "SKIPPED",
}
_SAMPLE_LOG = (
    "============================= test session starts ==============================\n"
    "collected 3 items\n\n"
    "tests/test_rg_probe.py .Fs                                               [100%]\n\n"
    "=========================== short test summary info ============================\n"
    "PASSED tests/test_rg_probe.py::test_passes\n"
    "SKIPPED tests/test_rg_probe.py::test_skipped[a-1]\n"
    "FAILED tests/test_rg_probe.py::TestGroup::test_fails - assert 1 == 2\n"
    "==================== 1 failed, 1 passed, 1 skipped in 0.01s ====================\n"
)
_PYTEST_PROGRAMS = {"pytest", "py.test", "pytest-3"}
_SEPARATORS = {"&&", "||", ";", "|"}


@functools.cache
def reads_pytest_output(log_parser: str) -> bool:
    """Whether ``log_parser`` (a swebench parser name) reads pytest's ``-rA`` summary."""
    try:
        found = parser_for(log_parser)(_SAMPLE_LOG, None)
    except Exception:  # a parser for another format may choke on this text: not pytest's
        return False
    # a pass and a failure must come out as such; a parser may leave skips out (seaborn's)
    return all(found.get(test) == status or (status == "SKIPPED" and test not in found)
               for test, status in _SAMPLE.items())


def pytest_args(test_cmd: str) -> list[str] | None:
    """The words the test command gives pytest, or None when it does not run pytest."""
    try:
        words = shlex.split(test_cmd)
    except ValueError:
        return None
    segments: list[list[str]] = [[]]
    for word in words:
        if word in _SEPARATORS:
            segments.append([])
        else:
            segments[-1].append(word)
    for segment in reversed(segments):  # the last command that runs pytest runs the tests
        args = _segment_args(segment)
        if args is not None:
            return args
    return None


def _segment_args(words: list[str]) -> list[str] | None:
    # the program may come after wrappers (env VAR=1, timeout 600, coverage run -m ...)
    for i, word in enumerate(words):
        if word.rsplit("/", 1)[-1] in _PYTEST_PROGRAMS:
            return words[i + 1 :]
        if word == "-m" and words[i + 1 : i + 2] == ["pytest"]:
            return words[i + 2 :]
    if words and words[0].rsplit("/", 1)[-1] == "tox" and "--" in words:
        return words[words.index("--") + 1 :]
    return None


TOX_WORKDIR = "/tmp/repogym-tox"
_TOX_WORD = re.compile(r"(?<![\w./-])((?:[\w./-]*/)?tox)(?=\s)")


def state_outside(test_cmd: str) -> str:
    """The test command with the runner's own state kept out of the repository.

    A grading run may not make folders in /testbed (a new ``conftest.py`` there would change
    the run), and tox makes its work folder (``.tox``) in the repository's root: it gets
    ``--workdir`` in /tmp (sphinx-doc__sphinx-8506: ``PermissionError: '/testbed/.tox'``,
    every test missing). SWE-bench runs the same command as root in a writable /testbed.

    With ``--current-env`` (tox-current-env), tox runs the tests with links to the running
    interpreter in ``WORKDIR/ENV/bin``; in repogym's images that interpreter is a virtual
    environment's, and a link to it outside the environment starts Python without it (no
    pytest, no project: SWE-bench's conda environments have no such trouble). So each named
    environment's folder is made first as a view of the image's virtual environment (its
    ``pyvenv.cfg``, its ``lib``), which the links then start in."""
    if not _TOX_WORD.search(test_cmd) or "--workdir" in test_cmd:
        return test_cmd
    command = _TOX_WORD.sub(rf"\1 --workdir {TOX_WORKDIR}", test_cmd, count=1)
    names = tox_envs(test_cmd) if "--current-env" in test_cmd else []
    if not names:
        return command
    folders = " ".join(shlex.quote(f"{TOX_WORKDIR}/{name}") for name in names)
    view = (f'if [ -f "${{VIRTUAL_ENV:-}}/pyvenv.cfg" ]; then for __rg_env in {folders}; do '
            'mkdir -p "$__rg_env/bin" && cp "$VIRTUAL_ENV/pyvenv.cfg" "$__rg_env/" && '
            'ln -sfn "$VIRTUAL_ENV/lib" "$__rg_env/lib"; done; fi; ')
    return view + command


def runs_tox(test_cmd: str) -> bool:
    """Whether the test command runs tox (which reads all of ``tox.ini``)."""
    return bool(_TOX_WORD.search(test_cmd + " "))


def tox_envs(test_cmd: str) -> list[str]:
    """The environments a tox command names with ``-e``/``--env`` (before its ``--``)."""
    try:
        words = shlex.split(test_cmd)
    except ValueError:
        return []
    words = words[:words.index("--")] if "--" in words else words
    names: list[str] = []
    for i, word in enumerate(words):
        value = None
        if word in ("-e", "--env") and i + 1 < len(words):
            value = words[i + 1]
        elif word.startswith("--env="):
            value = word.split("=", 1)[1]
        elif word.startswith("-e") and len(word) > 2 and not word.startswith("--"):
            value = word[2:]
        if value:
            names += [n for n in value.split(",") if re.fullmatch(r"[\w.-]+", n)]
    return names


def runs_pytest(env: Environment) -> bool:
    """Whether grading gives this environment's runs the pytest treatment."""
    return reads_pytest_output(env.log_parser) and pytest_args(env.test_cmd) is not None


def plain_ids(ids: tuple[str, ...] | list[str]) -> bool:
    """Node ids pytest can be given on a command line as they are."""
    return bool(ids) and all("::" in i and not any(c.isspace() for c in i) for i in ids)


# a longer selection goes by file: a command line has its limits
MAX_IDS_CHARS = 64 * 1024


def failing_ids(task: Task) -> list[str]:
    """The FAIL_TO_PASS ids a run of the failing tests alone can name on pytest's command line
    (instead of their files, whose other tests would run too): all of them where the task's
    tests run under pytest and every id is plain, else none."""
    ids = list(task.FAIL_TO_PASS)
    usable = (runs_pytest(task.environment) and plain_ids(ids)
              and sum(len(i) + 1 for i in ids) <= MAX_IDS_CHARS)
    return ids if usable else []


# what a test patch changes that is data its tests read, not a test file to name (as swebench's
# harness leaves these out of a run's test directives)
DATA_FILES = (".json", ".png", ".csv", ".txt", ".md", ".jpg", ".jpeg", ".pkl", ".yml", ".yaml",
              ".toml")


def test_files(task: Task) -> list[str]:
    """The test files a grading run names on the test command's line; none (the whole suite)
    when a test patch changes only data its tests read (jmespath's history: compliance cases
    in ``tests/compliance/*.json``, read by ``tests/test_compliance.py``; named, the JSON file
    alone was given to pytest, which collected nothing)."""
    env = task.environment
    gone = deleted_paths(task.test_patch)  # blinker's history: a test module the fix removes
    files = list(env.test_files) or [f for f in header_paths(task.test_patch) if f not in gone]
    if runs_pytest(env):
        for test_id in (*task.FAIL_TO_PASS, *task.PASS_TO_PASS):
            files.append(test_id.split("::")[0])
        files = [f for f in files if f.endswith(".py")] or [
            f for f in files if not f.lower().endswith(DATA_FILES)]
    return sorted(dict.fromkeys(files))
