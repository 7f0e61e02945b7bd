"""The bundled multi-turn PPO agent: `repogym train`, or `train(TrainConfig(...))` from Python.

Torch and transformers are imported only when the trainer is used, so `import repogym.agents.ppo`
is cheap.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from repogym.agents.ppo.config import TrainConfig

if TYPE_CHECKING:
    from repogym.agents.ppo.ppo import TrainResult

__all__ = ["TrainConfig", "TrainResult", "train"]


def train(config: TrainConfig,
          on_update: Callable[[dict[str, Any]], None] | None = None) -> TrainResult:
    """Runs PPO as configured; see `repogym.agents.ppo.ppo` for the algorithm."""
    from repogym.agents.ppo.ppo import train as _train  # torch, transformers: only to train

    return _train(config, on_update)


def __getattr__(name: str) -> Any:
    if name == "TrainResult":
        from repogym.agents.ppo.ppo import TrainResult  # torch, transformers: only when asked

        return TrainResult
    raise AttributeError(name)
