"""A recording model gateway: an OpenAI-compatible proxy with one base URL per episode.

Every chat completion that passes through it is written to that episode's record, with the
exact token ids and logprobs when the backend returns them. See :class:`Gateway`.
"""

from repogym.agents.gateway.app import GatewayConfig, build_app
from repogym.agents.gateway.calls import CallStore, read_calls
from repogym.agents.gateway.gateway import Gateway

__all__ = ["CallStore", "Gateway", "GatewayConfig", "build_app", "read_calls"]
