"""Benchmark of the curriculum: GRPO groups that teach under ``band`` against ``uniform``.

    python -m repogym.scripts.bench_curriculum --suites demo demo-langs --groups 40

Scripted agents with a known success probability per task play the demo suites in real
containers: a share of the tasks is always solved (the gold patch, played through the tools),
a share never (an empty submission), the rest with probability 0.3, 0.5 or 0.7. Each sampler
draws GRPO groups (``--group-size`` episodes of one task, ``--groups-per-update`` groups drawn
at once from the statistics as they stand) and runs them on ``--workers`` envs that record to
the sampler's own statistics file, through ``gym.make(sampler=..., stats=...)`` as a trainer
does. Both samplers run in one invocation, one after the other, with the same agents.

Prints one JSON object (also written to ``OUT/result.json``): per sampler, the share of groups
whose rewards are not all equal, and the ratio of ``band``'s to ``uniform``'s; and per task
whether its recorded success rate agrees with its known probability (Wilson interval). Last,
what ``failure_starts`` costs: the median step with a snapshot after every step against the
same step without, interleaved (``--cost-rounds``, 0 to skip).
"""

from __future__ import annotations

import argparse
import json
import math
import os
import queue
import random
import statistics
import sys
import time
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import gymnasium as gym

import repogym  # noqa: F401 - registers the env
from repogym.agents.agent import ScriptedAgent
from repogym.agents.gold import GoldAgent
from repogym.envs.curriculum import parse
from repogym.envs.curriculum.draws import draw
from repogym.envs.curriculum.stats import store_for
from repogym.schema import Task
from repogym.suite import load_suite

BETWEEN = (0.3, 0.5, 0.7)
Z = {0.95: 1.959964, 0.99: 2.575829}


def known_probabilities(tasks: Sequence[Task], always: float, never: float, seed: int
                        ) -> dict[str, float]:
    """Each task's success probability: a shuffled ``always`` share 1, ``never`` share 0,
    the rest 0.3, 0.5, 0.7 in turn."""
    ids = sorted(t.instance_id for t in tasks)
    random.Random(seed).shuffle(ids)
    n_always, n_never = round(always * len(ids)), round(never * len(ids))
    probs = dict.fromkeys(ids[:n_always], 1.0)
    probs.update(dict.fromkeys(ids[n_always:n_always + n_never], 0.0))
    for i, task_id in enumerate(ids[n_always + n_never:]):
        probs[task_id] = BETWEEN[i % len(BETWEEN)]
    return probs


class KnownAgent(ScriptedAgent):
    """Plays the gold patch with the task's known probability, else submits nothing."""

    def __init__(self, tasks: Sequence[Task], probs: dict[str, float], rng: random.Random):
        super().__init__()
        self.gold, self.probs, self.rng = GoldAgent(tasks), probs, rng

    def script(self, obs: str, info: dict[str, Any]) -> list[Any]:
        if self.rng.random() < self.probs[str(info["task_id"])]:
            return self.gold.script(obs, info)
        return []


def episode(env: gym.Env[Any, Any], agent: KnownAgent, options: dict[str, Any]) -> float:
    obs, info = env.reset(options=options)
    agent.reset(obs, info)
    while True:
        obs, reward, term, trunc, _ = env.step(agent.act(obs, info))
        if term or trunc:
            return float(reward)


def wilson(successes: int, n: int, z: float) -> tuple[float, float]:
    if n == 0:
        return 0.0, 1.0
    p = successes / n
    centre = (p + z * z / (2 * n)) / (1 + z * z / n)
    half = z * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n)) / (1 + z * z / n)
    return max(0.0, centre - half), min(1.0, centre + half)


def run_sampler(spec: str, tasks: list[Task], probs: dict[str, float], args: argparse.Namespace,
                out: Path) -> dict[str, Any]:
    stats_file = out / spec.split(":")[0] / "task_stats.json"
    stats_file.unlink(missing_ok=True)
    curriculum, store = parse(spec), store_for(stats_file)
    envs: queue.Queue[tuple[gym.Env[Any, Any], KnownAgent]] = queue.Queue()
    for w in range(args.workers):
        envs.put((gym.make("repogym/SWE-v0", tasks=tasks, sampler=spec, stats=stats_file,
                           run_id=f"benchcur-{os.getpid()}"),
                  KnownAgent(tasks, probs, random.Random(args.seed * 100 + w))))
    rng = random.Random(args.seed)
    groups: list[dict[str, Any]] = []
    start = time.monotonic()

    def play(options: dict[str, Any]) -> float:
        env, agent = envs.get()
        try:
            return episode(env, agent, options)
        finally:
            envs.put((env, agent))

    try:
        with ThreadPoolExecutor(args.workers) as pool:
            while len(groups) < args.groups:
                n = min(args.groups_per_update, args.groups - len(groups))
                drawn = [draw(tasks, curriculum, store, rng) for _ in range(n)]
                jobs = [pool.submit(play, d.options()) for d in drawn
                        for _ in range(args.group_size)]
                rewards = [j.result() for j in jobs]
                for i, d in enumerate(drawn):
                    mine = rewards[i * args.group_size:(i + 1) * args.group_size]
                    groups.append({"task_id": d.task.instance_id, "rewards": mine})
                print(f"{spec}: {len(groups)}/{args.groups} groups", file=sys.stderr, flush=True)
    finally:
        while not envs.empty():
            envs.get()[0].close()
    varied = sum(max(g["rewards"]) != min(g["rewards"]) for g in groups)
    return {"sampler": spec, "groups": len(groups), "episodes": len(groups) * args.group_size,
            "groups_with_variance": varied / len(groups), "seconds": time.monotonic() - start,
            "stats_file": str(stats_file), "group_log": groups,
            "agreement": agreement(store.table().tasks, probs)}


