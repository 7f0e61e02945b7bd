"""Episode records as trajectories other tools read: Harbor's ATIF, and OpenAI chat messages.

An episode has the environment's record (``*.jsonl``: reset, each step, the verdict) and, when
its model calls went through the gateway, a calls record beside it (``*.calls.jsonl``). With
calls, the trajectory is the model's own view: the messages the harness sent, each reply with
its tool calls, token ids and logprobs, and the observations as the harness showed them. Without
(an in-process agent), it is the environment's view: each action as a tool call and each
observation as its result.

- ATIF (Agent Trajectory Interchange Format, ``ATIF-v1.5``): one JSON object; the reward,
  resolution and reward components go under ``final_metrics.extra``.
- OpenAI: ``{"messages": [...], "tools": [...]}``, one fine-tuning example per episode.
"""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any

from repogym.agents.gateway.calls import SUFFIX, read_calls
from repogym.envs.record import read_record
from repogym.envs.tools import TOOL_SCHEMAS
from repogym.errors import UsageError
from repogym.version import describe as repogym_version

ATIF_VERSION = "ATIF-v1.5"
FORMATS = ("atif", "openai")
_MESSAGE_KEYS = ("role", "content", "tool_calls", "tool_call_id", "name", "reasoning_content")


def load_episode(path: str | Path) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """(environment events, gateway calls) of one episode, from either of its two files."""
    path = Path(path)
    if path.name.endswith(SUFFIX):
        env_path = path.with_name(path.name[: -len(SUFFIX)] + ".jsonl")
        if not path.is_file():
            raise UsageError(f"{path} does not exist: give an episode's .jsonl record")
        return (read_record(env_path) if env_path.exists() else []), read_calls(path)
    calls_path = path.with_name(path.name.removesuffix(".jsonl") + SUFFIX)
    return read_record(path), read_calls(calls_path)


def convert(path: str | Path, fmt: str) -> dict[str, Any]:
    if fmt not in FORMATS:
        raise UsageError(f"format {fmt!r}: use one of {', '.join(FORMATS)}")
    events, calls = load_episode(path)
    if not events and not calls:
        raise UsageError(f"{path} holds no episode events and no model calls")
    return to_atif(events, calls) if fmt == "atif" else to_openai(events, calls)


# --- ATIF --------------------------------------------------------------------------------------


def to_atif(events: list[dict[str, Any]], calls: list[dict[str, Any]]) -> dict[str, Any]:
    reset = next((e for e in events if e.get("event") == "reset"), {})
    end = next((e for e in events if e.get("event") == "end"), None)
    answered = [c for c in calls if c.get("response")]
    steps = _steps_from_calls(answered) if answered else _steps_from_events(events)
    for n, step in enumerate(steps, 1):
        step["step_id"] = n
    model = (answered[0]["request"].get("model") if answered else None) or reset.get("model")
    tools = (answered[0]["request"].get("tools") if answered else None) or \
        (None if answered else TOOL_SCHEMAS)
    agent: dict[str, Any] = {"name": "repogym", "version": repogym_version()}
    if model:
        agent["model_name"] = model
    if tools:
        agent["tool_definitions"] = tools
    metrics = [s.get("metrics") or {} for s in steps]
    final: dict[str, Any] = {"total_steps": len(steps)}
    for key in ("prompt_tokens", "completion_tokens"):
        values = [m[key] for m in metrics if isinstance(m.get(key), int)]
        if values:
            final[f"total_{key}"] = sum(values)
    if end is not None:
        final["extra"] = {"reward": end.get("reward"), "reward_components":
                          end.get("reward_components"), "flags": end.get("flags"),
                          "truncation": end.get("truncation"), "env_steps": end.get("n_steps")}
    session = (calls[0].get("session") if calls else None) or reset.get("task_id") or "episode"
    return {"schema_version": ATIF_VERSION, "session_id": str(session), "agent": agent,
            "steps": steps, "final_metrics": final,
            "extra": {"task_id": reset.get("task_id"), "task_hash": reset.get("task_hash"),
                      "image": reset.get("image"), "failed_calls": len(calls) - len(answered)}}


def _steps_from_calls(calls: list[dict[str, Any]]) -> list[dict[str, Any]]:
    first = calls[0]["request"].get("messages") or []
    steps = [_plain_step(m) for m in first if m.get("role") in ("system", "user")]
    for i, call in enumerate(calls):
        message = _reply(call)
        step: dict[str, Any] = {"timestamp": _iso(call.get("started_at")), "source": "agent",
                                "message": _text(message.get("content"))}
        if call["request"].get("model"):
            step["model_name"] = call["request"]["model"]
        if message.get("reasoning_content"):
            step["reasoning_content"] = message["reasoning_content"]
        tool_calls = [_atif_call(c) for c in message.get("tool_calls") or []]
        if tool_calls:
            step["tool_calls"] = tool_calls
        if i + 1 < len(calls):  # what the harness showed the model next, up to its next turn
            results = _results_after(calls[i + 1]["request"].get("messages") or [], message)
            if results:
                step["observation"] = {"results": results}
        step["metrics"] = _metrics(call)
        steps.append(step)
    return steps


