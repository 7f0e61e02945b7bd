"""The functions a replication task removed, as the tracer finds them and the differential
harness calls them."""

from __future__ import annotations

import ast
from dataclasses import dataclass, field
from typing import Any

from . import pyast


@dataclass(frozen=True)
class TargetFunction:
    """One removed function as the tracer finds it and the harness calls it."""

    key: str  # the qualname, with "#N" for a later definition of the same name
    module: str
    qualname: str
    role: str  # "call", or the property accessor: "fget", "fset", "fdel"
    lines: tuple[int, ...]  # where its code object may start: the def, the first decorator
    params: tuple[str, ...] = ()  # positional parameters in order
    vararg: str | None = None
    required: int = 0  # positional parameters without a default
    annotations: dict[str, str] = field(default_factory=dict)

    @property
    def name(self) -> str:
        return self.qualname.rsplit(".", 1)[-1]

    def harness_entry(self) -> dict[str, str]:
        return {"module": self.module, "qualname": self.qualname, "role": self.role}


def target_functions(text: str, reference: dict[str, Any]) -> list[TargetFunction]:
    """The functions a replication task removed, from the reference's module text."""
    module = pyast.parse(text)
    defs = [d for d in pyast.definitions(module) if not d.is_class]
    if reference["granularity"] != "module":
        node = pyast.find(module, reference["qualname"], reference.get("occurrence", 0))
        inside = {id(fn) for fn in pyast.functions_in(node)}
        defs = [d for d in defs if id(d.node) in inside]
    name = pyast.module_name(reference["file"])
    return [function_target(name, d.qualname, d.occurrence, d.node) for d in defs  # type: ignore[arg-type]
            if not pyast.is_trivial(d.node)]  # type: ignore[arg-type]


def function_target(module: str, qualname: str, occurrence: int,
            node: ast.FunctionDef | ast.AsyncFunctionDef) -> TargetFunction:
    decorators = [ast.unparse(d) for d in node.decorator_list]
    role = "call"
    if "property" in decorators:
        role = "fget"
    elif any(d.endswith((".setter", ".deleter")) for d in decorators):
        role = "fset" if any(d.endswith(".setter") for d in decorators) else "fdel"
    lines = {node.lineno} | {min(d.lineno for d in node.decorator_list)} \
        if node.decorator_list else {node.lineno}
    a = node.args
    positional = [*a.posonlyargs, *a.args]
    every = [*positional, *a.kwonlyargs] + [x for x in (a.vararg, a.kwarg) if x]
    return TargetFunction(
        key=qualname + (f"#{occurrence}" if occurrence else ""), module=module,
        qualname=qualname, role=role, lines=tuple(sorted(lines)),
        params=tuple(x.arg for x in positional), vararg=a.vararg.arg if a.vararg else None,
        required=len(positional) - len(a.defaults),
        annotations={x.arg: ast.unparse(x.annotation) for x in every if x.annotation})
