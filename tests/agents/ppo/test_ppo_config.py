"""TrainConfig validation and its mapping onto `repogym train` flags (no torch needed)."""

from __future__ import annotations

import argparse
import dataclasses

import pytest

from repogym.agents.ppo.config import TrainConfig
from repogym.scripts.train import add_train_parser, config_from_args


def parse(argv: list[str]) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="repogym")
    add_train_parser(parser.add_subparsers(dest="command"))
    return parser.parse_args(["train", *argv])


def test_every_field_has_help() -> None:
    for f in dataclasses.fields(TrainConfig):
        assert f.metadata.get("help"), f"{f.name} has no help line"


def test_defaults_round_trip_through_the_command_line() -> None:
    assert config_from_args(parse([])) == TrainConfig()


def test_flags_map_onto_fields() -> None:
    args = parse(["--suite", "demo", "--model", "tiny", "--updates", "2", "--device", "cpu",
                  "--clip-low", "0.1", "--no-tensorboard", "--advantage", "grpo",
                  "--group-size", "4"])
    config = config_from_args(args)
    assert (config.suite, config.model, config.updates, config.device) == ("demo", "tiny", 2, "cpu")
    assert config.clip_low == 0.1 and config.tensorboard is False
    assert config.advantage == "grpo" and config.group_size == 4 and not config.critic
    assert args.func.__name__ == "run_train"


def test_unknown_choice_is_rejected_by_the_parser() -> None:
    with pytest.raises(SystemExit):
        parse(["--advantage", "ppo2"])


@pytest.mark.parametrize(("kwargs", "message"), [
    ({"advantage": "grpo", "group_size": 1}, "group_size >= 2"),
    ({"advantage": "grpo", "group_size": 4, "truncation": "bootstrap"}, "no critic"),
    ({"episodes_per_update": 6, "group_size": 4}, "not a multiple"),
    ({"max_new_tokens": 512, "max_context": 512}, "must be below"),
    ({"clip_low": 1.5}, "clip_low"),
    ({"kl_coef": -1.0}, "kl_coef"),
    ({"env_kwargs": "{oops"}, "not JSON"),
    ({"env_kwargs": "[1]"}, "JSON object"),
    ({"device": "tpu"}, "choose one of"),
    ({"model": ""}, "local model folder"),
])
def test_invalid_configs_say_what_to_change(kwargs: dict[str, object], message: str) -> None:
    with pytest.raises(ValueError, match=message):
        TrainConfig(**kwargs)  # type: ignore[arg-type]


def test_truncation_auto_follows_the_critic() -> None:
    assert TrainConfig().bootstrap
    assert not TrainConfig(advantage="rloo", group_size=2).bootstrap
    assert not TrainConfig(truncation="mask").bootstrap


def test_invalid_config_from_the_command_line_exits_2(capsys: pytest.CaptureFixture[str]) -> None:
    from repogym.scripts.cli import main

    assert main(["train", "--advantage", "grpo"]) == 2
    err = capsys.readouterr().err
    assert err.startswith("repogym: error: ") and "group_size" in err


def test_repogym_train_help_lists_the_flags(capsys: pytest.CaptureFixture[str]) -> None:
    from repogym.scripts.cli import main

    with pytest.raises(SystemExit) as exit_info:
        main(["train", "--help"])
    assert exit_info.value.code == 0
    text = capsys.readouterr().out
    assert "--clip-high" in text and "--kl-coef" in text and "--lora-rank" in text
