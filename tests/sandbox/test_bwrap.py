"""The daemonless sandbox (bubblewrap over an exported image) against the real kernel: the
same isolation facts as the Docker sandbox's tests where they hold, and the one-id design's
own (code under test in a process namespace of its own, ended by killing it)."""

from __future__ import annotations

import os
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from repogym.sandbox.base import SandboxConfig
from repogym.sandbox.bwrap import BwrapSandbox, check_bwrap
from repogym.sandbox.trees import Tree, export_tree, find_tree, sandbox_user, store

pytestmark = [pytest.mark.docker, pytest.mark.bwrap]  # the tree is exported from Docker


@pytest.fixture(scope="module")
def tree(toy_image: str) -> Tree:
    check_bwrap()
    return export_tree(toy_image)


@pytest.fixture(scope="module")
def box(tree: Tree) -> Iterator[BwrapSandbox]:
    sandbox = BwrapSandbox(SandboxConfig(image=tree.tag, run_id="test-bwrap"), tree)
    yield sandbox
    sandbox.close()


def test_the_tree_is_the_images_and_its_users(tree: Tree, toy_image: str) -> None:
    assert find_tree(toy_image) == tree and tree.root.parent == store()
    assert dict(tree.env)["VIRTUAL_ENV"] == "/opt/venv" and tree.user == "repogym"
    # readable to the sandboxes' user, never writable by it (made as root, it is root's)
    assert tree.root.stat().st_uid == os.geteuid() and tree.root.stat().st_mode & 0o777 == 0o755
    pristine = tree.root / "opt" / "repogym-pristine"
    assert pristine.stat().st_mode & 0o005 == 0o005  # root's alone in the image


def test_the_agent_runs_unprivileged_in_the_repository(box: BwrapSandbox) -> None:
    out = box.run("id -u; pwd; ls; grep -E '^(CapEff|CapBnd|NoNewPrivs)' /proc/self/status")
    lines = out.output.splitlines()
    assert lines[0] == "1000" and lines[1] == "/testbed" and "calc" in lines
    assert "CapEff:\t0000000000000000" in lines and "CapBnd:\t0000000000000000" in lines
    assert "NoNewPrivs:\t1" in lines


def test_root_is_read_only_and_writable_paths_are_sized_tmpfs(box: BwrapSandbox) -> None:
    assert "Read-only file system" in box.run("touch /etc/x /opt/venv/x 2>&1").output
    mounts = box.run("grep -E ' /(testbed|tmp) ' /proc/mounts").output
    assert "tmpfs /testbed tmpfs" in mounts and "size=1048576k" in mounts
    full = box.run("head -c 300M /dev/zero 2>&1 >/tmp/big; rm -f /tmp/big").output
    assert "No space left on device" in full


def test_no_network_no_user_namespaces_and_the_limits(box: BwrapSandbox) -> None:
    probe = ("python3 -c \"import socket; s=socket.socket(); s.settimeout(3); "
             "s.connect(('1.1.1.1', 53))\" 2>&1 | tail -1")
    assert "unreachable" in box.run(probe).output.lower()
    assert box.run("unshare -U true 2>&1; echo $?").output.strip().endswith("1")
    assert box.run("ulimit -u; ulimit -d").output.split() == ["256", str((2 << 30) // 1024)]


def test_state_persists_and_timeouts_hold(box: BwrapSandbox) -> None:
    box.run("cd /tmp && export MARK=42")
    assert box.run("pwd; echo $MARK").output == "/tmp\n42\n"
    box.run("cd /testbed")
    start = time.monotonic()
    assert box.run("sleep 1000", timeout=2).timed_out
    # cut short, not waited out (a machine under load takes seconds more)
    assert time.monotonic() - start < 60
    assert box.run("echo next").output == "next\n"


def test_killing_everything_leaves_the_shell_and_the_files(box: BwrapSandbox) -> None:
    box.write_file("kept.txt", b"kept\n")
    box.run("kill -9 -1")  # the shell is the namespace's first process: out of reach
    assert box.run("cat kept.txt").output == "kept\n"
    box.run("rm kept.txt")


def test_a_fork_bomb_is_contained_and_ended(box: BwrapSandbox) -> None:
    box.run(":(){ :|:& };:", timeout=5)
    assert box.run("echo alive", timeout=30).output == "alive\n"


def test_files_copy_and_diff(box: BwrapSandbox, tmp_path: Path) -> None:
    box.write_file("calc/extra.py", b"X = '\xff'\n")
    assert box.read_file("calc/extra.py") == b"X = '\xff'\n"
    with pytest.raises(FileNotFoundError):
        box.read_file("nope.txt")
    (tmp_path / "folder").mkdir()
    (tmp_path / "folder" / "f.txt").write_text("in")
    box.copy_in(tmp_path / "folder", "/tmp/in")
    assert box.run("cat /tmp/in/folder/f.txt").output == "in"
    box.copy_out("/testbed/calc/extra.py", tmp_path / "out")
    assert (tmp_path / "out" / "extra.py").read_bytes() == b"X = '\xff'\n"
    diff = box.diff(box.run("git rev-parse HEAD").output.strip())
    assert "calc/extra.py" in diff and "\udcff" in diff
    box.run("rm calc/extra.py")


def test_code_under_test_gets_its_own_process_namespace(box: BwrapSandbox) -> None:
    root = box.exec(["bash", "-c", "grep CapEff /proc/self/status; ps -e | wc -l"], user="root")
    assert "CapEff:\t000001ffffffffff" in root.output  # the sandbox's root: caps in there only
    tests = box.exec(["bash", "-c", "grep CapEff /proc/self/status; ps -e -o comm="])
    assert "CapEff:\t0000000000000000" in tests.output
    # it sees its own processes only: not the agent's shell, not the sandbox's root
    assert set(tests.output.split()[2:]) <= {"timeout", "bash", "ps"}, tests.output


def test_ending_the_tests_ends_a_fork_bomb_in_them(box: BwrapSandbox) -> None:
    container = box.container
    result: list[object] = []
    bomb = threading.Thread(target=lambda: result.append(box.exec(
        ["bash", "-c", ":(){ :|:& };:; sleep 100"], timeout=120)))
    bomb.start()
    time.sleep(3)
    start = time.monotonic()
    container.end_tests()
    bomb.join(timeout=30)
    assert not bomb.is_alive() and time.monotonic() - start < 15
    assert box.exec(["echo", "after"], user="root").output == "after\n"


def test_close_ends_every_process(tree: Tree) -> None:
    sandbox = BwrapSandbox(SandboxConfig(image=tree.tag, run_id="test-bwrap"), tree)
    pid = sandbox.container.proc.pid
    sandbox.run("sleep 300 &")
    sandbox.close()
    sandbox.close()
    assert not Path(f"/proc/{pid}").exists() or _zombie(pid)
    assert not sandbox.alive()


def _zombie(pid: int) -> bool:
    try:
        return Path(f"/proc/{pid}/stat").read_text().split(") ")[1].startswith("Z")
    except OSError:
        return True


def test_as_root_the_sandboxes_run_as_the_sandbox_user(box: BwrapSandbox) -> None:
    owner = sandbox_user()
    if owner is None:
        pytest.skip("repogym runs unprivileged here: the sandboxes are the user's own")
    assert os.stat(f"/proc/{box.container.pid}").st_uid == owner.pw_uid
