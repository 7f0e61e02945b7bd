"""Reward components and the reward functions built from them.

Components (all in ``info["reward_components"]``):

- ``resolved`` (0/1): every FAIL_TO_PASS test explicitly passed, every PASS_TO_PASS test kept
  passing, in a valid run.
- ``f2p_pass_rate``, ``p2p_pass_rate``: fractions of those lists (0 when the run is invalid).
- ``patch_applied`` (0/1), ``compiles`` (0/1: changed Python files compile and, when the agent
  changed a package, it still imports).
- ``tests_tampered``: how many changed paths were stripped as tampering.
- ``invalid`` (0/1): the run was invalid (canary, exit status, disagreeing reports, timeout).
- ``similarity`` (0..1, replication and synthetic tasks): see :func:`similarity`.
- ``agreement`` (0..1, replication tasks with recorded cases): the mean over the removed
  functions of the share of inputs on which the candidate does what the reference did (see
  :mod:`repogym.envs.grading.differential`); per-function values in ``info["grading"]``.
- ``n_steps``: steps the agent took.

Reward functions, chosen with ``gym.make(..., reward=NAME)`` or given as a callable over the
components: ``binary`` (resolved), ``pass_rate`` (F2P rate, zeroed by any P2P regression), and
``shaped`` = 0.1 patch_applied + 0.1 compiles + 0.5 f2p_pass_rate + 0.3 resolved
- 0.3 (1 - p2p_pass_rate) - 0.2 min(tests_tampered, 1), clipped to [-1, 1]; invalid runs get
the tampering penalty only. Where ``agreement`` is present, ``shaped`` splits the 0.5 between
0.25 f2p_pass_rate and 0.25 agreement. ``replication`` = 0.6 agreement + 0.4 f2p_pass_rate
- 0.3 (1 - p2p_pass_rate) - 0.2 min(tests_tampered, 1), clipped likewise (agreement falls back
to f2p_pass_rate on tasks without cases).
"""

from __future__ import annotations

import ast
import difflib
from collections.abc import Callable
from typing import Any

from repogym.envs.grading.grader import GradingReport

Components = dict[str, float]
RewardFn = Callable[[Components], float]

SHAPED_WEIGHTS = {
    "patch_applied": 0.1,
    "compiles": 0.1,
    "f2p_pass_rate": 0.5,
    "resolved": 0.3,
    "p2p_regression": -0.3,
    "tampering": -0.2,
}


def components(report: GradingReport, n_steps: int, similarity: float | None) -> Components:
    out: Components = {
        "resolved": float(report.resolved),
        "f2p_pass_rate": report.f2p_pass_rate,
        "p2p_pass_rate": report.p2p_pass_rate,
        "patch_applied": float(report.patch_applied and not report.empty_patch),
        "compiles": float(bool(report.compiles) and report.imports is not False),
        "tests_tampered": float(len(report.stripped)),
        "invalid": float(not report.valid),
        "n_steps": float(n_steps),
    }
    if similarity is not None:
        out["similarity"] = similarity
    if report.differential and report.differential.get("agreement") is not None:
        out["agreement"] = float(report.differential["agreement"])
    return out


def binary(c: Components) -> float:
    return c["resolved"]


def pass_rate(c: Components) -> float:
    return c["f2p_pass_rate"] if c["p2p_pass_rate"] >= 1.0 else 0.0


def shaped(c: Components) -> float:
    w = SHAPED_WEIGHTS
    penalty = w["tampering"] * min(c["tests_tampered"], 1.0)
    if c["invalid"]:
        return penalty
    # replication: half of the tests' weight goes to agreement with the reference
    f2p = c["f2p_pass_rate"] if "agreement" not in c else (c["f2p_pass_rate"] + c["agreement"]) / 2
    total = (w["patch_applied"] * c["patch_applied"] + w["compiles"] * c["compiles"]
             + w["f2p_pass_rate"] * f2p + w["resolved"] * c["resolved"]
             + w["p2p_regression"] * (1.0 - c["p2p_pass_rate"]) + penalty)
    return max(-1.0, min(1.0, total))


REPLICATION_WEIGHTS = {"agreement": 0.6, "f2p_pass_rate": 0.4, "p2p_regression": -0.3,
                       "tampering": -0.2}


def replication(c: Components) -> float:
    """Dense credit for re-implementing removed code: agreement with the reference on its
    recorded inputs, and the tests the removal broke."""
    w = REPLICATION_WEIGHTS
    penalty = w["tampering"] * min(c["tests_tampered"], 1.0)
    if c["invalid"]:
        return penalty
    total = (w["agreement"] * c.get("agreement", c["f2p_pass_rate"])
             + w["f2p_pass_rate"] * c["f2p_pass_rate"]
             + w["p2p_regression"] * (1.0 - c["p2p_pass_rate"]) + penalty)
    return max(-1.0, min(1.0, total))


REWARDS: dict[str, RewardFn] = {"binary": binary, "pass_rate": pass_rate, "shaped": shaped,
                                "replication": replication}


def reward_fn(reward: str | RewardFn) -> RewardFn:
    if callable(reward):
        return reward
    if reward not in REWARDS:
        raise ValueError(
            f"reward={reward!r} is unknown; use one of {sorted(REWARDS)} or a callable")
    return REWARDS[reward]


def similarity(reference: str, candidate: str | None) -> float:
    """How close the agent's function is to the reference, in [0, 1].

    Both are parsed and unparsed (so formatting and comments do not count), docstrings are
    dropped, and the score is difflib's ratio over the resulting token sequences. A missing or
    unparsable candidate scores 0.
    """
    ref, cand = _normalised_tokens(reference), _normalised_tokens(candidate or "")
    if not ref or not cand:
        return 0.0
    return round(difflib.SequenceMatcher(None, ref, cand, autojunk=False).ratio(), 4)


def _normalised_tokens(source: str) -> list[str]:
    try:
        tree = ast.parse(_dedent(source))
    except SyntaxError:
        return []
    for node in ast.walk(tree):
        body = getattr(node, "body", None)
        first = body[0] if isinstance(body, list) and body else None
        if (isinstance(first, ast.Expr) and isinstance(first.value, ast.Constant)
                and isinstance(first.value.value, str)):
            node.body = body[1:] or [ast.Pass()]  # type: ignore[attr-defined,index]
    return ast.unparse(tree).split()


def _dedent(source: str) -> str:
    import textwrap

    return textwrap.dedent(source)


def function_source(module_text: str, qualname: str) -> str | None:
    """The source of ``qualname`` (``f``, ``Cls.method`` or ``Cls``) in a module, if found."""
    try:
        tree = ast.parse(module_text)
    except SyntaxError:
        return None
    scope: list[Any] = tree.body
    node: Any = None
    for part in qualname.split("."):
        node = next((n for n in scope if getattr(n, "name", None) == part), None)
        if node is None:
            return None
        scope = getattr(node, "body", [])
    return ast.get_source_segment(module_text, node)
