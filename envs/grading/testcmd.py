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
import shlex

from repogym.envs.grading.results import parser_for
from repogym.envs.grading.stage import header_paths
from repogym.tasks.schema import Environment, Task

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


def runs_pytest(env: Environment) -> bool:
    """Whether grading gives this environment's runs the pytest treatment."""
    return reads_pytest_output(env.log_parser) and pytest_args(env.test_cmd) is not None


def test_files(task: Task) -> list[str]:
    """The test files a grading run names on the test command's line."""
    env = task.environment
    files = list(env.test_files) or header_paths(task.test_patch)
    if runs_pytest(env):
        for test_id in (*task.FAIL_TO_PASS, *task.PASS_TO_PASS):
            files.append(test_id.split("::")[0])
        files = [f for f in files if f.endswith(".py")] or files
    return sorted(dict.fromkeys(files))
