"""The root of a repogym checkout: not a package of its own.

A checkout is usually a folder named ``repogym``. A script in the folder above it starts
with that folder on ``sys.path``, so ``import repogym`` finds the checkout before the
installed package: without this file Python makes the checkout an empty namespace package
(an editable install's finder comes after the path search) and ``gym.make("repogym/SWE-v0")``
fails with ``NamespaceNotFound``. Imported that way, this file hands over to the real package
(the editable install's, or the one in site-packages) and takes its place in ``sys.modules``.
"""

import importlib.util
import os
import sys
from importlib.machinery import PathFinder


def _real_repogym():  # type: ignore[no-untyped-def]
    here = os.path.realpath(os.path.dirname(__file__))
    # the path search without the entries that lead here, then the other finders
    path = [p for p in sys.path
            if os.path.realpath(os.path.join(p or os.curdir, __name__)) != here]
    spec = None
    for finder in sys.meta_path:
        find = getattr(finder, "find_spec", None)
        if find is None:
            continue
        spec = find(__name__, path) if finder is PathFinder else find(__name__, None)
        if spec is not None and spec.origin and \
                os.path.realpath(os.path.dirname(spec.origin)) != here:
            break
        spec = None
    if spec is None or spec.loader is None:
        raise ImportError(
            f"{here} is a repogym checkout, imported as the package `repogym` because the "
            "folder above it is on sys.path; repogym is not installed. Install it "
            f"(pip install -e {here}) or run the script from another folder.")
    module = importlib.util.module_from_spec(spec)
    sys.modules[__name__] = module  # importers of `repogym` get the real package
    spec.loader.exec_module(module)
    return module


if __name__ == "repogym":
    _real_repogym()
