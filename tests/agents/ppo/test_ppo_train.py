"""`repogym train` end to end: what a run writes, resuming, LoRA, the Docker demo suite, GPU."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import torch

from repogym.agents.ppo.config import TrainConfig
from repogym.agents.ppo.policy import load_policy
from repogym.agents.ppo.toy_env import TOY_ID
from repogym.scripts.cli import main

TOY_FLAGS = ["--env-id", TOY_ID, "--suite", "", "--model", "tiny", "--device", "cpu",
             "--episodes-per-update", "4", "--num-envs", "2", "--max-turns", "2",
             "--max-new-tokens", "6", "--max-context", "512", "--lr", "1e-3"]
METRICS = ["charts/reward", "charts/resolved_rate", "losses/kl", "losses/entropy",
           "losses/clip_fraction", "losses/value_loss", "losses/explained_variance",
           "perf/tokens_per_s", "perf/env_s", "perf/generation_s", "perf/update_s",
           "perf/peak_memory_gb"]



def run(argv: list[str]) -> int:
    """`repogym train ARGV`, the way the console script runs it."""
    return main(["train", *argv])


def lines(path: Path) -> list[dict[str, object]]:
    return [json.loads(line) for line in path.read_text().splitlines()]


def assert_run_folder(out: Path, updates: int, episodes: int) -> None:
    metrics = lines(out / "metrics.jsonl")
    assert [m["update"] for m in metrics] == list(range(updates))
    for name in METRICS:
        assert name in metrics[-1], f"{name} missing from metrics.jsonl"
    assert (out / "checkpoints" / f"update_{updates:05d}" / "trainer.pt").is_file()
    assert any((out / "checkpoints" / f"update_{updates:05d}" / "model").iterdir())
    trajs = lines(out / "trajectories.jsonl")
    assert len(trajs) == updates * episodes
    records = sorted((out / "records").iterdir())
    assert records, "the environment wrote no record"
    linked = {str(t["env_record"]) for t in trajs}
    assert linked <= {str(r) for r in records}
    assert json.loads((out / "config.json").read_text())["updates"] == updates


def test_train_command_writes_metrics_tensorboard_checkpoints_and_records(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "run"
    assert run([*TOY_FLAGS, "--updates", "2", "--out", str(out)]) == 0
    assert_run_folder(out, updates=2, episodes=4)
    assert list((out / "tb").glob("events.out.tfevents.*"))
    trajs = lines(out / "trajectories.jsonl")
    assert all(t["terminated"] and len(t["turns"]) == 2 for t in trajs)  # type: ignore[arg-type]
    printed = capsys.readouterr().out
    assert "update    1" in printed and json.loads(printed.splitlines()[-1])["updates"] == 2


def test_resume_continues_where_the_checkpoint_stopped(tmp_path: Path) -> None:
    out = tmp_path / "run"
    flags = [*TOY_FLAGS, "--out", str(out), "--no-tensorboard", "--lora-rank", "4"]
    assert run([*flags, "--updates", "1"]) == 0
    ckpt = out / "checkpoints" / "update_00001"
    config = TrainConfig(model="tiny", lora_rank=4, max_context=512, max_new_tokens=6)
    policy, _ = load_policy(config, torch.device("cpu"), ckpt)
    trained = {n: p for n, p in policy.lm.named_parameters() if "lora_B" in n}
    assert trained and any(p.abs().sum() > 0 for p in trained.values()), "adapter not restored"
    assert run([*flags, "--updates", "2", "--resume", str(out)]) == 0
    assert [m["update"] for m in lines(out / "metrics.jsonl")] == [0, 1]
    assert (out / "checkpoints" / "update_00002" / "model" / "adapter_config.json").is_file()


def test_full_model_checkpoint_restores_the_trained_weights(tmp_path: Path) -> None:
    out = tmp_path / "run"
    assert run([*TOY_FLAGS, "--out", str(out), "--no-tensorboard", "--updates", "1",
                "--lr", "1e-2"]) == 0
    config = TrainConfig(model="tiny", max_context=512, max_new_tokens=6)
    fresh, _ = load_policy(config, torch.device("cpu"))
    restored, _ = load_policy(config, torch.device("cpu"), out / "checkpoints" / "update_00001")
    name, weight = next(iter(fresh.lm.named_parameters()))
    assert not torch.equal(weight, dict(restored.lm.named_parameters())[name])


def test_missing_model_folder_says_what_to_do(tmp_path: Path,
                                              capsys: pytest.CaptureFixture[str]) -> None:
    argv = [*TOY_FLAGS, "--out", str(tmp_path), "--model", str(tmp_path / "nope")]
    assert run(argv) == 2
    out, err = capsys.readouterr()
    assert "never downloaded" in err
    assert "updates of" not in out  # no run was announced: it never started


@pytest.mark.docker
@pytest.mark.slow
def test_two_ppo_updates_on_the_docker_demo_suite(tmp_path: Path) -> None:
    out = tmp_path / "run"
    argv = ["--suite", "demo", "--model", "tiny", "--updates", "2", "--device", "cpu",
            "--episodes-per-update", "2", "--num-envs", "2", "--max-turns", "2",
            "--max-new-tokens", "32", "--max-context", "8192", "--micro-batch-size", "1",
            "--out", str(out)]
    assert run(argv) == 0
    assert_run_folder(out, updates=2, episodes=2)
    trajs = lines(out / "trajectories.jsonl")
    assert all(t["task_id"] for t in trajs)


@pytest.mark.gpu
def test_train_runs_in_bf16_on_cuda(tmp_path: Path) -> None:
    out = tmp_path / "run"
    assert run([*TOY_FLAGS, "--device", "cuda", "--updates", "2", "--out", str(out),
                "--no-tensorboard"]) == 0
    metrics = lines(out / "metrics.jsonl")
    assert all(float(m["perf/peak_memory_gb"]) > 0 for m in metrics)  # type: ignore[arg-type]
    config = TrainConfig(model="tiny", device="cuda", max_context=512, max_new_tokens=6)
    policy, _ = load_policy(config, torch.device("cuda"))
    assert next(policy.lm.parameters()).dtype == torch.bfloat16
