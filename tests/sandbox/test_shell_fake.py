"""The shell protocol over a local bash (fast; says nothing about isolation)."""

from __future__ import annotations

import time
from pathlib import Path

import pytest

from repogym.sandbox.base import SandboxConfig
from repogym.sandbox.fake import FakeSandbox


@pytest.fixture()
def fake(tmp_path: Path):
    (tmp_path / "src").mkdir()
    (tmp_path / "src" / "a.txt").write_text("hello\n")
    box = FakeSandbox(SandboxConfig(image="none", output_limit=4000), source=tmp_path / "src")
    yield box
    box.close()


def test_state_persists_between_calls(fake: FakeSandbox) -> None:
    assert fake.run("cd /tmp && export GREETING=hi").exit_code == 0
    result = fake.run("pwd; echo $GREETING")
    assert result.output == "/tmp\nhi\n"


def test_a_command_sees_a_plain_shell(fake: FakeSandbox) -> None:
    # commands run through a function of the harness: none of its arguments leak in
    assert fake.run('echo "[$1][$#]"').output == "[][0]\n"
    assert fake.run("export -n NOTHING; unset __rg_cmd; declare -x ONE=1").exit_code == 0
    assert fake.run("echo $ONE; true").output == "1\n"


def test_state_changes_persist_however_they_are_written(fake: FakeSandbox) -> None:
    fake.run("export FOO=1")
    for command in ["FOO=2", "c''d /tmp", "{cd,} /", "set -a; BAR=3", "cd\t/usr"]:
        fake.run(command)
    assert fake.run("echo $FOO $BAR; pwd").output == "2 3\n/usr\n"
    assert fake.run("ls >/dev/null; true").exit_code == 0
    assert fake.run("pwd").output == "/usr\n"  # commands that run programs only keep it too


def test_only_commands_that_may_change_state_save_it() -> None:
    from repogym.sandbox.shell import may_change_state

    for quick in ["true", "ls -la src", "python -m pytest tests/test_a.py -x", "git status"]:
        assert not may_change_state(quick), quick
    for saving in ["cd x", "A=1", "export A", ". venv/bin/activate", "echo $X", "{cd,} /",
                   "c? /", "c''d /", "c\\d /", "ls;cd x", "(cd x)", "source x", "set -a"]:
        assert may_change_state(saving), saving


def test_one_program_commands_are_told_apart() -> None:
    from repogym.sandbox.shell import runs_one_program

    for one in ["ls", "ls -la /tmp", "python -m pytest tests/x.py -q", "git diff HEAD~1",
                "cat a.txt "]:
        assert runs_one_program(one), one
    for other in ["true", "cd /tmp", "echo hi", "ls; rm x", "ls > f", "ls *", "FOO=1 ls",
                  "./run.sh", "cat a\nb", "ls | wc", "ls &", "time ls", "exec ls", "if"]:
        assert not runs_one_program(other), other


def test_a_program_that_replaces_its_subshell_behaves_like_any_command(fake: FakeSandbox) -> None:
    assert fake.run("ls").output == "a.txt\n"
    assert fake.run("ls -d nothing-here").exit_code == 2
    missing = fake.run("no-such-program-x --flag")
    assert missing.exit_code == 127 and "command not found" in missing.output
    start = time.monotonic()
    assert fake.run("sleep 1000", timeout=1).timed_out
    # cut short, not waited out (a machine under load takes seconds more)
    assert time.monotonic() - start < 60
    shell = fake.run("echo $$").output.strip()
    assert "ps" in fake.run(f"ps -o comm --ppid {shell}").output.split()  # no subshell between


def test_a_timeout_after_the_timer_was_killed(fake: FakeSandbox) -> None:
    # the shell starts a new timer before the next command
    timer, *children = fake.run("echo $__rg_tpid; ps -o pid --no-headers --ppid $$").output.split()
    assert timer in children
    fake.run(f"kill -9 {timer}")
    start = time.monotonic()
    assert fake.run("sleep 1000", timeout=1).timed_out
    # cut short, not waited out (a machine under load takes seconds more)
    assert time.monotonic() - start < 60


def test_a_late_timer_signal_stops_nothing(fake: FakeSandbox) -> None:
    # a signal that reaches the shell before the running command's deadline is ignored
    result = fake.run("kill -USR1 $$; sleep 0.3; echo survived", timeout=30)
    assert result.output == "survived\n" and not result.timed_out


def test_exit_codes_and_merged_output(fake: FakeSandbox) -> None:
    result = fake.run("echo out; echo err >&2; exit 3")
    assert result.exit_code == 3
    assert result.output == "out\nerr\n"
    assert fake.run("true").exit_code == 0  # `exit` ended the command, not the shell


def test_timeout_kills_the_command_and_keeps_the_shell(fake: FakeSandbox) -> None:
    fake.run("cd /tmp")
    start = time.monotonic()
    result = fake.run("sleep 1000", timeout=1)
    assert result.timed_out and time.monotonic() - start < 3
    assert fake.run("pwd").output == "/tmp\n"


def test_builtin_busy_loop_times_out(fake: FakeSandbox) -> None:
    result = fake.run("while :; do :; done", timeout=1)
    assert result.timed_out
    assert fake.run("echo alive").output == "alive\n"


def test_large_output_keeps_head_and_tail(fake: FakeSandbox) -> None:
    result = fake.run("seq 1 200000")
    assert result.truncated and result.n_bytes > 1_000_000
    assert result.output.startswith("1\n2\n") and result.output.endswith("199999\n200000\n")
    assert "bytes of output cut" in result.output


def test_output_without_trailing_newline_and_binary(fake: FakeSandbox) -> None:
    assert fake.run("printf abc").output == "abc"
    assert "\ufffd" in fake.run("printf '\\xff\\xfe'").output


def test_dead_shell_is_replaced(fake: FakeSandbox) -> None:
    fake.run("cd /tmp")
    died = fake.run("kill -9 $$")
    assert died.shell_restarted and "new shell" in died.output
    assert fake.run("pwd").output == "/tmp\n"


def test_background_processes_do_not_block(fake: FakeSandbox) -> None:
    start = time.monotonic()
    assert fake.run("sleep 100 & echo started").output == "started\n"
    # cut short, not waited out (a machine under load takes seconds more)
    assert time.monotonic() - start < 30


def test_diff_includes_untracked_files(fake: FakeSandbox) -> None:
    base = fake.run("git init -q && git add -A && git -c user.email=a@b -c user.name=a "
                    "commit -qm base && git rev-parse HEAD").output.strip().splitlines()[-1]
    fake.write_file("new.txt", b"new\xff\n")
    fake.run("echo more >> a.txt")
    diff = fake.diff(base)
    assert "+more" in diff and "new.txt" in diff
    assert "new\udcff" in diff  # bytes that are not UTF-8 survive


def test_close_twice(fake: FakeSandbox) -> None:
    fake.close()
    fake.close()
    assert not fake.alive()
