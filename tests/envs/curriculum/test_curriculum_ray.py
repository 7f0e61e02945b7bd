"""Task statistics across a local Ray cluster: the workers' envs draw from the driver's
statistics and what they record reaches the driver's store and file (real Docker engine)."""

from __future__ import annotations

import importlib.util
import json
import os
import uuid
from pathlib import Path

import numpy as np
import pytest

from repogym.envs.curriculum import EpisodeResult, StatsStore
from repogym.envs.curriculum.stats import store_for
from repogym.suite import load_suite

pytestmark = [pytest.mark.docker, pytest.mark.slow]
ONLY = "demo__stockroom-3"
SUBMIT = '{"tool": "submit"}'


def prepared(path: Path) -> Path:
    store = StatsStore(path)
    for task in load_suite("demo", "train"):
        for k in range(8):
            resolved = k % 2 == 0 if task.instance_id == ONLY else True
            store.record(EpisodeResult(task.instance_id, True, resolved, float(resolved), 2))
    return path


def test_a_ray_vector_env_of_4_shares_the_drivers_statistics(tmp_path: Path) -> None:
    if importlib.util.find_spec("ray") is None:
        if os.environ.get("CI"):
            raise AssertionError("CI must run the Ray tests: pip install 'repogym[ray]'")
        pytest.skip("needs Ray: pip install 'repogym[ray]'")
    from repogym.envs.cluster import RayVectorEnv

    path = prepared(tmp_path / "stats.json")
    envs = RayVectorEnv(4, ray="local", envs_per_worker=2, suite="demo", stats=str(path),
                        sampler="band:0.1-0.9,explore=0", run_id=f"curray-{uuid.uuid4().hex[:6]}")
    try:
        _, infos = envs.reset(seed=0)
        # both workers drew from the driver's statistics: only ONLY is in the band
        assert list(infos["task_id"]) == [ONLY] * 4
        _, rewards, term, _, _ = envs.step(np.array([SUBMIT] * 4, dtype=object))
        assert term.all() and not rewards.any()
        driver = store_for(path)
        assert driver.table().episodes == 8 * 5 + 4  # every worker's episode came back
        # ONLY is now solved 4 times in its last 12: 4/8 recent -> still in the band, and the
        # others stay out; the next resets (autoreset) draw from the updated statistics
        _, _, _, _, infos = envs.step(np.array([SUBMIT] * 4, dtype=object))
        assert list(infos["task_id"]) == [ONLY] * 4
    finally:
        envs.close()
    saved = json.loads(path.read_text())  # the driver wrote the file, workers never did
    assert saved["episodes"] == 44 and saved["tasks"][ONLY]["attempts"] == 12
    assert saved["tasks"][ONLY]["successes"] == 4
