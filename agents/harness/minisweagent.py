"""mini-swe-agent, as installed and unpatched, playing a repogym episode.

Its ``Environment`` is :class:`RepogymEnvironment` (each command runs in the episode's
persistent shell, under repogym's limits); its model is mini-swe-agent's own ``LitellmModel``
pointed at a base URL of the recording gateway, which forwards to your OpenAI-compatible
backend; its agent and prompts are its own (``swebench.yaml`` by default). repogym grades the
diff the episode leaves, whatever mini-swe-agent prints as its submission.

From Python, with an environment you made::

    env = gym.make("repogym/SWE-v0", suite="demo")
    obs, info = env.reset(options={"task_id": "demo__textkit-1"})
    with Gateway("http://127.0.0.1:8000/v1", record_dir="runs/calls") as gateway:
        run_mini_swe_agent(env, base_url=gateway.session_url("ep1"), model="qwen")
    obs, reward, *_ = env.step({"tool": "submit"})

From the command line (a gateway is started for you; calls are recorded beside each episode's
record as ``*.calls.jsonl``)::

    repogym eval --suite demo --agent harness:mini-swe-agent \
        --agent-option base_url=http://127.0.0.1:8000/v1 --agent-option model=qwen
"""

from __future__ import annotations

import os
import platform
import shlex
import threading
import uuid
from pathlib import Path
from typing import Any

import gymnasium as gym

from repogym import settings
from repogym.agents.gateway import Gateway
from repogym.agents.harness.interface import CommandResult, EnvShell, HarnessAgent, Shell

# mini-swe-agent prints a banner and litellm fetches a price list at import: neither is wanted
# in an evaluation, and the price list cannot be fetched without network
os.environ.setdefault("MSWEA_SILENT_STARTUP", "1")
os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")
os.environ.setdefault("MSWEA_COST_TRACKING", "ignore_errors")

SUBMIT_LINE = "COMPLETE_TASK_AND_SUBMIT_FINAL_OUTPUT"
WORKDIR = "/testbed"


class RepogymEnvironment:
    """mini-swe-agent's ``Environment`` over a repogym :class:`Shell`.

    mini-swe-agent runs each command in a fresh subshell of ``cwd``; so does this (``cd`` first),
    though exported variables persist in repogym's shell. A per-call ``timeout`` is passed on
    (the environment's ``bash_timeout`` caps it).
    """

    def __init__(self, shell: Shell, cwd: str = WORKDIR) -> None:
        from pydantic import BaseModel

        class Config(BaseModel):
            cwd: str = WORKDIR

        self.shell = shell
        self.config = Config(cwd=cwd)

    def execute(self, action: dict[str, Any], cwd: str = "", *, timeout: int | None = None
                ) -> dict[str, Any]:
        command = str(action.get("command", ""))
        where = cwd or self.config.cwd
        result = self.shell.run(f"cd {shlex.quote(where)} && {command}" if where else command,
                                timeout)
        output: dict[str, Any] = {"output": result.output, "returncode": result.exit_code,
                                  "exception_info": ""}
        if result.timed_out:
            output["exception_info"] = "the command timed out and was killed"
        self._check_finished(output)
        return output

    def _check_finished(self, output: dict[str, Any]) -> None:
        # the same rule as mini-swe-agent's own environments: the submit line, then exit 0
        from minisweagent.exceptions import Submitted

        lines = output["output"].lstrip().splitlines(keepends=True)
        if lines and lines[0].strip() == SUBMIT_LINE and output["returncode"] == 0:
            submission = "".join(lines[1:])
            raise Submitted({"role": "exit", "content": submission,
                             "extra": {"exit_status": "Submitted", "submission": submission}})

    def get_template_vars(self, **kwargs: Any) -> dict[str, Any]:
        return {**self.config.model_dump(), **platform.uname()._asdict(), **kwargs}

    def serialize(self) -> dict[str, Any]:
        return {"info": {"config": {
            "environment": self.config.model_dump(mode="json"),
            "environment_type": f"{type(self).__module__}.{type(self).__name__}"}}}


def load_config(spec: str = "swebench.yaml") -> dict[str, Any]:
    """A mini-swe-agent config by file name (its built-in ones included) or path."""
    from minisweagent.config import get_config_from_spec

    return dict(get_config_from_spec(spec))


