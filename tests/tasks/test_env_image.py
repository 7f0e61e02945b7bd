"""Environment images shared by the tasks of one repository and version: one environment
image under many thin task layers, the project's own install pre-run at the environment
commit and forgotten, and the pristine copy kept as hard links."""

from __future__ import annotations

import os
import subprocess
import uuid
from pathlib import Path

import pytest

from repogym.images.env_image import LABEL_PREINSTALL, ensure_env, env_tag, is_shared
from repogym.images.repository import ensure_image, image_tag
from repogym.sandbox.client import docker_client
from repogym.schema import Environment, Task

GIT = ["git", "-c", "user.name=a", "-c", "user.email=a@b"]
MARKER = "ENV_COMMIT_ONLY_7f3c"  # code that only the environment commit holds
SETUP_PY = ("from setuptools import setup\n"
            "setup(name='calc', version='1.0', py_modules=['calc'], install_requires={reqs})\n")


def _commit(root: Path, files: dict[str, str], message: str) -> str:
    for name, text in files.items():
        (root / name).write_text(text)
    subprocess.run([*GIT, "-C", str(root), "add", "-A"], check=True)
    subprocess.run([*GIT, "-C", str(root), "commit", "-qm", message], check=True)
    return subprocess.run(["git", "-C", str(root), "rev-parse", "HEAD"], check=True,
                          capture_output=True, text=True).stdout.strip()


def _task(root: Path, base: str, env_commit: str | None, n: int = 1) -> Task:
    env = Environment(python="3.11", env_setup=("python -m pip install six",),
                      env_commit=env_commit, setup=("python -m pip install -e .",))
    return Task(instance_id=f"calc-{n}", repo=f"test/{root.name}", base_commit=base,
                problem_statement="x", source=str(root), environment=env)


def test_tasks_of_one_environment_share_its_image_and_not_their_own(tmp_path: Path) -> None:
    root = tmp_path / "calc"
    subprocess.run(["git", "init", "-q", str(root)], check=True)
    a = _commit(root, {"calc.py": "def add(a, b):\n    return a - b\n",
                       "setup.py": SETUP_PY.format(reqs="['tomli']")}, "a")
    b = _commit(root, {"calc.py": "def add(a, b):\n    return a - b  # b\n"}, "b")
    env = _commit(root, {"calc.py": f"def add(a, b):\n    return a + b  # {MARKER}\n"}, "env")
    first, second = _task(root, a, env), _task(root, b, env, 2)
    assert is_shared(first.environment) and env_tag(first) == env_tag(second)
    assert image_tag(first) != image_tag(second)
    other = _task(root, a, b)
    assert env_tag(other) != env_tag(first)  # another environment commit: another image
    assert "env_setup" not in Task(instance_id="x", repo="r", base_commit="c",
                                   problem_statement="p").to_dict()["environment"]
    round_trip = Task.from_dict(first.to_dict())
    assert round_trip.environment == first.environment
    assert round_trip.task_hash == first.task_hash


@pytest.fixture
def index_reachable(monkeypatch: pytest.MonkeyPatch) -> None:
    host = Path("/etc/ssl/certs/ca-certificates.crt")
    if not os.environ.get("REPOGYM_CA_BUNDLE") and host.is_file():
        monkeypatch.setenv("REPOGYM_CA_BUNDLE", str(host))


def _run(image: str, script: str) -> str:
    proc = subprocess.run(["docker", "run", "--rm", "--network", "none", "--user", "root",
                           image, "bash", "-c", script], capture_output=True, text=True,
                          timeout=120)
    assert proc.returncode == 0, proc.stderr
    return proc.stdout


@pytest.mark.docker
@pytest.mark.usefixtures("index_reachable")
def test_an_environment_image_holds_the_dependencies_and_no_code(tmp_path: Path) -> None:
    root = tmp_path / f"calc-{uuid.uuid4().hex[:8]}"
    subprocess.run(["git", "init", "-q", str(root)], check=True)
    a = _commit(root, {"calc.py": "def add(a, b):\n    return a - b\n",
                       "setup.py": SETUP_PY.format(reqs="['tomli']")}, "a")
    b = _commit(root, {"calc.py": "def add(a, b):\n    return a - b  # b\n"}, "b")
    env = _commit(root, {"calc.py": f"def add(a, b):\n    return a + b  # {MARKER}\n"}, "env")
    first, second = _task(root, a, env), _task(root, b, env, 2)
    client = docker_client()
    built = [ensure_image(t, progress=lambda _m: None) for t in (first, second)]
    shared = env_tag(first)
    try:
        assert ensure_env(second, progress=lambda _m: None).cached  # built once, for both
        image = client.images.get(shared)
        assert image.labels[LABEL_PREINSTALL] == "ok"
        # the dependencies are there (env_setup's and the project's own), the project is not,
        # and nothing of the environment commit's code is left anywhere
        out = _run(shared, "python -c 'import six, tomli'; ls -A /testbed | wc -l; "
                   "python -c 'import calc' 2>&1 | tail -1; "
                   f"grep -rlsF {MARKER} / --exclude-dir=proc --exclude-dir=sys | wc -l")
        assert out.split("\n")[:3] == ["0", "ModuleNotFoundError: No module named 'calc'", "0"]
        for task, image_built in zip((first, second), built, strict=True):
            ids = [h["Id"] for h in client.api.history(image_built.tag)]
            assert image.id in ids  # the task's image is built on the shared one
            own = client.api.history(image_built.tag)[0]["Size"]
            assert own < 2_000_000, f"{task.instance_id}: own layer {own} bytes"
            got = _run(image_built.tag, "cd /testbed && python -c 'import calc; "
                       "print(calc.__file__, calc.add(1, 1))'; "
                       "stat -c %i calc.py /opt/repogym-pristine/testbed/calc.py | uniq | wc -l")
            assert got.split("\n")[:2] == ["/testbed/calc.py 0", "1"]  # one inode: linked
    finally:
        for image_built in built:
            client.images.remove(image_built.tag, force=True)
        client.images.remove(shared, force=True)


@pytest.mark.docker
@pytest.mark.usefixtures("index_reachable")
def test_a_failing_pre_install_leaves_the_install_to_the_task(tmp_path: Path) -> None:
    root = tmp_path / f"calc-{uuid.uuid4().hex[:8]}"
    subprocess.run(["git", "init", "-q", str(root)], check=True)
    a = _commit(root, {"calc.py": "def add(a, b):\n    return a - b\n",
                       "setup.py": SETUP_PY.format(reqs="['tomli']")}, "a")
    broken = _commit(root, {"setup.py": "raise SystemExit('broken at this commit')\n"}, "x")
    task = _task(root, a, broken)
    client = docker_client()
    built = ensure_image(task, progress=lambda _m: None)
    try:
        assert client.images.get(env_tag(task)).labels[LABEL_PREINSTALL].startswith("failed")
        assert _run(built.tag, "python -c 'import calc, tomli; print(calc.__file__)'"
                    ).strip() == "/testbed/calc.py"
    finally:
        client.images.remove(built.tag, force=True)
        client.images.remove(env_tag(task), force=True)
