"""pytest, imported ahead of time in a warm grading container.

Importing pytest costs a third of a second or more, often more than a small test suite takes
to run. A grading container started by the pool while the agent works also starts, as the
unprivileged user, a Python process that imports pytest and then waits on its stdin. At
grading time it receives the test command's arguments and runs ``pytest.console_main()``
exactly as ``python -m pytest`` (or the ``pytest`` script) would, then the import check, and
exits with pytest's status. Nothing of the agent's is loaded before the request arrives; the
harness's own pytest plugin (``harness_plugin.py``) is imported after it, before pytest starts.

It is used only when it cannot differ from a fresh process: the test command is plain
``python -m pytest ...`` or ``pytest ...``, and nothing the process imported came from the
repository (a repository that is pytest itself, or one of its dependencies, runs the command
in a fresh process). The time limit is the host's: at the deadline every process of the
unprivileged user is killed by the container's root runner.
"""

from __future__ import annotations

import json
import select
import shlex
import socket
import time
from collections.abc import Callable
from dataclasses import dataclass, replace

from repogym.sandbox.base import ExecResult
from repogym.sandbox.client import engine_errors
from repogym.sandbox.docker import DockerSandbox
from repogym.sandbox.shell import MarkerCapture, OutputCapture
from repogym.sandbox.transport import FrameReader, exit_code
from repogym.sandbox.util import Later

READY = "__RG_PYTEST_READY"
PENDING = -1  # an ExecResult's exit_code while the engine is still being asked for it
LOADED = b"__RG_PYTEST_LOADED"

# Imports the packages the agent changed; prints those that come from outside /testbed (an
# installed copy that shadows the repository: the tests never saw the agent's code). A name
# that is no module at all (docs/, scripts/) is skipped. Both ways of running the tests use it:
# the warm runner after the tests in their own process, a fresh run in a new one that sees the
# sys.path the tests saw (the working folder on it only under `python -m pytest`).
IMPORT_CHECK = r"""
import importlib, os, sys
def check(names, cwd_on_path=True):
    if not cwd_on_path and sys.path and sys.path[0] in ("", os.getcwd()):
        del sys.path[0]  # `python -c` put it there; the pytest script does not
    away = []
    for name in names:
        try:
            module = importlib.import_module(name)
        except ModuleNotFoundError as exc:
            if exc.name == name:
                continue
            raise
        path = getattr(module, "__file__", None) or ""
        if path and not path.startswith("/testbed/"):
            away.append(name + ":" + path)
    return "\n__RG_SHADOW=" + " ".join(away) + "\n"
"""

# Runs in the container. Prints READY once pytest is imported (or REFUSED with the reason),
# then reads one JSON request: the argv, the form ("module" or "script"), the modules to
# import afterwards (``check``, from IMPORT_CHECK), variables for the environment, and
# whether to hold: print LOADED once the harness's plugin took its key and wait for a line
# before pytest starts (no code of the repository runs in either process before both took
# theirs), and wait for another line once the tests are collected (the decoy run collects
# while the test run goes on, and runs its tests after it).
RUNNER = IMPORT_CHECK + r"""
import os, sys
workdir = os.getcwd()
try:
    import pytest, _pytest.config
except BaseException as exc:
    print("__RG_PYTEST_REFUSED cannot import pytest: %r" % (exc,), flush=True); sys.exit(3)
local = sorted(n for n, m in list(sys.modules.items())
               if (getattr(m, "__file__", None) or "").startswith(workdir + os.sep))
if local:
    print("__RG_PYTEST_REFUSED imported from the repository: %s" % (local[:3],), flush=True)
    sys.exit(3)
print("__RG_PYTEST_READY %d" % os.getpid(), flush=True)
import json
request = json.loads(sys.stdin.readline() or "null")
if not request:
    sys.exit(0)
hold = os.dup(0) if request.get("hold") or request.get("gate") else None
os.close(0); os.open(os.devnull, os.O_RDONLY)
os.environ.update(request.get("env") or {})
if request.get("plugin"):  # the harness's plugin, before any code of the repository
    import importlib.util
    spec = importlib.util.spec_from_file_location(request["plugin"][0], request["plugin"][1])
    plugin = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = plugin
    spec.loader.exec_module(plugin)
    del plugin, spec
def _line(fd):
    while os.read(fd, 1) not in (b"\n", b""):
        pass
if request.get("hold"):
    print("__RG_PYTEST_LOADED", flush=True)
    _line(hold)
if request.get("gate"):
    import types
    gate = types.ModuleType("_repogym_gate")
    def _runtestloop(session):
        _line(hold)
        os.close(hold)
        yield
    gate.pytest_runtestloop = pytest.hookimpl(hookwrapper=True, tryfirst=True)(_runtestloop)
    sys.modules["_repogym_gate"] = gate
    request["args"] = ["-p", "_repogym_gate", *request["args"]]
    del gate, types
elif hold is not None:
    os.close(hold)
import shutil, pytest.__main__ as main
# `python -c` put the working folder first; a /testbed the image puts on sys.path itself
# (PYTHONPATH, an editable install's .pth) stays, as it does for the pytest a cold run starts
if sys.path and sys.path[0] in ("", workdir):
    del sys.path[0]
if request["form"] == "module":
    sys.argv = [main.__file__, *request["args"]]
    sys.path.insert(0, workdir)
else:
    script = shutil.which("pytest") or "pytest"
    sys.argv = [script, *request["args"]]
    sys.path.insert(0, os.path.dirname(os.path.abspath(script)))
try:
    code = pytest.console_main()
except SystemExit as exc:
    code = exc.code if isinstance(exc.code, int) else 1
if request["imports"]:
    try:
        sys.stdout.write(check(request["imports"]))
        ok = True
    except BaseException:
        ok = False
    sys.stdout.write("\n__RG_IMPORTS=%d\n" % (0 if ok else 1))
code = code if 0 <= code < 256 else 1
sys.stdout.flush(); sys.stderr.flush()
if request.get("done"):  # the host may stop reading here and end the process
    sys.stdout.write("\n__RG_PYTEST_DONE_%s %d\n" % (request["done"], code))
    sys.stdout.flush()
sys.exit(code)  # a normal exit: atexit handlers run as they would
"""


