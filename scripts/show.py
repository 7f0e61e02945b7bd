"""`repogym show FILE`: prints an episode record readably."""

from __future__ import annotations

import argparse
import json

from repogym.envs.record import read_record


def add_parser(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("show", help="print an episode record readably")
    p.add_argument("file", help="a .jsonl episode record")
    p.add_argument("--width", type=int, default=2000, help="characters shown per observation")
    p.add_argument("--format", default="text", choices=["text", "atif", "openai"],
                   help="text (default), atif (Harbor's trajectory format) or openai (chat "
                   "messages with tool calls, for fine-tuning); both JSON on standard output")
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    if args.format != "text":
        # the gateway's package (starlette, uvicorn: the harness extra) only to convert
        from repogym.agents.trajectory import convert

        print(json.dumps(convert(args.file, args.format), indent=1))
        return 0
    for event in read_record(args.file):
        kind = event["event"]
        if kind == "reset":
            task, image = event["task_id"], event.get("image")
            print(f"=== {task} (task {event.get('task_hash')}, image {image})")
            fork = event.get("fork")
            if fork:  # a branch: its first steps are the original episode's, copied
                print(f"fork: from snapshot {fork.get('snapshot')} at step {fork.get('step')} "
                      f"of {fork.get('parent_record') or 'an unrecorded episode'}"
                      + (f" (itself a branch of {fork['parent_snapshot']})"
                         if fork.get("parent_snapshot") else ""))
            print(_cut(event["observation"], args.width))
        elif kind == "step":
            parsed = event.get("parsed") or {}
            call = (
                f"{parsed.get('name')} {json.dumps(parsed.get('arguments'))[:300]}"
                if parsed
                else f"(unparsed) {event['raw_action'][:200]!r}"
            )
            err = (event.get("info") or {}).get("action_error")
            print(f"\n--- step {event['step']} ({event.get('seconds', 0):.2f} s): {call}")
            if err:  # the observation says what was wrong: mark it, do not repeat it
                print("[action error]" + ("" if err.splitlines()[0] in event["observation"]
                                          else f" {err.splitlines()[0]}"))
            print(_cut(event["observation"], args.width))
        elif kind == "end":
            print(
                f"\n=== reward {event['reward']}  steps {event['n_steps']}  "
                f"flags {event.get('flags') or []}"
            )
            for key, value in (event.get("reward_components") or {}).items():
                print(f"  {key:16} {value}")
            if event.get("truncation"):
                print(f"  truncated: {event['truncation']}")
    return 0


def _cut(text: str, width: int) -> str:
    return text if len(text) <= width else text[:width] + f"\n[... {len(text) - width} more]"
