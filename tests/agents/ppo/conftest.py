"""Fixtures of the PPO trainer's tests: one torch thread, and a tiny random model."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest


@pytest.fixture(autouse=True)
def one_thread() -> Iterator[None]:
    # The tiny model gains nothing from more threads, and on a busy 2-core machine OpenMP
    # threads waiting on each other make it many times slower.
    import torch

    before = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(before)


@pytest.fixture(scope="module")
def tiny() -> tuple[Any, Any]:
    """A tiny random causal LM and its tokenizer, in eval mode."""
    import torch

    from repogym.agents.ppo.policy import tiny_model

    torch.set_num_threads(1)
    lm, tok = tiny_model(seed=0)
    return lm.eval(), tok