def pytest_argv(test_cmd: str) -> tuple[str, list[str]] | None:
    """("module" | "script", the arguments) for a plain pytest command, else None."""
    try:
        words = shlex.split(test_cmd)
    except ValueError:
        return None
    if words[:3] in (["python", "-m", "pytest"], ["python3", "-m", "pytest"]):
        return "module", words[3:]
    if words[:1] == ["pytest"]:
        return "script", words[1:]
    return None


@dataclass
class WarmPytest:
    """The waiting process in one container, and the socket to it."""

    exec_id: str
    sock: socket.socket
    reader: FrameReader
    ready: bool = False
    pid: int | None = None  # in the container's namespace, once ready
    keep: object = None  # the engine's response object behind ``sock`` (see Runner.start)
    started: float = 0.0  # when the request went
    early: bytes = b""  # output read while waiting for LOADED
    _code: Later[int] | None = None  # finish(code_later=True)'s inquiry of the exit status
    done: str = ""  # the word of the run's "pytest returned" line (``send``)

    @classmethod
    def start(cls, box: DockerSandbox, env: dict[str, str]) -> WarmPytest:
        api = box.client.api
        with engine_errors(f"start pytest in {box.name}"):
            exec_id = api.exec_create(
                box.container.id, ["python", "-c", RUNNER], stdin=True, stdout=True,
                stderr=True, user=box.user or "", workdir=box.workdir,
                environment=env)["Id"]
            raw = api.exec_start(exec_id, socket=True)
        sock: socket.socket = getattr(raw, "_sock", raw)
        sock.setblocking(True)
        return cls(exec_id, sock, FrameReader(sock), keep=raw)

    def wait_ready(self, timeout: float) -> bool:
        """Whether the process imported pytest (it says so on its first line)."""
        if self.ready:
            return True
        seen = b""
        deadline = time.monotonic() + timeout
        while b"\n" not in seen:
            left = deadline - time.monotonic()
            if left <= 0 or not select.select([self.sock], [], [], left)[0]:
                return False
            if not self.reader.fill():
                return False
            seen += self.reader.take()
        line = seen.decode(errors="replace").partition("\n")[0]
        self.ready = line.startswith(READY)
        pid = line[len(READY):].strip()
        self.pid = int(pid) if self.ready and pid.isdigit() else None
        return self.ready

    def run(self, box: DockerSandbox, args: list[str], form: str, imports: list[str],
            timeout: float, limit: int, end_user: Callable[[], None],
            plugin: tuple[str, str] | None = None, env: dict[str, str] | None = None
            ) -> ExecResult:
        """Runs pytest once; at the time limit, ``end_user`` kills every process of the
        unprivileged user. ``plugin``: (module name, file) imported before pytest starts;
        ``env``: variables set before that."""
        self.send(args, form, imports, plugin, env)
        return self.finish(box, timeout, limit, end_user)

    def send(self, args: list[str], form: str, imports: list[str],
             plugin: tuple[str, str] | None = None, env: dict[str, str] | None = None,
             hold: bool = False, gate: bool = False, done: str = "") -> None:
        """Sends the run's request (``run``'s arguments). The process waits for ``go``: with
        ``hold``, once its plugin took its key (``loaded`` says when); with ``gate``, once its
        tests are collected. With ``done`` (a word new for the run), it says when pytest
        returned and with what status, before the interpreter's own exit (``finish``)."""
        self.started = time.monotonic()
        self.done = done
        request = {"args": args, "form": form, "imports": imports, "plugin": plugin,
                   "env": env or {}, "hold": hold, "gate": gate, "done": done}
        self.sock.sendall(json.dumps(request).encode() + b"\n")

    def loaded(self, timeout: float) -> bool:
        """Waits for the held process's word that its plugin took its key; False when it
        did not come (what came before it is kept for ``finish``)."""
        deadline = time.monotonic() + timeout
        while LOADED not in self.early:
            left = deadline - time.monotonic()
            if left <= 0 or not select.select([self.sock], [], [], left)[0]:
                return False
            if not self.reader.fill():
                return False
            self.early += self.reader.take()
        return True

    def go(self) -> None:
        """Lets a held process go on, one step."""
        try:
            self.sock.sendall(b"\n")
        except OSError:
            pass  # it is gone: ``finish`` reads what it left

    def finish(self, box: DockerSandbox, timeout: float, limit: int,
               end_user: Callable[[], None], code_later: bool = False) -> ExecResult:
        """Reads the run's output to its end (see ``run``). With ``code_later``, the engine is
        asked for the exit status in the background (a round trip of the engine's API while
        the grader's next script runs): the result's ``exit_code`` is ``PENDING`` until
        ``exit_status`` gives it.

        A run sent with ``done`` is over once the process says pytest returned: its status is
        the one said, and the interpreter's exit (a few hundredths of a second with pytest
        loaded; what atexit handlers print) is not waited for. The caller's next root script
        ends the process with the rest of the user's. The line is the process's word, as
        its exit status is: code in it can say it early, and then has not run its tests."""
        start = self.started or time.monotonic()
        marker = (MarkerCapture(limit, f"__RG_PYTEST_DONE_{self.done} ".encode())
                  if self.done else None)
        capture = marker or OutputCapture(limit)

        def take(data: bytes) -> bytes | None:
            """Keeps ``data``; the status said, once the "pytest returned" line came."""
            if marker is None:
                capture.add(data)
                return None
            return marker.feed(data)

        said = take(self.early.replace(LOADED + b"\n", b"", 1))
        timed_out = False
        deadline = time.monotonic() + timeout
        while said is None:
            left = deadline - time.monotonic()
            if left <= 0 and timed_out:
                break  # killed, yet the stream did not end: give up on it
            if left <= 0:
                timed_out = True
                end_user()
                deadline = time.monotonic() + 30  # what is left of the stream, then its end
                continue
            if select.select([self.sock], [], [], left)[0]:
                if not self.reader.fill():
                    break
                said = take(self.reader.take())
        if said is None:
            said = take(self.reader.take())
            if marker is not None and said is None:  # the stream ended first: all is output
                capture.add(marker.pending)
        self.close()
        if timed_out:
            code = 137
        elif said is not None and said.strip().isdigit():
            code = int(said.strip())
        elif code_later:
            self._code = Later(lambda: exit_code(box.client.api, self.exec_id, "pytest"))
            code = PENDING
        else:
            code = exit_code(box.client.api, self.exec_id, "pytest")
        output, truncated = capture.text()
        return ExecResult(output, code, timed_out=timed_out, truncated=truncated,
                          n_bytes=capture.total, duration=time.monotonic() - start)

    def exit_status(self, result: ExecResult) -> ExecResult:
        """``result`` with its exit status, once ``finish(code_later=True)``'s inquiry is back
        (what it raised is raised here)."""
        if result.exit_code != PENDING or self._code is None:
            return result
        return replace(result, exit_code=self._code.result())

    def close(self) -> None:
        try:
            self.sock.close()
        except OSError:
            pass
