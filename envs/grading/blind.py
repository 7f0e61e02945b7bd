"""The host's side of the disguise: hidden tests under other names, and decoys under theirs.

Code under test runs inside the test process and can rewrite what it reports. Canaries catch a
forgery that does not discriminate; this catches one aimed at the hidden tests:

- **the test run** names every test file under a new random name (``disguise.py`` copies it in
  the grading container, from the same words as the canaries' names), so no collected test has
  the id, file or module of a hidden test; the host maps the results back to the real ids
  (the parametrisation part of an id is the test's own and stays, so ids cut at a space still
  match). The canary goes in at a random place among the files.
- **the decoy run** follows, in a new process: each file that holds a hidden test is put back
  at its own path as a decoy, in which every hidden test runs and then fails and no other test
  is left. A decoy that passes, or that the run does not report, means the test process forged
  results for the hidden tests' ids, names or parameters: the run is invalid and flagged
  ``decoy``.

What this does not stop is code that knows this scheme and tells the two runs apart (by their
command lines, by what is on disk, by reading the tests' source): see the manual's docs/safety.md.
"""

from __future__ import annotations

import random
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from repogym.envs.grading.flags import Flag

FLAG = Flag.DECOY


@dataclass(frozen=True)
class Disguise:
    """What the grading container did: ``renamed`` maps each test file to its copy's path,
    ``decoys`` each file with hidden tests to its decoy's stored copy, ``expected`` each such
    file to the hidden tests (``A::b``) its own text defines."""

    renamed: dict[str, str] = field(default_factory=dict)
    decoys: dict[str, str] = field(default_factory=dict)
    expected: dict[str, tuple[str, ...]] = field(default_factory=dict)
    aliases: tuple[str, ...] = ()

    @classmethod
    def read(cls, data: Any) -> Disguise:
        """From the planter's report; raises ValueError with the container's reason."""
        if not isinstance(data, dict) or "error" in data:
            reason = data.get("error") if isinstance(data, dict) else data
            raise ValueError(f"the hidden tests could not be disguised: {reason}")
        return cls({str(k): str(v) for k, v in data.get("renamed", {}).items()},
                   {str(k): str(v) for k, v in data.get("decoys", {}).items()},
                   {str(k): tuple(map(str, v)) for k, v in data.get("expected", {}).items()},
                   tuple(map(str, data.get("aliases", []))))

    @property
    def back(self) -> dict[str, str]:
        return {new: old for old, new in self.renamed.items()}

    # --- the test run ----------------------------------------------------------------------

    def run_args(self, files: list[str], canary_args: list[str], rng: random.Random
                 ) -> list[str]:
        """The test run's files: each under its new name, in the order the task gives; the
        canary among them at a random place; the original paths ignored should the command's
        own paths reach them."""
        named = [self.renamed.get(f, f) for f in files]
        if canary_args:
            at = rng.randint(0, len(named))
            named[at:at] = canary_args
        return [*(f"--ignore={old}" for old in sorted(self.renamed)), *named]

    def strays(self, statuses: dict[str, str], named: list[str]) -> list[str]:
        """Results for tests at an original path, which the test run did not collect (unless
        the command itself names the file): printed or written by the code under test."""
        return sorted(n for n in statuses
                      if n.partition("::")[0] in self.renamed
                      and n.partition("::")[0] not in named)

    def unmask(self, statuses: dict[str, str]) -> dict[str, str]:
        """Statuses under the real ids. Anything collected at an original path (the command's
        own paths reached it despite ``--ignore``) is left out: only the copies count."""
        back = self.back
        out: dict[str, str] = {}
        for node, status in statuses.items():
            file, sep, rest = node.partition("::")
            if file in self.renamed:
                continue
            out[back.get(file, file) + sep + rest] = status
        return out

    # --- the decoy run ---------------------------------------------------------------------

    def decoy_args(self, rng: random.Random) -> list[str]:
        files = sorted(self.decoys)
        rng.shuffle(files)
        return files

    def decoy_problems(self, statuses: dict[str, str], not_collected: list[str]
                       ) -> list[str]:
        """Decoys that passed, or that the run did not report although their file collected
        (a file that failed to import or was skipped whole holds no decoy that passed)."""
        broken = {e.split("::")[0] for e in not_collected}
        out = []
        for path in sorted(self.decoys):
            for test in self.expected.get(path, ()):
                prefix = f"{path}::{test}"
                seen = {n: s for n, s in statuses.items()
                        if n == prefix or n.startswith(prefix + "[")}
                passed = sorted(n for n, s in seen.items() if s == "PASSED")
                if passed:
                    out.append(f"decoy {passed[0]} passed")
                elif not seen and path not in broken:
                    out.append(f"decoy {prefix} was not reported")
        return out

    @property
    def active(self) -> bool:
        return bool(self.decoys)


def planter_request(hidden: list[str], rng: random.Random, passing: Sequence[str] = (),
                    off: tuple[str, str] = ("", ""), sample_size: int = 0) -> dict[str, Any]:
    """What the planter needs to disguise the named test files: the decoys hold the
    FAIL_TO_PASS tests (``hidden``) and ``sample_size`` of the PASS_TO_PASS ones (``passing``),
    drawn at random for this grade (so a forgery by the names of the tests an agent's change
    broke meets decoys too); ``off``, the test run's variable (see ``env_off``)."""
    sample = rng.sample(list(passing), min(sample_size, len(passing)))
    return {"disguise": True, "hidden": [*hidden, *sample], "seed": rng.getrandbits(32),
            "off": list(off)}


def env_off(rng: random.Random) -> tuple[str, str]:
    """A variable, new for every grade, that the test run's environment holds and the decoy
    run's does not: with it, a decoy imported as a helper module is the original file."""
    return (f"PYTEST_RG_{rng.getrandbits(32):08X}", f"{rng.getrandbits(64):016x}")
