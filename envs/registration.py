"""Registers repogym's environments with Gymnasium."""

from __future__ import annotations

import gymnasium as gym

ENV_ID = "repogym/SWE-v0"


def register_envs() -> None:
    if ENV_ID in gym.registry:
        return
    gym.register(id=ENV_ID, entry_point="repogym.envs.swe_env:SWEEnv", disable_env_checker=True)
