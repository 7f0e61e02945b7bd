"""Hostile actions through the environment's tools, against a real engine.

After each one the environment must still answer (the next step works within its timeout),
nothing may raise, and the host must be unharmed: bounded memory in this process, no growth of
the container's writable layer on the host's disk, no process left behind.
"""

from __future__ import annotations

import json
import resource
import time
from collections.abc import Iterator
from typing import Any

import gymnasium as gym
import pytest

import repogym  # noqa: F401 - registers the env
from repogym.sandbox.client import docker_client

pytestmark = pytest.mark.docker

TASK = "demo__minicalc-1"
TIMEOUT = 5.0  # the bash tool's time limit in these tests
SLACK = 4.0  # what a step may take beyond it (the harness's own commands, a busy machine)


@pytest.fixture(scope="module")
def env() -> Iterator[Any]:
    made = gym.make("repogym/SWE-v0", suite="demo", split="eval", bash_timeout=TIMEOUT,
                    max_steps=200, pool_size=1)
    yield made
    made.close()


@pytest.fixture()
def fresh(env: Any) -> Any:
    env.reset(seed=0, options={"task_id": TASK})
    return env


def step(env: Any, action: Any, limit: float = TIMEOUT + SLACK) -> tuple[str, dict[str, Any]]:
    """One step that must not raise, must answer in time and must not end the episode."""
    start = time.monotonic()
    obs, reward, terminated, truncated, info = env.step(action)
    took = time.monotonic() - start
    assert isinstance(obs, str) and reward == 0.0 and not terminated and not truncated
    assert took < limit, f"the step took {took:.1f} s"
    return obs, info


def assert_answers(env: Any) -> None:
    obs, info = step(env, {"tool": "bash", "command": "echo alive; pwd"}, limit=SLACK)
    assert obs == "alive\n/testbed\n", obs


def agent_processes(env: Any) -> list[str]:
    box = env.unwrapped.sandbox
    result = box.exec(["ps", "-u", "repogym", "-o", "pid=,args="], user="root")
    return [line.strip() for line in result.output.splitlines() if line.strip()]


def writable_layer_bytes(env: Any) -> int:
    """What the container's own layer holds on the host's disk."""
    box = env.unwrapped.sandbox
    rows = docker_client().api.containers(all=True, size=True, filters={"id": box.container.id})
    return int(rows[0].get("SizeRw") or 0)


# --- processes --------------------------------------------------------------------------------


def test_fork_bomb(fresh: Any) -> None:
    step(fresh, {"tool": "bash", "command": ":(){ :|:& };:"})
    assert_answers(fresh)
    assert len(agent_processes(fresh)) <= 2  # the shell and its timer


def test_fork_bomb_that_fills_the_process_table(fresh: Any) -> None:
    bomb = "import os\nwhile True:\n    try: os.fork()\n    except OSError: pass"
    obs, info = step(fresh, {"tool": "bash", "command": f"python3 -c '{bomb}'"})
    assert info["timed_out"], obs
    assert_answers(fresh)
    assert len(agent_processes(fresh)) <= 2


def test_fork_bomb_that_leaves_the_process_group(fresh: Any) -> None:
    step(fresh, {"tool": "bash", "command": "setsid bash -c ':(){ :|:& };:' & sleep 1; echo x"})
    assert_answers(fresh)
    assert len(agent_processes(fresh)) <= 2


def test_kill_every_process(fresh: Any) -> None:
    obs, _ = step(fresh, {"tool": "bash", "command": "kill -9 -1"})
    assert "new shell" in obs
    assert_answers(fresh)


def test_sleep_infinity(fresh: Any) -> None:
    start = time.monotonic()
    obs, info = step(fresh, {"tool": "bash", "command": "sleep infinity"})
    assert info["timed_out"] and "timed out" in obs
    assert time.monotonic() - start >= TIMEOUT - 0.5
    assert_answers(fresh)


def test_background_processes_end_with_their_command(fresh: Any) -> None:
    command = ("sleep 1001 & setsid sleep 1002 & nohup sleep 1003 >/dev/null 2>&1 & "
               "(set -m; sleep 1004 &); setsid bash -c 'while :; do echo spam; sleep 0.05; done' "
               "& echo started")
    obs, _ = step(fresh, {"tool": "bash", "command": command}, limit=3)
    assert "started" in obs
    time.sleep(0.5)
    assert_answers(fresh)  # exactly its own output: nothing left writes into the shell
    left = [p for p in agent_processes(fresh) if "sleep 10" in p or "spam" in p]
    assert left == []


# --- output -----------------------------------------------------------------------------------


def test_a_gigabyte_of_output(fresh: Any) -> None:
    before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    obs, _ = step(fresh, {"tool": "bash", "command": "yes | head -c 1000000000"})
    grown_mb = (resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - before) / 1024
    assert "bytes of output cut" in obs and len(obs) < 40_000
    assert grown_mb < 64, f"this process grew by {grown_mb:.0f} MB"
    assert_answers(fresh)


def test_binary_output(fresh: Any) -> None:
    obs, _ = step(fresh, {"tool": "bash", "command":
                          "head -c 1000000 /dev/urandom; printf '\\000\\033[2J\\377\\376'"})
    obs.encode("utf-8")  # valid text: no lone surrogates
    json.dumps(obs)
    assert_answers(fresh)