def _steps_from_events(events: list[dict[str, Any]]) -> list[dict[str, Any]]:
    steps: list[dict[str, Any]] = []
    for event in events:
        if event.get("event") == "reset":
            steps.append({"timestamp": _iso(event.get("time")), "source": "user",
                          "message": event.get("observation", "")})
        elif event.get("event") == "step":
            parsed, call_id = event.get("parsed"), f"call_{event.get('step')}"
            step: dict[str, Any] = {"timestamp": _iso(event.get("time")), "source": "agent",
                                    "message": "" if parsed else str(event.get("raw_action"))}
            result: dict[str, Any] = {"content": event.get("observation", "")}
            if parsed:
                step["tool_calls"] = [{"tool_call_id": call_id, "function_name": parsed["name"],
                                       "arguments": parsed.get("arguments") or {}}]
                result["source_call_id"] = call_id
            step["observation"] = {"results": [result]}
            steps.append(step)
    return steps


def _results_after(messages: list[dict[str, Any]], reply: dict[str, Any]) -> list[dict[str, Any]]:
    """The messages that follow ``reply`` in the next request (tool results, user turns)."""
    at = _last_index(messages, reply)
    results = []
    for m in messages[at + 1:] if at is not None else []:
        if m.get("role") == "assistant":
            break
        result: dict[str, Any] = {"content": _text(m.get("content"))}
        if m.get("tool_call_id"):
            result["source_call_id"] = m["tool_call_id"]
        results.append(result)
    return results


def _last_index(messages: list[dict[str, Any]], reply: dict[str, Any]) -> int | None:
    # a harness that keeps its history sends this reply back as its last assistant message
    for i in range(len(messages) - 1, -1, -1):
        if messages[i].get("role") == "assistant":
            return i
    return None


def _metrics(call: dict[str, Any]) -> dict[str, Any]:
    usage = call.get("usage") or {}
    metrics: dict[str, Any] = {}
    for key in ("prompt_tokens", "completion_tokens"):
        if isinstance(usage.get(key), int):
            metrics[key] = usage[key]
    cached = (usage.get("prompt_tokens_details") or {}).get("cached_tokens")
    if isinstance(cached, int):
        metrics["cached_tokens"] = cached
    for key in ("prompt_token_ids", "completion_token_ids", "logprobs"):
        if call.get(key) is not None:
            metrics[key] = call[key]
    metrics["extra"] = {"latency_s": call.get("latency_s"), "stream": call.get("stream")}
    return metrics


def _atif_call(call: dict[str, Any]) -> dict[str, Any]:
    function = call.get("function") or {}
    arguments = function.get("arguments")
    if isinstance(arguments, str):
        try:
            arguments = json.loads(arguments) if arguments.strip() else {}
        except json.JSONDecodeError:
            arguments = {"raw": arguments}  # ATIF wants an object; keep what the model wrote
    return {"tool_call_id": str(call.get("id") or ""), "function_name": function.get("name", ""),
            "arguments": arguments if isinstance(arguments, dict) else {"value": arguments}}


def _plain_step(message: dict[str, Any]) -> dict[str, Any]:
    return {"source": message["role"], "message": _text(message.get("content"))}


# --- OpenAI chat messages ---------------------------------------------------------------------


def to_openai(events: list[dict[str, Any]], calls: list[dict[str, Any]]) -> dict[str, Any]:
    answered = [c for c in calls if c.get("response")]
    if answered:
        last = answered[-1]
        sent = [_clean(m) for m in last["request"].get("messages") or []]
        example: dict[str, Any] = {"messages": [*sent, _clean(_reply(last))]}
        if last["request"].get("tools"):
            example["tools"] = last["request"]["tools"]
        return example
    messages: list[dict[str, Any]] = []
    for event in events:
        if event.get("event") == "reset":
            messages.append({"role": "user", "content": event.get("observation", "")})
        elif event.get("event") == "step":
            parsed, call_id = event.get("parsed"), f"call_{event.get('step')}"
            if parsed:
                messages.append({"role": "assistant", "content": None, "tool_calls": [
                    {"id": call_id, "type": "function", "function": {
                        "name": parsed["name"],
                        "arguments": json.dumps(parsed.get("arguments") or {})}}]})
                messages.append({"role": "tool", "tool_call_id": call_id,
                                 "content": event.get("observation", "")})
            else:
                messages.append({"role": "assistant", "content": str(event.get("raw_action"))})
                messages.append({"role": "user", "content": event.get("observation", "")})
    return {"messages": messages, "tools": TOOL_SCHEMAS}


def _clean(message: dict[str, Any]) -> dict[str, Any]:
    return {k: message[k] for k in _MESSAGE_KEYS if message.get(k) is not None or k == "content"}


# --- helpers -----------------------------------------------------------------------------------


def _reply(call: dict[str, Any]) -> dict[str, Any]:
    return dict(((call.get("response") or {}).get("choices") or [{}])[0].get("message") or {})


def _text(content: Any) -> str:
    if content is None:
        return ""
    if isinstance(content, list):  # content parts
        return "".join(str(p.get("text", "")) for p in content if isinstance(p, dict))
    return str(content)


def _iso(stamp: Any) -> str | None:
    if not isinstance(stamp, (int, float)):
        return None
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(stamp))


def export_run(run_dir: str | Path, fmt: str) -> list[Path]:
    """Writes ``RUN/trajectories/<record>.<fmt>.json`` for every episode record of an eval run."""
    run_dir = Path(run_dir)
    out = run_dir / "trajectories"
    out.mkdir(exist_ok=True)
    written = []
    for record in sorted((run_dir / "records").glob("*.jsonl")):
        if record.name.endswith(SUFFIX):
            continue
        target = out / f"{record.name.removesuffix('.jsonl')}.{fmt}.json"
        target.write_text(json.dumps(convert(record, fmt), indent=1) + "\n")
        written.append(target)
    return written
