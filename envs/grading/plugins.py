"""The pytest plugins an image's environment installed, named on every run's command line.

Every test run starts with plugin autoload off (``PYTEST_DISABLE_PLUGIN_AUTOLOAD=1``): a plugin
the agent installs, or declares in an entry point of the repository, must not load. But the
plugins the environment itself installed are the project's: pytest-asyncio runs its async
tests (and declares ``asyncio_mode``, which blinker's ``filterwarnings = error`` turns into an
internal error when nobody declares it), pytest-mock gives ``mocker``, pytest-timeout reads
``timeout``. With autoload off none of them loaded: the tests that need them errored on both
sides of a change, and a project whose configuration names one could not run at all. So the
plugins that pytest would load on its own from the *image* (``pytest11`` entry points of its
installed distributions) are listed once per image, in a container fresh from it, and named
with ``-p`` on each run's command line:

- listed before anything is staged (the grader lists them before the agent's diff is
  applied; task creation's runs before the candidate's), and cached by the image's tag, which
  digests everything that decides the image;
- a plugin whose module lies in the repository (``/testbed``: the project's own plugin, code
  the agent can change) is left out, and so is one whose top-level module the agent's diff
  writes at the repository's root (:func:`unshadowed`), as are the plugins that rewrite
  pytest's terminal output (the results are also read from it);
- in the grader's runs, the plugins the configuration's ``addopts`` turns off (``-p
  no:randomly``) stay off: the harness drops ``addopts`` and keeps that choice (the planter
  reads it: ``plant.addopts_blocked``). Task creation's traced runs (the coverage map, the
  gold cases' tracer) name every plugin listed.
"""

from __future__ import annotations

import json
import threading
from typing import Any

# plugins that replace pytest's terminal report, which the grader also reads
OUTPUT_PLUGINS = frozenset({"pytest_sugar", "pytest_pretty", "pytest_rich", "pytest_emoji",
                            "pytest_instafail", "pytest_clarity"})
MARK = "__RG_PLUGINS="
# run by the environment's Python, 3.8 and later: (entry point name, module) of each pytest11
# entry point whose top-level module PathFinder finds outside /testbed (nothing is imported)
LIST = r"""
import json
from importlib import metadata
from importlib.machinery import PathFinder
found = []
for dist in metadata.distributions():
    try:
        points = [p for p in dist.entry_points if p.group == "pytest11"]
    except Exception:
        continue
    for point in points:
        module = point.value.split(":")[0].strip()
        spec = PathFinder.find_spec(module.split(".")[0])
        if spec is None:
            continue
        places = [spec.origin or "", *(spec.submodule_search_locations or [])]
        if any(p == "/testbed" or p.startswith("/testbed/") for p in places):
            continue
        found.append([point.name, module])
print("__RG_PLUGINS=" + json.dumps(sorted(map(list, set(map(tuple, found))))))
"""

_cache: dict[str, tuple[tuple[str, str], ...]] = {}
_lock = threading.Lock()


def installed(box: Any, image: str) -> tuple[tuple[str, str], ...]:
    """The (entry point name, module) of the pytest plugins ``image``'s environment installed,
    read in ``box`` (a container of it, nothing staged yet) the first time, then cached. An
    image with no Python has none."""
    with _lock:
        if image in _cache:
            return _cache[image]
    result = box.exec(["sh", "-c", 'cd / && PY="$(command -v python || command -v python3)" '
                       '&& exec "$PY" -c "$0"', LIST], user="root", timeout=60)
    for line in str(result.output).splitlines():
        if line.startswith(MARK):
            try:
                found = tuple((str(n), str(m)) for n, m in json.loads(line[len(MARK):]))
            except (ValueError, TypeError):
                break
            found = tuple(p for p in found if p[1].split(".")[0] not in OUTPUT_PLUGINS)
            with _lock:
                _cache[image] = found
            return found
    return ()  # no Python there, or the listing failed: none, and asked again next time


def unshadowed(plugins: tuple[tuple[str, str], ...], changed: list[str]
               ) -> tuple[tuple[str, str], ...]:
    """The plugins whose top-level module no path of the agent's diff (``changed``) writes at
    the repository's root: ``python -m pytest`` puts /testbed first on the run's path, so a
    ``pytest_asyncio/`` there would be what ``-p pytest_asyncio.plugin`` loads, the agent's
    code as a plugin. Such a plugin is not named; the agent only loses what it gave."""
    tops = {path.split("/")[0].removesuffix(".py") for path in changed}
    return tuple(p for p in plugins if p[1].split(".")[0] not in tops)


def plugin_args(plugins: tuple[tuple[str, str], ...], blocked: tuple[str, ...] = ()
                ) -> list[str]:
    """``-p MODULE`` for each plugin, but those ``blocked`` names (by entry point or module)."""
    off = set(blocked)
    return [word for name, module in plugins if name not in off and module not in off
            for word in ("-p", module)]
