"""`repogym serve`: the environment over OpenEnv's protocol (HTTP and WebSocket).

    REPOGYM_TOKEN=secret repogym serve --suite demo --port 8000

Clients connect with OpenEnv's client to http://repogym:TOKEN@HOST:PORT (or send
`Authorization: Bearer TOKEN`); each WebSocket session is one environment with its own container.
"""

from __future__ import annotations

import argparse

from repogym import settings
from repogym.envs.curriculum import parse
from repogym.errors import UsageError
from repogym.scripts.output import progress
from repogym.suite import load_suite


def add_parser(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("serve", help="serve the environment over OpenEnv's protocol",
                       description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--suite", default="demo", help="built-in suite name, .jsonl file or folder")
    p.add_argument("--split", default=None, help="the tasks of this split (default: train, as "
                   "for gym.make; all for every task)")
    p.add_argument("--port", type=int, default=8000, help="port to listen on (default: 8000)")
    p.add_argument("--host", default="127.0.0.1", help="address to listen on (default: "
                   "loopback only)")
    p.add_argument("--allow-remote", action="store_true",
                   help="required with a --host other than loopback: the server runs code in "
                   "containers for whoever holds the token")
    p.add_argument("--token", default=None, help="the shared token (default: $REPOGYM_TOKEN)")
    p.add_argument("--max-sessions", type=int, default=8, help="episodes at once")
    p.add_argument("--idle-timeout", type=float, default=300.0,
                   help="seconds without a message before a session and its container go")
    p.add_argument("--max-steps", type=int, default=50,
                   help="steps per episode before it is cut off (default: 50)")
    p.add_argument("--reward", default="binary",
                   choices=("binary", "pass_rate", "replication", "shaped"),
                   help="the reward function (default: binary)")
    p.add_argument("--sampler", default="uniform",
                   help="the task of a reset that names none: uniform, band:0.1-0.9, "
                   "difficulty:PACE, weights:FILE.json (docs/curricula.md)")
    p.add_argument("--stats", default=None,
                   help="task statistics file shared by every session (read if it exists)")
    p.add_argument("--failure-starts", type=int, default=0,
                   help="keep a snapshot K turns before the end of each failed episode, for "
                   "resets with start=failure (default: 0, none)")
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    import uvicorn

    # what serving loads, never `repogym serve --help`: openenv-core brings gradio, pandas and
    # MCP (thousands of modules, seconds), the gateway starlette and httpx
    from repogym.agents.gateway.gateway import bind, run_server  # starlette, httpx
    from repogym.envs.openenv.server import ServeConfig, build_app  # openenv-core

    if args.host not in ("127.0.0.1", "localhost", "::1") and not args.allow_remote:
        raise UsageError(f"--host {args.host} exposes the server beyond this machine; add "
                         "--allow-remote to mean it")
    token = args.token or settings.TOKEN.get()
    parse(args.sampler)  # a bad spec is bad input: it says the valid names before serving
    load_suite(args.suite, args.split or "train")  # a bad suite or split: now, not per session
    config = ServeConfig(suite=args.suite, split=args.split, token=token,
                         max_sessions=args.max_sessions, idle_timeout=args.idle_timeout,
                         env_kwargs={"max_steps": args.max_steps, "reward": args.reward,
                                     "sampler": args.sampler, "stats": args.stats,
                                     "failure_starts": args.failure_starts})
    sock = bind(args.host, args.port)
    progress(f"repogym serve: suite {args.suite} on http://{args.host}:{sock.getsockname()[1]} "
             f"(OpenEnv WebSocket at /ws, {args.max_sessions} sessions, idle timeout "
             f"{args.idle_timeout:g} s)")
    run_server(uvicorn.Config(build_app(config), log_level="info"), sock)
    return 0
