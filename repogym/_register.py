"""Registering the environments with Gymnasium without importing it before it is needed.

:class:`RegisterOnImport` sits on ``sys.meta_path`` and watches for one name, ``gymnasium``: it
lets the usual finders find it, and registers repogym's environments right after Gymnasium's
own module has run. So ``import repogym`` then ``import gymnasium`` works like the other order.
"""

from __future__ import annotations

import importlib.abc
import importlib.machinery
import sys
from collections.abc import Sequence
from types import ModuleType

WATCHED = "gymnasium"


def register_now() -> None:
    # the environment's modules load with Gymnasium, never on a bare `import repogym`
    from repogym.envs.registration import register_envs

    register_envs()


class RegisterOnImport(importlib.abc.MetaPathFinder):
    """Finds nothing itself; wraps Gymnasium's loader so that registration follows it."""

    def find_spec(self, fullname: str, path: Sequence[str] | None = None,
                  target: ModuleType | None = None) -> importlib.machinery.ModuleSpec | None:
        if fullname != WATCHED:
            return None
        for finder in sys.meta_path:
            if finder is self or not hasattr(finder, "find_spec"):
                continue
            spec = finder.find_spec(fullname, path, target)
            if spec is not None:
                if spec.loader is not None:
                    spec.loader = _ThenRegister(spec.loader)
                return spec
        return None


class _ThenRegister(importlib.abc.Loader):
    def __init__(self, loader: importlib.abc.Loader) -> None:
        self.loader = loader

    def create_module(self, spec: importlib.machinery.ModuleSpec) -> ModuleType | None:
        return self.loader.create_module(spec)

    def exec_module(self, module: ModuleType) -> None:
        # the module keeps its real loader (tools read sources through it)
        module.__loader__ = self.loader
        if module.__spec__ is not None:
            module.__spec__.loader = self.loader
        self.loader.exec_module(module)
        register_now()
