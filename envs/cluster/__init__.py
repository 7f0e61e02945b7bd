"""Environments over a Ray cluster: workers on the nodes that have Docker, and a vector env.

Ray is imported only when a :class:`Fleet` or :class:`RayVectorEnv` is made.
"""

from repogym.envs.cluster.fleet import EpisodeLost, Fleet, FleetConfig
from repogym.envs.cluster.vector import RayVectorEnv

__all__ = ["EpisodeLost", "Fleet", "FleetConfig", "RayVectorEnv"]
