"""Inputs for differential testing beyond the recorded calls, generated with hypothesis: values
mutated from what the tests passed, and values drawn from the parameters' annotations.

Recorded values arrive pickled; only plain data (numbers, strings, bytes, containers) is ever
unpickled here, so a project's own objects stay opaque blobs that are passed through as they
were recorded.
"""

from __future__ import annotations

import ast
import base64
import io
import json
import pickle
from typing import Any

from repogym import syntax_lock

from .targets import TargetFunction


class _PlainUnpickler(pickle.Unpickler):
    """Loads only plain data (numbers, strings, bytes, containers): anything else (the
    project's objects) stays an opaque recorded value."""

    SAFE = frozenset({"set", "frozenset", "complex", "bytearray", "range"})

    def find_class(self, module: str, name: str) -> Any:
        if module == "builtins" and name in self.SAFE:
            return super().find_class(module, name)
        raise pickle.UnpicklingError(f"{module}.{name} is not plain data")


def plain_value(blob: str) -> tuple[bool, Any]:
    """(True, value) when a recorded argument is plain data, else (False, None)."""
    try:
        return True, _PlainUnpickler(io.BytesIO(base64.b64decode(blob))).load()
    except Exception:  # noqa: BLE001 - not plain: kept as recorded
        return False, None


def _dump(value: Any) -> str:
    return base64.b64encode(pickle.dumps(value, 4)).decode()


def value_strategy(st: Any, value: Any, depth: int = 0) -> Any:
    """Values near ``value``: itself, small changes of it, others of its type and shape."""
    t = type(value)
    if value is None or depth > 3:
        return st.just(value)
    if t is bool:
        return st.booleans()
    if t is int:
        return st.one_of(st.just(value), st.integers(value - 3, value + 3),
                         st.integers(min(value, 0) - 8, max(value, 0) * 2 + 8))
    if t is range:
        return st.builds(range, value_strategy(st, value.start, depth + 1),
                         value_strategy(st, value.stop, depth + 1), st.just(value.step))
    if t is float:
        bound = abs(value) * 2 + 10 if value == value and abs(value) < 1e300 else 1e6
        return st.one_of(st.just(value), st.sampled_from([0.0, -0.0, 1.0, -1.5]),
                         st.floats(-bound, bound, allow_nan=False, allow_infinity=False))
    if t is str:
        alphabet = sorted(set(value) | set("aZ_- 1"))
        variants = [value.upper(), value.lower(), value.title(), value.swapcase(), value[::-1],
                    value[1:], value + value[:1]]
        return st.one_of(st.just(value), st.sampled_from(variants),
                         st.text(st.sampled_from(alphabet), max_size=len(value) + 4))
    if t is bytes:
        return st.one_of(st.just(value), st.binary(max_size=len(value) + 4))
    return _container_strategy(st, value, t, depth)


def _container_strategy(st: Any, value: Any, t: type, depth: int) -> Any:
    items = list(value.items()) if t is dict else list(value) if t in (list, tuple, set,
                                                                       frozenset) else []
    if not items:  # nothing to mutate: small ints, the commonest element in tests
        some = _collections(st).get(t)
        return st.one_of(st.just(value), some(st.integers(-5, 20), max_size=6)) \
            if some else st.just(value)
    if t is tuple:
        return st.tuples(*(value_strategy(st, v, depth + 1) for v in value)) \
            if len(value) <= 6 else st.just(value)
    if t is dict:
        keys = st.one_of(*(value_strategy(st, k, depth + 1) for k, _ in items[:6]))
        values = st.one_of(*(value_strategy(st, v, depth + 1) for _, v in items[:6]))
        return st.dictionaries(keys, values, max_size=len(items) + 2)
    elements = st.one_of(*(value_strategy(st, v, depth + 1) for v in items[:6]))
    return _collections(st)[t](elements, max_size=len(items) + 3)


def _collections(st: Any) -> dict[type, Any]:
    return {list: st.lists, set: st.sets, frozenset: st.frozensets}


def annotation_strategy(st: Any, text: str) -> Any | None:
    """Values of a simple annotation (``int``, ``str | None``, ``list[float]``, ...), or None."""
    try:
        node = syntax_lock.parse_expression(text).body
    except SyntaxError:
        return None
    return _annotation(st, node)


