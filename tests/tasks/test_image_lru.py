"""`repogym images prune --budget SIZE`: least recently used task images go first, then
environment images nothing is built on, shared layers counted once; a removed image is built
again when next needed; `repogym doctor --suite S` says what a suite takes."""

from __future__ import annotations

import json
import time
import uuid
from pathlib import Path

import pytest

from repogym.images import lru as image_lru
from repogym.images.lru import Candidate, parse_size, plan
from repogym.images.repository import ensure_image, image_tag
from repogym.repo import snapshot_commit
from repogym.sandbox.client import docker_client
from repogym.schema import Environment, Task
from repogym.scripts.cli import main

BASE = ("FROM debian", "t0", 100)
ENV = ("RUN env", "t1", 50)


def _task_image(name: str, own: int, used: float, env: bool = True) -> Candidate:
    layer = (f"RUN {name}", "t2", own)
    layers = frozenset({BASE, layer, *([ENV] if env else [])})
    return Candidate(name, "repo", layers, layer, used)


def test_the_least_recently_used_go_first_and_shared_layers_count_once() -> None:
    old, new = _task_image("old", 10, used=1.0), _task_image("new", 20, used=2.0)
    env = Candidate("env", "env", frozenset({BASE, ENV}), ENV, used=0.5)
    base = Candidate("base", "base", frozenset({BASE}), BASE, used=0.0)
    evict, before, after = plan([old, new, env, base], budget=175)
    assert before == 180 and [c.name for c in evict] == ["old"] and after == 170
    # still over: the other task image, then the environment nothing is built on any more;
    # the base never goes
    evict, _, after = plan([old, new, env, base], budget=100)
    assert [c.name for c in evict] == ["old", "new", "env"] and after == 100
    evict, _, after = plan([old, new, env, base], budget=10)
    assert "base" not in [c.name for c in evict] and after == 100


def test_an_image_in_use_stays() -> None:
    busy = Candidate("busy", "repo", frozenset({BASE, ("RUN b", "t", 30)}), ("RUN b", "t", 30),
                     used=0.0, containers=1)
    evict, _, after = plan([busy], budget=0)
    assert evict == [] and after == 130


def test_sizes_are_read_with_their_units() -> None:
    assert parse_size("12GB") == 12 * 10**9
    assert parse_size("500 MB") == 500 * 10**6
    assert parse_size("1.5GiB") == int(1.5 * 2**30)
    assert parse_size("1024") == 1024
    with pytest.raises(ValueError, match="12GB"):
        parse_size("lots")


def test_a_use_is_recorded_per_tag(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("HOME", str(tmp_path))
    assert image_lru.last_use("repogym/repo:x-1") is None
    image_lru.touch("repogym/repo:x-1", 1000.0)
    assert image_lru.last_use("repogym/repo:x-1") == 1000.0
    image_lru.record_use("repogym/repo:x-1")
    assert (image_lru.last_use("repogym/repo:x-1") or 0) > time.time() - 60


def _task(root: Path, n: int) -> Task:
    (root / f"blob{n}.bin").write_bytes(bytes(range(256)) * 4096 * (n + 1))  # 1 or 2 MB
    commit = snapshot_commit(root)
    return Task(instance_id=f"lru-{n}", repo=f"test/{root.name}", base_commit=commit,
                problem_statement="x", source=str(root), environment=Environment(python="3.11"))


@pytest.mark.docker
def test_prune_evicts_the_oldest_and_an_evicted_image_is_built_again(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
        capsys: pytest.CaptureFixture[str]) -> None:
    monkeypatch.setenv("HOME", str(tmp_path))  # this test's own record of uses
    tasks = []
    for n in (0, 1):
        root = tmp_path / f"lru{n}-{uuid.uuid4().hex[:6]}"
        root.mkdir()
        (root / "app.py").write_text(f"X = {n}\n")
        tasks.append(_task(root, n))
    suite = tmp_path / "suite.jsonl"
    suite.write_text("".join(json.dumps(t.to_dict()) + "\n" for t in tasks))
    client = docker_client()
    tags = [ensure_image(t, progress=lambda _m: None).tag for t in tasks]
    try:
        image_lru.touch(tags[1], time.time() - 3600)  # the second is the least recently used
        image_lru.touch(tags[0], time.time())
        assert main(["doctor", "--suite", str(suite)]) == 0
        assert "2 of 2 task images and 0 of 0 environment images built" in \
            capsys.readouterr().out
        # nothing of the suite's may stay: both would go, the least recently used first
        assert main(["images", "prune", "--budget", "1", "--suite", str(suite),
                     "--dry-run", "--json", str(tmp_path / "all.json")]) == 0
        dry = json.loads((tmp_path / "all.json").read_text())
        assert dry["evict"] == [tags[1], tags[0]] and dry["removed"] == []
        both = dry["before"]
        # a budget one byte under what both take: the older one goes, the other stays
        assert main(["images", "prune", "--budget", str(both - 1), "--suite", str(suite),
                     "--json", str(tmp_path / "done.json")]) == 0
        done = json.loads((tmp_path / "done.json").read_text())
        assert done["removed"] == [tags[1]] and done["after"] < both
        assert client.images.list(name=tags[0]) and not client.images.list(name=tags[1])
        again = ensure_image(tasks[1], progress=lambda _m: None)  # on demand, not an error
        assert again.tag == tags[1] == image_tag(tasks[1]) and not again.cached
    finally:
        for tag in tags:
            if client.images.list(name=tag):
                client.images.remove(tag, force=True)
