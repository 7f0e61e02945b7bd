"""The root runner against a real container: scripts, input, limits, and what the agent sees."""

from __future__ import annotations

import contextlib
import time

import pytest

from repogym.sandbox.base import SandboxConfig, SandboxLost
from repogym.sandbox.docker import DockerSandbox
from repogym.sandbox.root_runner import Runner

pytestmark = pytest.mark.docker


@pytest.fixture()
def box(toy_image: str):
    # root may signal the agent's processes, as in grading containers
    sandbox = DockerSandbox(SandboxConfig(image=toy_image, run_id="test-runner", cap_add=("KILL",)))
    yield sandbox
    sandbox.close()


@pytest.fixture()
def runner(box: DockerSandbox):
    started = Runner.start(box)
    yield started
    started.close()


def test_scripts_run_as_root_in_the_repository_one_after_another(runner: Runner) -> None:
    first = runner.run("id -u; pwd; echo err >&2; exit 3")
    assert first.output == "0\n/testbed\nerr\n" and first.exit_code == 3
    assert runner.run("printf no-newline").output == "no-newline"
    assert runner.run("true").output == ""


def test_input_reaches_the_script_whole(runner: Runner) -> None:
    data = bytes(range(256)) * 4096  # 1 MiB, every byte value
    result = runner.run("sha256sum | cut -c1-64", data=data)
    import hashlib

    assert result.output.strip() == hashlib.sha256(data).hexdigest()
    assert runner.run("cat").output == ""  # nothing of the last input is left for the next


def test_output_cannot_end_a_script_early(runner: Runner) -> None:
    forged = "printf '\\n__RG_DONE_0000000000000000 0\\n'; echo still; exit 5"
    result = runner.run(forged)
    assert result.output.endswith("still\n") and result.exit_code == 5


def test_time_limit(runner: Runner) -> None:
    start = time.monotonic()
    result = runner.run("sleep 100", timeout=1)
    assert result.timed_out and time.monotonic() - start < 5
    assert runner.run("echo next").output == "next\n"


def test_the_agent_cannot_reach_it(box: DockerSandbox, runner: Runner) -> None:
    pid = runner.run("ps -o ppid= -p $PPID").output.strip()  # the runner's bash (above timeout)
    assert runner.run(f"cat /proc/{pid}/cmdline").output.startswith("bash")
    folder = runner.run("ls -d /tmp/tmp.*").output.strip()
    seen = box.run(f"ls {folder}; cat /proc/{pid}/fd/0 </dev/null; kill -9 {pid}; "
                   f"echo x > /proc/{pid}/fd/0")
    assert seen.output.count("Permission denied") == 3, seen.output
    assert "Operation not permitted" in seen.output
    assert runner.run("echo alive").output == "alive\n"


def test_scripts_run_when_the_agent_filled_the_temporary_folder(box: DockerSandbox,
                                                                 runner: Runner) -> None:
    assert "No space left" in box.run("head -c 400M /dev/zero > /tmp/fill").output
    assert runner.run("echo still; exit 4").output == "still\n"


def test_a_lost_container_raises_and_closes_the_runner(box: DockerSandbox, runner: Runner) -> None:
    box.client.api.kill(box.container.id)
    with pytest.raises(SandboxLost):
        runner.run("true", timeout=5)
    assert runner.closed
    with pytest.raises(SandboxLost):
        runner.run("true")


def test_ending_a_user_that_took_every_process_slot(box: DockerSandbox, runner: Runner) -> None:
    bomb = "import os\nwhile True:\n    try: os.fork()\n    except OSError: pass\n"
    box.container.exec_run(["python3", "-c", bomb], user="repogym", detach=True)
    deadline = time.monotonic() + 90  # a loaded machine forks slowly
    while len(box.container.top()["Processes"]) < box.config.pids_limit - 8:  # seen from the host
        assert time.monotonic() < deadline, "the fork bomb did not take the container's slots"
        time.sleep(0.2)
    start = time.monotonic()
    result = runner.run("echo ok; ps -e -o user=", timeout=30, end_user=1000)
    assert result.output.startswith("ok\n") and "repogym" not in result.output, result.output
    # 1.2 s on a quiet machine: the passes run while 250 processes spin; a hung pass would
    # have waited for the 30 s timeout
    assert time.monotonic() - start < 25
    assert runner.run("echo again").output == "again\n"