def play(task: str, shell: Shell, base_url: str, model: str, api_key: str = "",
         config: dict[str, Any] | None = None, step_limit: int | None = None,
         output_path: str | Path | None = None) -> dict[str, Any]:
    """Runs mini-swe-agent's ``DefaultAgent`` on ``task`` until it submits or stops."""
    import litellm
    from minisweagent.agents.default import DefaultAgent
    from minisweagent.models.litellm_model import LitellmModel

    litellm.suppress_debug_info = True  # no "Provider List" banner for unpriced local models

    config = config if config is not None else load_config()
    model_config = dict(config.get("model") or {})
    model_config.pop("model_name", None)
    model_config.pop("model_class", None)
    # litellm's "openai/" provider speaks the OpenAI API to any base URL
    kwargs = {**(model_config.pop("model_kwargs", None) or {}),
              "api_base": base_url, "api_key": api_key or "none"}
    lm = LitellmModel(model_name=f"openai/{model}", model_kwargs=kwargs,
                      cost_tracking="ignore_errors", **model_config)
    env = RepogymEnvironment(shell, cwd=str((config.get("environment") or {}).get("cwd")
                                            or WORKDIR))
    agent_config = dict(config.get("agent") or {})
    agent_config.pop("mode", None)  # interactive agents only
    if step_limit is not None:
        agent_config["step_limit"] = step_limit
    if output_path is not None:
        agent_config["output_path"] = Path(output_path)
    agent = DefaultAgent(lm, env, **agent_config)
    return agent.run(task)


def run_mini_swe_agent(env: gym.Env[Any, Any], base_url: str, model: str, task: str | None = None,
                       **options: Any) -> dict[str, Any]:
    """Plays the episode ``env`` was just reset into (it does not submit)."""
    if task is None:
        current = getattr(env.unwrapped, "task", None)
        if current is None:
            raise ValueError("reset the environment first, or pass task=...")
        task = current.problem_statement
    return play(task, EnvShell(env), base_url, model, **options)


class MiniSweAgentHarness:
    """``harness:mini-swe-agent`` for ``repogym eval``: a gateway in front of ``base_url``, one
    session per episode, and mini-swe-agent playing through it."""

    def __init__(self, model: str = "", base_url: str = "", api_key: str = "",
                 config: str = "swebench.yaml", step_limit: int | None = None,
                 token_ids: bool = False, timeout: float = 600.0, record_dir: str = "",
                 tasks: dict[str, Any] | None = None) -> None:
        model = model or settings.LLM_MODEL.get()
        base_url = base_url or os.environ.get("OPENAI_BASE_URL", "")
        if not model or not base_url:
            raise ValueError("harness:mini-swe-agent needs --agent-option model=NAME and "
                             "--agent-option base_url=http://HOST:PORT/v1 (or REPOGYM_LLM_MODEL "
                             "and OPENAI_BASE_URL)")
        self.model_name, self.upstream = model, base_url
        self.api_key = api_key or os.environ.get("OPENAI_API_KEY", "")
        self.config = load_config(config)
        self.step_limit, self.token_ids, self.timeout = step_limit, token_ids, timeout
        self.record_dir = record_dir
        self.agent = HarnessAgent(self, tasks)

    # the Agent protocol, delegated
    def reset(self, obs: str, info: dict[str, Any]) -> None:
        self.agent.reset(obs, info)

    def act(self, obs: str, info: dict[str, Any]) -> Any:
        action = self.agent.act(obs, info)
        self.stop_reason = self.agent.stop_reason
        return action

    def close(self) -> None:
        self.agent.close()

    # the Harness protocol
    def play(self, task: str, shell: Shell, info: dict[str, Any]) -> None:
        gateway = shared_gateway(self.upstream, self.record_dir or _default_dir(),
                                 self.timeout, self.token_ids)
        record = info.get("record")
        if record:  # the calls go beside the episode's own record, under the same name
            path = Path(record)
            url = gateway.session_url(path.name.removesuffix(".jsonl"), path.parent)
        else:
            url = gateway.session_url(f"{info.get('task_id', 'episode')}-{uuid.uuid4().hex[:8]}")
        play(task, shell, url, self.model_name, self.api_key, self.config, self.step_limit)


_GATEWAYS: dict[tuple[str, str, float, bool], Any] = {}
_GATEWAYS_LOCK = threading.Lock()


def shared_gateway(upstream: str, record_dir: str, timeout: float, token_ids: bool) -> Any:
    """One gateway per process and upstream: eval workers share it (sessions keep them apart)."""
    key = (upstream, record_dir, timeout, token_ids)
    with _GATEWAYS_LOCK:
        if key not in _GATEWAYS:
            _GATEWAYS[key] = Gateway(upstream, record_dir, timeout=timeout,
                                     token_ids=token_ids).start()
        return _GATEWAYS[key]


def _default_dir() -> str:
    return str(Path(settings.CALLS_DIR.get()).resolve())


__all__ = ["CommandResult", "MiniSweAgentHarness", "RepogymEnvironment", "play",
           "run_mini_swe_agent"]
