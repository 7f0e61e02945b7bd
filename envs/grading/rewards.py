"""Reward components and the reward functions built from them.

Components (all in ``info["reward_components"]``):

- ``resolved`` (0/1): every FAIL_TO_PASS test explicitly passed, every PASS_TO_PASS test kept
  passing, in a valid run.
- ``f2p_pass_rate``, ``p2p_pass_rate``: fractions of those lists (0 when the run is invalid).
- ``patch_applied`` (0/1), ``compiles`` (0/1: changed Python files compile and, when the agent
  changed a package, it still imports). Both are 0 when nothing of the agent's patch is kept
  (an empty patch, one that does not apply, or one whose every path was stripped): doing
  nothing earns nothing.
- ``tests_tampered``: how many changed paths were stripped as tampering.
- ``invalid`` (0/1): the run was invalid (canary, exit status, disagreeing reports, timeout).
- ``similarity`` (0..1, replication and synthetic tasks): see :func:`similarity`; 0 for the
  code the task starts from (a stub, the planted bug) and for an empty patch.
- ``agreement`` (0..1, replication tasks with recorded cases): the mean over the removed
  functions of the share of inputs on which the candidate does what the reference did (see
  :mod:`repogym.envs.grading.differential`); per-function values in ``info["grading"]``; 0
  for an empty patch.
  Other tasks with gold cases (``repogym tasks enrich``): the share of discriminating inputs
  (where the gold code and the base code differ) on which the candidate does what the gold
  code does.
- ``regression_agreement`` (0..1, tasks with gold cases): the same share over inputs where
  the gold code and the base code agree.
- ``n_steps``: steps the agent took.

Reward functions, chosen with ``gym.make(..., reward=NAME)`` or given as a callable over the
components: ``binary`` (resolved), ``pass_rate`` (F2P rate, zeroed by any P2P regression), and
``shaped`` = 0.1 patch_applied + 0.1 compiles + 0.5 f2p_pass_rate + 0.3 resolved
- 0.3 (1 - p2p_pass_rate) - 0.2 min(tests_tampered, 1), clipped to [-1, 1]; invalid runs get
the tampering penalty only. Where ``agreement`` is present, ``shaped`` splits the 0.5 between
0.25 f2p_pass_rate and 0.25 agreement. ``replication`` = 0.6 agreement + 0.4 f2p_pass_rate
- 0.3 (1 - p2p_pass_rate) - 0.2 min(tests_tampered, 1), clipped likewise (agreement falls back
to f2p_pass_rate on tasks without cases). ``dense`` = 0.5 agreement + 0.5 f2p_pass_rate
- 0.3 (1 - p2p_pass_rate) - 0.2 (1 - regression_agreement) - 0.2 min(tests_tampered, 1),
clipped likewise (without cases, agreement falls back to f2p_pass_rate and
regression_agreement to 1): the gold patch earns 1.0, the empty patch 0.0.
"""

from __future__ import annotations

import ast
import difflib
from collections.abc import Callable
from typing import Any

from repogym import syntax_lock
from repogym.envs.grading.report import GradingReport
from repogym.repo import read_at
from repogym.schema import Task

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
    acted = kept_change(report)
    out: Components = {
        "resolved": float(report.resolved),
        "f2p_pass_rate": report.f2p_pass_rate,
        "p2p_pass_rate": report.p2p_pass_rate,
        "patch_applied": float(acted),
        "compiles": float(acted and bool(report.compiles) and report.imports is not False),
        "tests_tampered": float(len(report.stripped)),
        "invalid": float(not report.valid),
        "n_steps": float(n_steps),
    }
    if similarity is not None:
        out["similarity"] = similarity if acted else 0.0
    if report.differential and report.differential.get("agreement") is not None:
        out["agreement"] = float(report.differential["agreement"]) if acted else 0.0
    if report.differential and report.differential.get("regression_agreement") is not None:
        out["regression_agreement"] = float(report.differential["regression_agreement"])
    return out