def agreement(stats: dict[str, Any], probs: dict[str, float]) -> dict[str, Any]:
    rows, inside = [], {0.95: 0, 0.99: 0}
    for task_id, s in sorted(stats.items()):
        row = {"task_id": task_id, "known": probs[task_id], "attempts": s.attempts,
               "successes": s.successes}
        for level, z in Z.items():
            lo, hi = wilson(s.successes, s.attempts, z)
            ok = lo - 1e-9 <= probs[task_id] <= hi + 1e-9
            row[f"ci{int(level * 100)}"] = [round(lo, 3), round(hi, 3), ok]
            inside[level] += ok
        rows.append(row)
    return {"tasks": len(rows), "inside_95": inside[0.95], "inside_99": inside[0.99],
            "rows": rows}


def step_cost(task_id: str, rounds: int, steps: int = 8) -> dict[str, Any]:
    """Median seconds of a bash step with ``failure_starts=2`` and without, interleaved."""
    envs = {k: gym.make("repogym/SWE-v0", suite="demo", split="all", failure_starts=k,
                        run_id=f"benchcur-{os.getpid()}") for k in (0, 2)}
    times: dict[int, list[float]] = {0: [], 2: []}
    try:
        for _ in range(rounds):
            for k, env in envs.items():
                env.reset(options={"task_id": task_id})
                for i in range(steps):
                    t0 = time.monotonic()
                    env.step({"tool": "bash", "command": f"echo {i} >> notes.txt"})
                    times[k].append(time.monotonic() - t0)
    finally:
        for env in envs.values():
            env.close()
    plain, kept = statistics.median(times[0]), statistics.median(times[2])
    return {"task_id": task_id, "steps": len(times[0]), "plain_step_s": round(plain, 4),
            "failure_starts_step_s": round(kept, 4), "ratio": round(kept / plain, 1)}


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--suites", nargs="+", default=["demo", "demo-langs"])
    p.add_argument("--samplers", nargs="+", default=["uniform", "band:0.1-0.9"])
    p.add_argument("--groups", type=int, default=40, help="groups per sampler")
    p.add_argument("--group-size", type=int, default=4)
    p.add_argument("--groups-per-update", type=int, default=2)
    p.add_argument("--workers", type=int, default=4)
    p.add_argument("--always", type=float, default=0.4, help="share of tasks always solved")
    p.add_argument("--never", type=float, default=0.4, help="share of tasks never solved")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--cost-rounds", type=int, default=3,
                   help="rounds of the failure_starts step cost (0: not measured)")
    p.add_argument("--out", default="runs/bench-curriculum")
    args = p.parse_args(argv)
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    tasks = [t for suite in args.suites for t in load_suite(suite, "all")]
    probs = known_probabilities(tasks, args.always, args.never, args.seed)
    results = [run_sampler(spec, tasks, probs, args, out) for spec in args.samplers]
    base = results[0]["groups_with_variance"]
    cost = step_cost(tasks[0].instance_id, args.cost_rounds) if args.cost_rounds else None
    summary = {
        "suites": args.suites, "tasks": len(tasks), "known": probs,
        "config": {k: v for k, v in vars(args).items()},
        "samplers": {r["sampler"]: {k: v for k, v in r.items() if k != "group_log"}
                     for r in results},
        "ratio_to_first": {r["sampler"]: (r["groups_with_variance"] / base if base else None)
                           for r in results[1:]},
        "failure_starts_cost": cost,
    }
    (out / "result.json").write_text(json.dumps({**summary, "groups": {
        r["sampler"]: r["group_log"] for r in results}}, indent=1))
    for r in results:
        a = r["agreement"]
        print(f"{r['sampler']:>14}: {r['groups_with_variance']:.3f} of {r['groups']} groups "
              f"vary; {r['episodes']} episodes in {r['seconds']:.0f} s; known rates inside "
              f"95% CI {a['inside_95']}/{a['tasks']}, 99% {a['inside_99']}/{a['tasks']}",
              file=sys.stderr)
    print(json.dumps({"ratio_to_first": summary["ratio_to_first"],
                      "failure_starts_cost": cost, "samplers": {
        name: {k: v for k, v in r.items() if k != "agreement"}
        | {"inside_95": r["agreement"]["inside_95"], "inside_99": r["agreement"]["inside_99"],
           "tasks_seen": r["agreement"]["tasks"]}
        for name, r in summary["samplers"].items()}}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
