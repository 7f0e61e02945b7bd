"""`repogym gateway`: the recording model gateway in the foreground.

    repogym gateway --upstream http://127.0.0.1:8000/v1 --record-dir runs/calls --port 8100

A harness then uses http://127.0.0.1:8100/s/EPISODE/v1 as its OpenAI base URL (any EPISODE id of
letters, digits, '.', '_', '-'); its calls go to runs/calls/EPISODE.calls.jsonl.

With no model at hand, a scripted one plays each task's gold solution as tool calls:

    repogym gateway --scripted gold --suite demo --port 8100
"""

from __future__ import annotations

import argparse
import os

from repogym.agents.gateway import GatewayConfig
from repogym.agents.gateway.gateway import serve_forever
from repogym.agents.gateway.scripted import SCRIPTS, ScriptedModel, ScriptedServer
from repogym.errors import UsageError
from repogym.scripts.output import progress
from repogym.suite import load_suite


def add_parser(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("gateway", help="OpenAI-compatible recording proxy, one base URL per "
                       "episode", description=__doc__,
                       formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--upstream", default=None, help="the backend's OpenAI base URL, e.g. "
                   "http://127.0.0.1:8000/v1 (or --scripted)")
    p.add_argument("--scripted", default=None, choices=SCRIPTS,
                   help="no backend: a scripted model behind the gateway; gold plays each "
                   "task's gold patch as tool calls (apply, then submit)")
    p.add_argument("--suite", default="demo",
                   help="with --scripted: the suite whose tasks it knows (default: demo)")
    p.add_argument("--record-dir", default="runs/calls", help="where the calls records go")
    p.add_argument("--host", default="127.0.0.1", help="address to listen on (default: "
                   "loopback only; 0.0.0.0 exposes the gateway to the network)")
    p.add_argument("--port", type=int, default=8100, help="port to listen on (default: 8100)")
    p.add_argument("--timeout", type=float, default=600.0,
                   help="seconds the upstream may take to connect or between two reads")
    p.add_argument("--api-key-env", default=None, metavar="VAR",
                   help="send the key in this environment variable upstream instead of the "
                   "harness's own Authorization header")
    p.add_argument("--token-ids", action="store_true",
                   help="ask the backend for token ids and logprobs (vLLM's return_token_ids "
                   "and logprobs) when the harness does not")
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    if (args.upstream is None) == (args.scripted is None):
        raise UsageError("give the backend with --upstream URL, or --scripted gold for a model "
                         "that plays the suite's gold solutions (one of the two)")
    if args.scripted:
        return _scripted(args)
    api_key = None
    if args.api_key_env:
        api_key = os.environ.get(args.api_key_env)
        if api_key is None:
            raise UsageError(f"--api-key-env {args.api_key_env}: ${args.api_key_env} is not set; "
                             "export it, or leave the flag out to pass the harness's own key")
    config = GatewayConfig(upstream=args.upstream, record_dir=args.record_dir,
                           timeout=args.timeout, api_key=api_key, token_ids=args.token_ids)
    host = f"[{args.host}]" if ":" in args.host else args.host
    progress(f"gateway to {args.upstream}: base URL http://{host}:{args.port}/s/EPISODE/v1, "
             f"calls in {os.path.abspath(args.record_dir)}/EPISODE.calls.jsonl")
    serve_forever(config, args.host, args.port)
    return 0


def _scripted(args: argparse.Namespace) -> int:
    model = ScriptedModel.from_name(args.scripted, load_suite(args.suite))  # every split
    with ScriptedServer(model) as upstream:
        config = GatewayConfig(upstream=upstream.base_url, record_dir=args.record_dir,
                               timeout=args.timeout, token_ids=args.token_ids)
        host = f"[{args.host}]" if ":" in args.host else args.host
        progress(f"gateway to the scripted model {args.scripted!r} ({len(model.tasks)} tasks of "
                 f"{args.suite}): base URL http://{host}:{args.port}/s/EPISODE/v1, calls in "
                 f"{os.path.abspath(args.record_dir)}/EPISODE.calls.jsonl")
        serve_forever(config, args.host, args.port)
    return 0
