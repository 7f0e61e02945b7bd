"""Images: isolated environments (none of the distribution's Python packages, no build tools
left for the agent), setups that install nothing fail the build, and the CA bundle is no part
of an image (neither its tag nor its content)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
import uuid
from pathlib import Path
from typing import Any

import pytest

from repogym.errors import SetupFailed, SetupIncomplete
from repogym.images import installed
from repogym.images.python_base import TOOLCHAIN, base_tag
from repogym.images.repository import ensure_image, image_tag
from repogym.repo import snapshot_commit
from repogym.schema import Environment, Task

# --- what setup asks for ----------------------------------------------------------------------


def test_pip_commands_are_found_in_shell_lines() -> None:
    wanted = installed.pip_requests([
        "PIP_INDEX_URL=http://x python -m pip install --retries 0 six; python -m pip --version",
        "cd sub && pip install -e '.[test]' -r req.txt 'foo @ https://h/foo.whl'",
        "python3 -m pip install -U pip setuptools==70.0.0 git+https://h/x.git#egg=bar  # six",
        "pip install --target /elsewhere nope && pip3 install dist/*.whl",
    ])
    assert [r["requirement"] for r in wanted["requirements"]] == [
        "six", "foo", "pip", "setuptools==70.0.0", "bar"]
    assert wanted["paths"] == ["/testbed/sub"]
    assert wanted["files"] == [{"path": "/testbed/sub/req.txt", "last": False}]
    assert wanted["names"] == ["bar", "foo", "pip", "setuptools", "six"]
    # only the last pip command's versions must still hold after setup
    assert [r["last"] for r in wanted["requirements"]] == [False, False, False, False, False]
    assert installed.pip_requests(["echo pip install six", "pip download six"]) == {
        "requirements": [], "files": [], "paths": [], "names": []}


def test_the_check_names_what_is_missing(tmp_path: Path) -> None:
    """The container's side, run by this interpreter against its own packages."""
    (tmp_path / "req.txt").write_text("# tools\npytest>=1\nno-such-dist-xyz==1.0  # gone\n")
    wanted = installed.pip_requests([
        "pip install pytest 'packaging<1' no-such-dist-abc",
        f"pip install -r {tmp_path}/req.txt 'pytest<1; python_version < \"3\"'",
        f"pip install {tmp_path}",
    ])
    missing = installed.check(wanted)
    assert len(missing) == 3, missing
    assert missing[0].startswith("no-such-dist-abc (not installed) from `pip install pytest")
    assert missing[1].startswith("no-such-dist-xyz==1.0 (not installed) from ")
    assert missing[2].startswith(f"{tmp_path} (pip install")
    # a version that a later pip command may have changed is not held against it...
    assert not any(m.startswith("packaging") for m in missing)
    # ...but one asked for by the last command is
    last = installed.check(installed.pip_requests(["pip install 'pytest<1'"]))
    assert last and "installed:" in last[0]