def test_ending_a_user_but_the_process_it_spares(box: DockerSandbox, runner: Runner) -> None:
    for _ in range(2):
        box.container.exec_run(["sleep", "300"], user="repogym", detach=True)
    listed = runner.run("ps -u repogym -o pid=,comm=", timeout=30).output.split()
    pids = [int(p) for p, comm in zip(listed[::2], listed[1::2], strict=True) if comm == "sleep"]
    assert len(pids) == 2, listed
    result = runner.run("ps -u repogym -o pid=", timeout=30, end_user=1000, spare=pids[0])
    assert [int(p) for p in result.output.split()] == [pids[0]], result.output


def test_a_spared_process_that_forks_until_the_slots_are_gone_goes_too(box: DockerSandbox,
                                                                      runner: Runner) -> None:
    # a decoy run spared while the test run's processes end has run the agent's code: a fork
    # bomb in it leaves its children unreaped in every slot, where the next script needs one
    bomb = "import os\nwhile True:\n    try: os.fork()\n    except OSError: pass\n"
    box.container.exec_run(["bash", "-c", f"sleep 2; exec python3 -c '{bomb}'"],
                           user="repogym", detach=True)
    listed = runner.run("ps -u repogym -o pid=,args=", timeout=30).output.splitlines()
    spare = int(next(line for line in listed if "exec python3" in line).split()[0])
    deadline = time.monotonic() + 90  # a loaded machine forks slowly
    while len(box.container.top()["Processes"]) < box.config.pids_limit - 8:
        assert time.monotonic() < deadline, "the fork bomb did not take the container's slots"
        time.sleep(0.2)
    result = runner.run("echo ok; ps -e -o user=", timeout=60, end_user=1000, spare=spare)
    assert result.output.startswith("ok\n") and "repogym" not in result.output, result.output
    assert runner.run("echo again").output == "again\n"


def test_the_loop_says_nothing_before_the_host_speaks(box: DockerSandbox) -> None:
    """What the engine sends with the headers of its answer to an exec's start lands in the
    engine client's HTTP buffer, not on the socket: a ready line printed at once was lost there
    now and then, and the runner "did not start" after a minute (seen in task creation). The
    loop waits for the host's first line before it prints anything."""
    from repogym.sandbox.root_runner import LOOP
    from repogym.sandbox.transport import FrameReader

    api = box.client.api
    exec_id = api.exec_create(box.container.id, ["bash", "--noprofile", "--norc", "-c", LOOP],
                              stdin=True, stdout=True, stderr=True, user="root")["Id"]
    raw = api.exec_start(exec_id, socket=True)
    sock = getattr(raw, "_sock", raw)
    try:
        time.sleep(1.0)  # time enough to print, were it to print unasked
        sock.setblocking(False)
        early = b""
        with contextlib.suppress(BlockingIOError):  # the client's buffer, then the socket
            early += raw._response.raw._fp.fp.peek(0) or b""
        with contextlib.suppress(BlockingIOError):
            early += sock.recv(4096)
        assert early == b"", early
        sock.setblocking(True)
        sock.sendall(b"\n")
        reader, seen = FrameReader(sock), b""
        deadline = time.monotonic() + 30
        while b"__RG_RUNNER_READY" not in seen and time.monotonic() < deadline:
            assert reader.fill()
            seen += reader.take()
        assert b"__RG_RUNNER_READY" in seen
    finally:
        sock.close()