def kept_change(report: GradingReport) -> bool:
    """Whether anything of the agent's patch reached the tests: it applied, it was not empty,
    and not every path it touched was stripped as tampering."""
    if report.empty_patch or not report.patch_applied:
        return False
    return not report.changed or any(p not in report.stripped for p in report.changed)


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


DENSE_WEIGHTS = {"agreement": 0.5, "f2p_pass_rate": 0.5, "p2p_regression": -0.3,
                 "case_regression": -0.2, "tampering": -0.2}


def dense(c: Components) -> float:
    """Dense credit for any task: agreement with the gold code on the inputs where it differs
    from the base code, the F2P tests, and penalties for regressions (tests and cases)."""
    w = DENSE_WEIGHTS
    penalty = w["tampering"] * min(c["tests_tampered"], 1.0)
    if c["invalid"]:
        return penalty
    total = (w["agreement"] * c.get("agreement", c["f2p_pass_rate"])
             + w["f2p_pass_rate"] * c["f2p_pass_rate"]
             + w["p2p_regression"] * (1.0 - c["p2p_pass_rate"])
             + w["case_regression"] * (1.0 - c.get("regression_agreement", 1.0)) + penalty)
    return max(-1.0, min(1.0, total))


REWARDS: dict[str, RewardFn] = {"binary": binary, "pass_rate": pass_rate, "shaped": shaped,
                                "replication": replication, "dense": dense}


def reward_fn(reward: str | RewardFn) -> RewardFn:
    if callable(reward):
        return reward
    if reward not in REWARDS:
        raise ValueError(
            f"reward={reward!r} is unknown; use one of {sorted(REWARDS)} or a callable")
    return REWARDS[reward]


def similarity(reference: str, candidate: str | None, start: str | None = None) -> float:
    """How close the agent's function is to the reference, in [0, 1].

    Both are parsed and unparsed (so formatting and comments do not count), docstrings are
    dropped, and the closeness is difflib's ratio over the resulting token sequences. A missing
    or unparsable candidate scores 0. With ``start`` (the function the task begins with: a stub
    keeps the signature and so shares a third of the reference's tokens, a planted bug nearly
    all of them), the score is the share of the way from ``start`` to the reference that the
    candidate went: 0 for the starting code (or anything no closer), 1 for the reference.
    """
    ref, cand = _normalised_tokens(reference), _normalised_tokens(candidate or "")
    if not ref or not cand:
        return 0.0
    closeness = _ratio(ref, cand)
    begin = _normalised_tokens(start) if start is not None else []
    if not begin:
        return round(closeness, 4)
    if cand == begin:
        return 0.0
    floor = _ratio(ref, begin)
    if floor >= 1.0:  # the task starts at the reference: only the reference itself counts
        return 1.0 if cand == ref else 0.0
    return round(max(0.0, (closeness - floor) / (1.0 - floor)), 4)


def task_similarity(task: Task, candidate_file: str) -> float | None:
    """:func:`similarity` of the task's reference function in ``candidate_file`` (the agent's
    version of ``task.reference["file"]``), counted from the code the task starts with, which is
    read from the task's source on the host. None when the starting code cannot be found:
    closeness alone would reward doing nothing."""
    ref = task.reference or {}
    qualname = ref.get("qualname", "")
    base = read_at(task.source or "", task.base_commit, ref.get("file", ""))
    start = function_source(base, qualname) if base is not None else None
    if not ref.get("source") or start is None:
        return None
    return similarity(ref["source"], function_source(candidate_file, qualname), start=start)


def _ratio(a: list[str], b: list[str]) -> float:
    return difflib.SequenceMatcher(None, a, b, autojunk=False).ratio()


def _normalised_tokens(source: str) -> list[str]:
    try:
        tree = syntax_lock.parse(_dedent(source))
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
        tree = syntax_lock.parse(module_text)
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