def test_viewing_a_huge_file(fresh: Any) -> None:
    step(fresh, {"tool": "bash", "command": "head -c 100000000 /dev/zero | tr '\\0' a > big; "
                 "python3 -c \"open('line', 'w').write('b' * 5000000)\""}, limit=30)
    obs, info = step(fresh, {"tool": "view", "path": "big"})
    assert info["action_error"] and "bash" in obs
    obs, info = step(fresh, {"tool": "view", "path": "line"})
    assert info["action_error"] is None and len(obs) < 40_000
    obs, _ = step(fresh, {"tool": "bash", "command": "cat big"})
    assert len(obs) < 40_000
    assert_answers(fresh)


# --- resources --------------------------------------------------------------------------------


def test_allocating_all_memory(fresh: Any) -> None:
    fresh.unwrapped.toolbox.bash_timeout = 60  # a busy machine fills 2 GB slowly
    hog = "x = []\nwhile True: x.append(b'x' * (256 << 20))"
    obs, info = step(fresh, {"tool": "bash", "command": f"python3 -c \"{hog}\""}, limit=60)
    assert info["exit_code"] == 137 and "Killed" in obs, obs  # the kernel's OOM kill, inside
    assert_answers(fresh)
    assert fresh.unwrapped.sandbox.alive()


@pytest.mark.parametrize("folder", ["/testbed", "/tmp", "~", "/var/tmp", "/dev/shm"])
def test_filling_the_disk(fresh: Any, folder: str) -> None:
    before = writable_layer_bytes(fresh)
    obs, _ = step(fresh, {"tool": "bash", "command":
                          f"head -c 4000000000 /dev/zero > {folder}/fill; echo rc=$?"}, limit=30)
    assert "No space left on device" in obs and "rc=1" in obs, obs
    assert writable_layer_bytes(fresh) - before < 1 << 20
    step(fresh, {"tool": "bash", "command": f"rm -f {folder}/fill"})
    assert_answers(fresh)


def test_the_root_is_read_only(fresh: Any) -> None:
    obs, _ = step(fresh, {"tool": "bash", "command": "for d in / /usr /etc /opt /var /home; do "
                          "touch $d/x 2>&1; done | grep -c 'Read-only file system'"})
    assert obs.strip() == "6"


def test_rm_rf_root_then_submit_and_recover(fresh: Any) -> None:
    obs, _ = step(fresh, {"tool": "bash", "command": "rm -rf / --no-preserve-root 2>&1 | tail -3"},
                  limit=60)
    assert "Read-only file system" in obs or "Permission denied" in obs
    assert_answers(fresh)
    obs, reward, terminated, truncated, info = fresh.step({"tool": "submit"})
    assert terminated and reward == 0.0 and "diff_failed" in info["flags"]
    fresh.reset(seed=0, options={"task_id": TASK})
    obs, _ = step(fresh, {"tool": "bash", "command": "git status --short | wc -l; ls"})
    assert obs.startswith("0\n") and "minicalc" in obs


# --- names and actions ------------------------------------------------------------------------


def test_file_names_that_are_not_utf8(fresh: Any) -> None:
    obs, _ = step(fresh, {"tool": "bash", "command":
                          "printf 'x = 1\\n' > $'caf\\xe9.py'; touch $'bad\\xff\\xfe.txt'; ls"})
    assert "caf" in obs
    obs, info = step(fresh, {"tool": "view", "path": "."})
    assert info["action_error"] is None
    obs, info = step(fresh, {"tool": "str_replace", "path": "caf\udce9.py", "old_str": "x = 1",
                             "new_str": "x = 2"})
    assert info["action_error"] is None, obs
    step(fresh, {"tool": "create", "path": "new\udcff.py", "file_text": "y = 3\n"})
    obs, reward, terminated, truncated, info = fresh.step({"tool": "submit"})
    assert terminated and "diff_failed" not in info["flags"]
    assert '"b/caf\\351.py"' in info["patch"] and '"b/new\\377.py"' in info["patch"]


MALFORMED = [
    '{"tool": "bash", "command": ',
    '{"tool": "bash", "command": "ls"',
    '<tool_call>{"name": "bash", "arguments": {"command": "ls"}</tool_call>',
    "<tool_call>[1, 2]</tool_call>",
    '{"name": "bash", "arguments": "{not json"}',
    "[" * 100_000,
    "",
]

WRONG_TYPES = [
    {"tool": "bash", "command": 123},
    {"tool": "bash", "command": None},
    {"tool": "bash", "command": ["ls"]},
    {"tool": "view", "path": ["a"]},
    {"tool": "view", "path": "README.md", "view_range": "1-2"},
    {"tool": "view", "path": "README.md", "view_range": [1, "x"]},
    {"tool": "insert", "path": "README.md", "insert_line": "abc", "new_str": 5},
    {"tool": "str_replace", "path": {"a": 1}, "old_str": 1, "new_str": [1]},
    {"tool": "create", "path": "x.py", "file_text": {"a": 1}},
    {"tool": {"x": 1}},
    {"tool": "bash", "command": "ls", "extra": object()},
    {"name": "bash", "arguments": [1]},
    None, 42, 3.5, ["bash"], b"\xff\xfe", object(),
]


def test_malformed_and_mistyped_actions(fresh: Any) -> None:
    for action in MALFORMED + WRONG_TYPES:
        obs, info = step(fresh, action, limit=SLACK)
        assert info["action_error"] and obs, repr(action)[:80]
    assert_answers(fresh)


def test_a_megabyte_action(fresh: Any) -> None:
    obs, info = step(fresh, {"tool": "bash", "command": "echo " + "a" * 999_000 + " | wc -c"},
                     limit=30)
    assert obs.strip() == "999001", obs[:200]
    obs, info = step(fresh, "x" * 1_000_001, limit=SLACK)
    assert info["action_error"] and "over the limit" in obs
    assert_answers(fresh)
