"""A project that compiles a C extension builds on the base with the C toolchain
(astropy__astropy-12907: `failed-wheel-build-for-install`, the bases having no compiler)."""

from __future__ import annotations

import os
import subprocess
import uuid
from pathlib import Path

import pytest

from repogym.errors import SetupFailed
from repogym.images.build_tools import build_tools_tag
from repogym.images.python_base import base_tag
from repogym.images.repository import ensure_image, image_tag
from repogym.repo import snapshot_commit
from repogym.sandbox.client import docker_client
from repogym.schema import Environment, Task

SETUP_PY = """\
from setuptools import Extension, setup

setup(name="fastcalc", version="1.0", packages=["fastcalc"],
      ext_modules=[Extension("fastcalc._add", ["fastcalc/_add.c"])])
"""
ADD_C = """\
#include <Python.h>

static PyObject *add(PyObject *self, PyObject *args) {
    long a, b;
    if (!PyArg_ParseTuple(args, "ll", &a, &b)) return NULL;
    return PyLong_FromLong(a + b);
}
static PyMethodDef methods[] = {{"add", add, METH_VARARGS, ""}, {NULL, NULL, 0, NULL}};
static struct PyModuleDef module = {PyModuleDef_HEAD_INIT, "_add", NULL, -1, methods};
PyMODINIT_FUNC PyInit__add(void) { return PyModule_Create(&module); }
"""


def _task(root: Path, build_tools: bool) -> Task:
    env = Environment(python="3.11", setup=("python -m pip install -e .",),
                      build_tools=build_tools)
    return Task(instance_id="fastcalc-1", repo=f"test/{root.name}",
                base_commit=snapshot_commit(root), problem_statement="x", source=str(root),
                environment=env)


def test_the_toolchain_base_is_its_own_image() -> None:
    root = Path("/nonexistent")
    plain = Environment(python="3.9")
    assert build_tools_tag("3.9") != base_tag("3.9")
    assert build_tools_tag("3.9").startswith("repogym/base:py3.9-build-")
    task = Task(instance_id="x", repo="o/r", base_commit="c", problem_statement="p",
                source=str(root), environment=plain)
    with_tools = task.with_(environment=Environment(python="3.9", build_tools=True))
    assert image_tag(task) != image_tag(with_tools)
    assert "build_tools" not in task.to_dict()["environment"]
    assert Task.from_dict(with_tools.to_dict()).environment.build_tools


@pytest.mark.docker
def test_a_c_extension_builds_on_the_toolchain_base_only(tmp_path: Path,
                                                         monkeypatch: pytest.MonkeyPatch) -> None:
    host = Path("/etc/ssl/certs/ca-certificates.crt")
    if not os.environ.get("REPOGYM_CA_BUNDLE") and host.is_file():
        monkeypatch.setenv("REPOGYM_CA_BUNDLE", str(host))
    root = tmp_path / f"fastcalc-{uuid.uuid4().hex[:8]}"
    (root / "fastcalc").mkdir(parents=True)
    (root / "setup.py").write_text(SETUP_PY)
    (root / "fastcalc" / "__init__.py").write_text("from ._add import add\n")
    (root / "fastcalc" / "_add.c").write_text(ADD_C)
    with pytest.raises(SetupFailed):  # no compiler in the plain base
        ensure_image(_task(root, build_tools=False), progress=lambda _m: None)
    built = ensure_image(_task(root, build_tools=True), progress=lambda _m: None)
    try:
        out = subprocess.run(["docker", "run", "--rm", "--network", "none", built.tag, "python",
                              "-c", "import fastcalc; print(fastcalc.add(2, 3))"],
                             capture_output=True, text=True, timeout=120)
        assert out.stdout.strip() == "5", out.stderr
    finally:
        docker_client().images.remove(built.tag, force=True)
