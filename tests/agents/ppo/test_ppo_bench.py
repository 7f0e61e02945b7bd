"""The PPO benchmark script: a CPU smoke run, and the real measurement on a GPU."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import torch

from repogym.scripts.bench_ppo import main

KEYS = {"generation_tokens_per_s", "update_s", "score_s", "peak_memory_gb", "params"}


def test_bench_reports_generation_update_and_memory_on_cpu(tmp_path: Path) -> None:
    out = tmp_path / "bench.json"
    before = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        assert main(["--size", "tiny", "--device", "cpu", "--batch", "2", "--prompt-len", "16",
                     "--new-tokens", "4", "--seq-len", "48", "--out", str(out)]) == 0
    finally:
        torch.set_num_threads(before)
    result = json.loads(out.read_text())
    assert KEYS <= set(result)
    assert result["generated_tokens"] == 2 * 4  # no early stop: full-length turns are measured
    assert result["generation_tokens_per_s"] > 0 and result["update_s"] > 0
    assert result["dtype"] == "float32"


@pytest.mark.gpu
@pytest.mark.slow
def test_bench_on_cuda_runs_in_bf16(tmp_path: Path) -> None:
    out = tmp_path / "bench.json"
    assert main(["--size", "0.5b", "--device", "cuda", "--batch", "4", "--prompt-len", "256",
                 "--new-tokens", "64", "--seq-len", "1024", "--out", str(out)]) == 0
    result = json.loads(out.read_text())
    assert result["dtype"] == "bfloat16" and result["peak_memory_gb"] > 0.5
