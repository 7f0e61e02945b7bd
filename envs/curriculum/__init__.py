"""Curricula: which task comes next, and where an episode starts.

``gym.make("repogym/SWE-v0", sampler=SPEC, stats=FILE, failure_starts=K)``. ``SPEC`` is a name
from :data:`SAMPLERS` with an argument and options, ``NAME[:ARG][,KEY=VALUE...]``:

- ``uniform``: every task alike (the default; the same draws as an env without a sampler).
- ``band:LOW-HIGH`` (``band:0.1-0.9``): tasks whose recent success rate lies in the band, with
  ``explore=`` (0.1), ``min=`` (2), ``window=`` (8) and ``stale=`` (0: twice the tasks).
- ``difficulty:PACE`` (``difficulty:20``): easy to hard by features of the task, one more
  task every PACE ended episodes; ``start=`` (0.25) is the share drawn from at first.
- ``weights:FILE.json``: ``{"task_id": weight}``; in Python a dict does the same.

Every spec also takes ``failure=P``: the share of episodes that start from a failed episode's
snapshot of the drawn task, when one is kept (see :mod:`repogym.envs.curriculum.failures`).
A :class:`~repogym.envs.curriculum.sampler.Sampler` object of one's own is taken as it is.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass, fields
from typing import Any

from repogym.envs.curriculum.band import BandSampler
from repogym.envs.curriculum.difficulty import DifficultySampler
from repogym.envs.curriculum.sampler import Sampler
from repogym.envs.curriculum.stats import EpisodeResult, StatsStore, StatsTable, TaskStats
from repogym.envs.curriculum.uniform import UniformSampler
from repogym.envs.curriculum.weights import WeightsSampler


@dataclass(frozen=True)
class Curriculum:
    """A sampler and the share of episodes that start from failures."""

    sampler: Sampler
    failure: float = 0.0
    spec: str = "uniform"

    def __post_init__(self) -> None:
        if not 0.0 <= self.failure <= 1.0:
            raise ValueError(f"failure={self.failure}: give a share between 0 and 1")

    @property
    def uniform(self) -> bool:
        return isinstance(self.sampler, UniformSampler)


def _number(name: str, text: str, kind: Callable[[str], Any] = float) -> Any:
    try:
        return kind(text)
    except ValueError:
        raise ValueError(f"{name}={text!r} is not a{'n integer' if kind is int else ' number'}"
                         ) from None


def _options(name: str, given: dict[str, str], known: dict[str, tuple[str, Any]]
             ) -> dict[str, Any]:
    """``given`` (spec keys to text) as keyword arguments; ``known`` maps a spec key to its
    argument's name and type."""
    unknown = sorted(set(given) - set(known))
    if unknown:
        raise ValueError(f"sampler {name!r} has no option {unknown[0]!r}; its options: "
                         f"{', '.join(sorted(known)) or 'none'}, and failure=P")
    return {known[k][0]: _number(k, v, known[k][1]) for k, v in given.items()}


def _uniform(arg: str | None, options: dict[str, str]) -> Sampler:
    if arg:
        raise ValueError(f"uniform takes no argument (got {arg!r})")
    _options("uniform", options, {})
    return UniformSampler()


def _band(arg: str | None, options: dict[str, str]) -> Sampler:
    kwargs = _options("band", options, {"explore": ("explore", float),
                                        "min": ("min_episodes", int),
                                        "window": ("window", int), "stale": ("stale", int)})
    if arg:
        low, sep, high = arg.partition("-")
        if not sep:
            raise ValueError(f"band:{arg}: give the band as LOW-HIGH, e.g. band:0.1-0.9")
        kwargs.update(low=_number("low", low), high=_number("high", high))
    return BandSampler(**kwargs)


def _difficulty(arg: str | None, options: dict[str, str]) -> Sampler:
    kwargs = _options("difficulty", options, {"pace": ("pace", int), "start": ("start", float)})
    if arg:
        kwargs["pace"] = _number("pace", arg, int)
    return DifficultySampler(**kwargs)


def _weights(arg: str | None, options: dict[str, str]) -> Sampler:
    if not arg:
        raise ValueError("weights needs a file: weights:FILE.json holding {\"task_id\": w}")
    _options("weights", options, {})
    return WeightsSampler.from_file(arg)


SAMPLERS: dict[str, Callable[[str | None, dict[str, str]], Sampler]] = {
    "uniform": _uniform, "band": _band, "difficulty": _difficulty, "weights": _weights}


def parse(spec: str | Mapping[str, float] | Sampler | Curriculum | None) -> Curriculum:
    """A :class:`Curriculum` from what ``gym.make(sampler=...)`` got; an unknown name raises
    ``ValueError`` naming the valid ones."""
    if spec is None:
        return Curriculum(UniformSampler())
    if isinstance(spec, Curriculum):
        return spec
    if isinstance(spec, Mapping):
        return Curriculum(WeightsSampler(spec), spec="weights")
    if not isinstance(spec, str):
        if not isinstance(spec, Sampler):
            raise ValueError(f"sampler={spec!r}: give a name ({', '.join(SAMPLERS)}), a dict "
                             "of task weights, or an object with pick(tasks, stats, rng)")
        return Curriculum(spec, spec=repr(spec))
    text = spec.strip()
    name = re.split(r"[:,]", text, maxsplit=1)[0]
    rest = text[len(name) + 1:]  # after the ':' (an argument, options) or ',' (options)
    if name not in SAMPLERS:
        raise ValueError(f"sampler={spec!r}: unknown name {name!r}; use one of "
                         f"{', '.join(SAMPLERS)} (e.g. band:0.1-0.9)")
    arg, options = None, {}
    for part in rest.split(",") if rest else []:
        key, eq, value = part.partition("=")
        if eq:
            options[key.strip()] = value.strip()
        elif arg is None and part.strip():
            arg = part.strip()
        elif part.strip():
            raise ValueError(f"sampler={spec!r}: more than one argument ({arg!r}, {part!r})")
    failure = _number("failure", options.pop("failure", "0"))
    return Curriculum(SAMPLERS[name](arg, options), failure, text)


def check(curriculum: Curriculum, tasks: list[Any]) -> None:
    """Lets the sampler refuse the env's tasks (weights naming tasks it does not have)."""
    if not tasks:
        return
    checker = getattr(curriculum.sampler, "check", None)
    if callable(checker):
        checker(tasks)


def describe(sampler: Sampler) -> dict[str, Any]:
    """The sampler's settings, for records and run configs."""
    if hasattr(sampler, "__dataclass_fields__"):
        return {"name": type(sampler).__name__,
                **{f.name: getattr(sampler, f.name) for f in fields(sampler)  # type: ignore
                   if not f.name.startswith("_")}}
    return {"name": type(sampler).__name__}


__all__ = ["SAMPLERS", "BandSampler", "Curriculum", "DifficultySampler", "EpisodeResult",
           "Sampler", "StatsStore", "StatsTable", "TaskStats", "UniformSampler",
           "WeightsSampler", "check", "describe", "parse"]