def test_the_ca_bundle_changes_no_tag(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    task = Task(instance_id="t-1", repo="o/r", base_commit="0" * 40, problem_statement="x",
                patch="", environment=Environment(setup=("pip install -e .",)))
    monkeypatch.delenv("REPOGYM_CA_BUNDLE", raising=False)
    before = image_tag(task), base_tag("3.11"), base_tag("3.9")
    bundle = tmp_path / "ca.pem"
    bundle.write_text("-----BEGIN CERTIFICATE-----\nMIIB\n-----END CERTIFICATE-----\n")
    monkeypatch.setenv("REPOGYM_CA_BUNDLE", str(bundle))
    assert (image_tag(task), base_tag("3.11"), base_tag("3.9")) == before


# --- in Docker --------------------------------------------------------------------------------

# A package Debian ships too (python3-more-itertools comes with Debian's pytest): the image
# must hold no copy of it but the repository's own.
PACKAGE_FILES = {
    "pyproject.toml": """\
        [build-system]
        requires = ["setuptools>=61"]
        build-backend = "setuptools.build_meta"

        [project]
        name = "more-itertools"
        version = "0.0.1"

        [tool.setuptools]
        packages = ["more_itertools"]
        """,
    "more_itertools/__init__.py": """\
        def first(iterable, default=None):
            return next(iter(iterable), default)
        """,
    "tests/test_first.py": """\
        from more_itertools import first


        def test_first():
            assert first([3, 4]) == 3
        """,
}

# As the agent's user: every interpreter's view of the package, the environment's path, the
# build tools, and every copy of the package on disk or inside an archive outside /testbed.
PROBE = textwrap.dedent("""\
    import json, os, subprocess, sys, zipfile
    out = {"imports": {}, "copies": [], "archived": []}
    for python in ("python", "python3", "/usr/bin/python3"):
        code = "import more_itertools; print(more_itertools.__file__)"
        run = subprocess.run([python, "-c", code], capture_output=True, text=True, cwd="/tmp")
        out["imports"][python] = run.stdout.strip() or run.stderr.strip().splitlines()[-1]
    out["path"] = sys.path
    for tool in ("pip", "setuptools", "wheel"):
        run = subprocess.run([sys.executable, "-c", "import " + tool], capture_output=True)
        out[tool] = run.returncode == 0
    out["pytest"] = subprocess.run(["pytest", "--version"], capture_output=True,
                                   text=True).stdout.strip()
    for root, dirs, files in os.walk("/"):
        if root in ("/proc", "/sys", "/dev", "/testbed"):
            dirs[:] = []
            continue
        for name in dirs + files:
            path = os.path.join(root, name)
            if name in ("more_itertools", "more_itertools.py") and os.access(path, os.R_OK):
                out["copies"].append(path)
            if name.endswith((".whl", ".zip", ".egg", ".pyz")) and os.access(path, os.R_OK):
                try:
                    names = zipfile.ZipFile(path).namelist()
                except (OSError, zipfile.BadZipFile):
                    continue
                if any(n.startswith("more_itertools/") or "/more_itertools/" in n
                       for n in names):
                    out["archived"].append(path)
    print(json.dumps(out))
    """)


def _repo(root: Path, files: dict[str, str]) -> Path:
    for name, text in files.items():
        path = root / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(textwrap.dedent(text))
    return root


def _task(root: Path, setup: tuple[str, ...], python: str = "3.11",
          test_cmd: str = "python -m pytest -rA") -> Task:
    name = root.name
    return Task(instance_id=f"{name}-1", repo=f"test/{name}", base_commit=snapshot_commit(root),
                problem_statement="x", patch="", source=str(root),
                environment=Environment(python=python, setup=setup, test_cmd=test_cmd))


def _run(image: str, *argv: str, user: str = "repogym") -> str:
    proc = subprocess.run(["docker", "run", "--rm", "--network", "none", "--user", user,
                           image, *argv], capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    return proc.stdout


@pytest.fixture
def index_reachable(monkeypatch: pytest.MonkeyPatch) -> None:
    """Builds that reach the package index trust the host's CA bundle, as under the Makefile
    (behind a proxy that intercepts TLS they fail without it)."""
    host = Path("/etc/ssl/certs/ca-certificates.crt")
    if not os.environ.get("REPOGYM_CA_BUNDLE") and host.is_file():
        monkeypatch.setenv("REPOGYM_CA_BUNDLE", str(host))


@pytest.mark.docker
@pytest.mark.usefixtures("index_reachable")
def test_the_agent_sees_no_copy_of_the_package_but_its_own(tmp_path: Path) -> None:
    root = _repo(tmp_path / f"more-itertools-{uuid.uuid4().hex[:6]}", PACKAGE_FILES)
    image = ensure_image(_task(root, ("python -m pip install -e .",)), progress=lambda _m: None)
    found: dict[str, Any] = json.loads(_run(image.tag, "python", "-c", PROBE))
    assert found["imports"]["python"] == "/testbed/more_itertools/__init__.py"
    assert found["imports"]["python3"] == "/testbed/more_itertools/__init__.py"
    assert found["imports"]["/usr/bin/python3"].startswith("ModuleNotFoundError")
    assert found["copies"] == [] and found["archived"] == []
    assert not [p for p in found["path"] if "dist-packages" in p or p.startswith("/usr/local")]
    assert (found["pip"], found["setuptools"], found["wheel"]) == (False, False, False)
    assert found["pytest"] == f"pytest {TOOLCHAIN['3.11'][0].split('==')[1]}"


@pytest.mark.docker
def test_a_setup_that_installs_nothing_fails_the_build(tmp_path: Path) -> None:
    root = _repo(tmp_path / f"quiet-{uuid.uuid4().hex[:6]}", {"quiet.py": "X = 1\n"})
    # the index is a closed port: pip fails, and the line's last command hides it
    setup = ("PIP_INDEX_URL=http://127.0.0.1:9/simple python -m pip install --retries 0 six; "
             "python -m pip --version",)
    with pytest.raises(SetupIncomplete) as err:
        ensure_image(_task(root, setup), progress=lambda _m: None)
    message = str(err.value)
    assert "six (not installed)" in message and "REPOGYM_CA_BUNDLE" in message
    assert "127.0.0.1" in message  # pip's own complaint is quoted
    with pytest.raises(SetupFailed, match="non-zero code"):
        ensure_image(_task(root, ("false",)), progress=lambda _m: None)


@pytest.mark.docker
def test_the_ca_bundle_is_used_at_build_time_only(tmp_path: Path,
                                                  monkeypatch: pytest.MonkeyPatch) -> None:
    marker = f"repogym-test-ca-{uuid.uuid4().hex}"
    host = Path("/etc/ssl/certs/ca-certificates.crt")
    bundle = tmp_path / "ca.pem"
    bundle.write_text(f"# {marker}\n" + (host.read_text() if host.exists() else ""))
    root = _repo(tmp_path / f"trusting-{uuid.uuid4().hex[:6]}", {"trusting.py": "X = 1\n"})
    task = _task(root, (f'grep -q {marker} "$PIP_CERT" && grep -q {marker} "$SSL_CERT_FILE"',))
    monkeypatch.delenv("REPOGYM_CA_BUNDLE", raising=False)
    tag = image_tag(task)
    monkeypatch.setenv("REPOGYM_CA_BUNDLE", str(bundle))
    built = ensure_image(task, progress=lambda _m: None)  # the setup fails without the bundle
    assert built.tag == tag and not built.cached
    left = _run(tag, "bash", "-c", f"grep -rlsF {marker} /etc /opt /run /tmp /root /home "
                f"/usr/local /testbed; env | grep -c CERT || true", user="root")
    assert left.split() == ["0"]


@pytest.mark.docker
@pytest.mark.slow
@pytest.mark.usefixtures("index_reachable")
@pytest.mark.parametrize("python", ["3.9", "3.13"])
def test_every_base_runs_plain_pytest(tmp_path: Path, python: str) -> None:
    """The 3.9 base once had no ``pytest`` command (#25): each base has it, pinned."""
    from repogym.tasks.validate import validate_task

    root = _repo(tmp_path / f"calc{python.replace('.', '')}-{uuid.uuid4().hex[:6]}", {
        "calc.py": "def add(a, b):\n    return a - b\n",
        # at the root: the plain pytest command puts a test's folder on sys.path, not the cwd
        "test_add.py": "from calc import add\n\n\ndef test_add():\n"
                       "    assert add(2, 3) == 5\n"})
    fix = ("diff --git a/calc.py b/calc.py\n--- a/calc.py\n+++ b/calc.py\n@@ -1,2 +1,2 @@\n"
           " def add(a, b):\n-    return a - b\n+    return a + b\n")
    task = _task(root, (), python, test_cmd="pytest -rA").with_(
        patch=fix, FAIL_TO_PASS=("test_add.py::test_add",))
    image = ensure_image(task, progress=lambda _m: None)
    version = _run(image.tag, "python", "-c", "import sys; print(sys.version_info[:2])")
    assert version.strip() == str(tuple(int(x) for x in python.split(".")))
    result = validate_task(task, runs=1)
    assert result.ok, result.reason


def test_the_checker_runs_on_its_own() -> None:
    """It is copied into images as a script: it must not import the package."""
    code = f"import runpy; runpy.run_path({installed.__file__!r}, run_name='not_main')"
    proc = subprocess.run([sys.executable, "-I", "-c", code], capture_output=True, text=True)
    assert proc.returncode == 0, proc.stderr


def test_a_build_script_sets_only_the_labels_it_is_asked_for() -> None:
    from repogym.images.build import script_labels

    log = ("REPOGYM-LABEL org.repogym.repo-commit=aaa\nsetup says REPOGYM-LABEL x=1\n"
           "REPOGYM-LABEL org.repogym.user=root\nREPOGYM-LABEL org.repogym.repo-commit=bbb\n")
    assert script_labels(log, ("org.repogym.repo-commit",)) == {"org.repogym.repo-commit": "bbb"}
