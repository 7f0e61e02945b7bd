"""A typed OpenEnv client for ``repogym serve`` (OpenEnv's ``GenericEnvClient`` works as well).

    client = RepogymEnvClient("http://127.0.0.1:8000", token="secret").sync()
    with client:
        result = client.reset(task_id="demo__textkit-1")
        result = client.step(RepogymAction(tool="bash", arguments={"command": "ls"}))
        result = client.step(RepogymAction(tool="submit"))
        result.reward, result.observation.info["reward_components"]
"""

from __future__ import annotations

from typing import Any
from urllib.parse import quote, urlsplit, urlunsplit

from openenv.core.client_types import StepResult
from openenv.core.env_client import EnvClient
from openenv.core.env_server.types import State

from repogym.envs.openenv.models import RepogymAction, RepogymObservation


def with_token(base_url: str, token: str) -> str:
    """``http://host:port`` with the token as URL credentials (sent as HTTP Basic)."""
    parts = urlsplit(base_url if "://" in base_url else f"http://{base_url}")
    host = parts.netloc.rpartition("@")[2]
    return urlunsplit(parts._replace(netloc=f"repogym:{quote(token, safe='')}@{host}"))


class RepogymEnvClient(EnvClient[RepogymAction, RepogymObservation, State]):
    """OpenEnv's WebSocket client with repogym's action and observation types."""

    def __init__(self, base_url: str, token: str = "", **kwargs: Any) -> None:
        super().__init__(with_token(base_url, token) if token else base_url, **kwargs)

    def _step_payload(self, action: RepogymAction) -> dict[str, Any]:
        return action.model_dump(exclude_none=True, exclude={"metadata"})

    def _parse_result(self, payload: dict[str, Any]) -> StepResult[RepogymObservation]:
        obs = payload.get("observation") or {}
        observation = RepogymObservation(
            text=obs.get("text", ""), info=obs.get("info") or {},
            truncated=bool(obs.get("truncated")), done=bool(payload.get("done")),
            reward=payload.get("reward"), metadata=obs.get("metadata") or {})
        return StepResult(observation=observation, reward=payload.get("reward"),
                          done=bool(payload.get("done")))

    def _parse_state(self, payload: dict[str, Any]) -> State:
        return State(**payload)