def _annotation(st: Any, node: ast.expr) -> Any | None:
    simple = {"int": st.integers(-100, 100), "bool": st.booleans(), "str": st.text(max_size=12),
              "bytes": st.binary(max_size=12), "None": st.none(),
              "float": st.floats(-1e3, 1e3, allow_nan=False)}
    if isinstance(node, ast.Constant) and node.value is None:
        return st.none()
    name = ast.unparse(node.value if isinstance(node, ast.Subscript) else node).split(".")[-1]
    if isinstance(node, ast.BinOp) and isinstance(node.op, ast.BitOr):
        parts = [_annotation(st, node.left), _annotation(st, node.right)]
        return st.one_of(*parts) if all(p is not None for p in parts) else None
    if not isinstance(node, ast.Subscript):
        return simple.get(name)
    inner = node.slice.elts if isinstance(node.slice, ast.Tuple) else [node.slice]
    args = [None if isinstance(x, ast.Constant) and x.value is Ellipsis else _annotation(st, x)
            for x in inner]
    if name == "Optional" and args[0] is not None:
        return st.one_of(st.none(), args[0])
    if name == "Union" and all(a is not None for a in args):
        return st.one_of(*args)
    if name.lower() in ("list", "sequence", "iterable") and args[0] is not None:
        return st.lists(args[0], max_size=5)
    if name.lower() in ("set", "frozenset") and args[0] is not None:
        return st.sets(args[0], max_size=5)
    if name.lower() in ("dict", "mapping") and len(args) == 2 and None not in args:
        return st.dictionaries(args[0], args[1], max_size=4)
    if name.lower() == "tuple" and args and args[-1] is None and args[0] is not None:
        return st.lists(args[0], max_size=4).map(tuple)
    if name.lower() == "tuple" and args and None not in args:
        return st.tuples(*args)
    return None


def _slot(st: Any, blob: str, annotation: str | None) -> Any:
    ok, value = plain_value(blob)
    if not ok:
        return st.just(blob)
    strategy = value_strategy(st, value)
    typed = annotation_strategy(st, annotation) if annotation else None
    return (st.one_of(strategy, typed) if typed is not None else strategy).map(_dump)


def _call_strategy(st: Any, call: dict[str, Any], target: TargetFunction) -> Any:
    def annotation(i: int) -> str | None:
        name = target.params[i] if i < len(target.params) else target.vararg
        return target.annotations.get(name) if name else None

    slots = [(i, b, annotation(i)) for i, b in enumerate(call["args"])] + \
        [(k, b, target.annotations.get(k)) for k, b in call["kwargs"].items()]

    def changing(which: set[int | str]) -> Any:
        def slot(key: int | str, blob: str, note: str | None) -> Any:
            return _slot(st, blob, note) if key in which else st.just(blob)

        args = st.tuples(*(slot(i, b, n) for i, b, n in slots if isinstance(i, int)))
        kwargs = st.fixed_dictionaries({k: slot(k, b, n) for k, b, n in slots
                                        if isinstance(k, str)})
        return st.builds(lambda a, k: {"args": list(a), "kwargs": k}, args, kwargs)

    # one argument changed at a time, mostly: changing all at once mostly makes calls that
    # any version rejects the same way (an unknown key, a negative count); only plain data
    # changes (a project's objects stay as recorded)
    every = {key for key, blob, _ in slots if plain_value(blob)[0]}
    if len(every) < 2:
        return changing(every)
    return st.one_of(*(changing({key}) for key in sorted(every, key=str)), changing(every))


def _typed_strategy(st: Any, target: TargetFunction) -> Any | None:
    """Calls made from the annotations alone, for a function no test called directly."""
    names = target.params[:target.required]
    if names[:1] in (("self",), ("cls",)):
        return None
    typed = [annotation_strategy(st, target.annotations.get(n, "")) for n in names]
    if not typed or any(s is None for s in typed):
        return None
    return st.tuples(*(s.map(_dump) for s in typed if s is not None)).map(
        lambda a: {"args": list(a), "kwargs": {}})


def generate_calls(calls: list[dict[str, Any]], target: TargetFunction, n: int, seed: int
                   ) -> list[dict[str, Any]]:
    """Up to ``n`` new calls, mutated from the recorded ones (or made from the annotations),
    with hypothesis, deterministically for ``seed``. Empty when hypothesis is missing."""
    # hypothesis parses sources (its tests', its lambdas', at its import too) with ast.parse:
    # one thread at a time with repogym's own parsing (repogym.syntax_lock)
    with syntax_lock.held():
        try:
            from hypothesis import HealthCheck, Phase, given, settings
            from hypothesis import seed as fix_seed
            from hypothesis import strategies as st
        except ImportError:
            return []
        strategy: Any = (st.sampled_from(calls).flatmap(lambda c: _call_strategy(st, c, target))
                         if calls else _typed_strategy(st, target))
        if n <= 0 or strategy is None:
            return []
        found: dict[str, dict[str, Any]] = {}
        seen = {json.dumps(c, sort_keys=True) for c in calls}

        @fix_seed(seed)
        @settings(max_examples=4 * n, database=None, deadline=None, phases=[Phase.generate],
                  suppress_health_check=list(HealthCheck))
        @given(strategy)
        def collect(call: dict[str, Any]) -> None:
            key = json.dumps(call, sort_keys=True)
            if key not in seen:
                found.setdefault(key, call)
            if len(found) >= n:
                raise _Enough  # hypothesis costs milliseconds an example: stop once there are n

        try:
            collect()
        except _Enough:
            pass
        return list(found.values())[:n]


class _Enough(Exception):
    """Ends a hypothesis run early (see :func:`generate_calls`)."""
