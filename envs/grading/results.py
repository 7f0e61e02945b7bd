"""Test results from the two independent sources: the JUnit XML file and the console log."""

from __future__ import annotations

import xml.etree.ElementTree as ET
from typing import Any

PASSING = {"PASSED", "XFAIL"}


def parser_for(name: str) -> Any:
    # swebench (and the datasets library it imports) costs seconds: only when parsing
    from swebench.harness.log_parsers import PARSER_REGISTRY

    key = name if name.startswith("parse_log_") else f"parse_log_{name}"
    if key not in PARSER_REGISTRY:
        valid = sorted(k.removeprefix("parse_log_") for k in PARSER_REGISTRY)
        raise ValueError(f"unknown log_parser {name!r}; valid: {valid}")
    return PARSER_REGISTRY[key]


def parse_log(log: str, parser: str) -> dict[str, str]:
    return dict(parser_for(parser)(log, None))


def parse_junit(xml_text: str) -> dict[str, str]:
    """Statuses by pytest node id from a JUnit file written with ``junit_family=xunit1``."""
    if not xml_text.strip():
        return {}
    try:
        root = ET.fromstring(xml_text)
    except ET.ParseError:
        return {"<unparsable junit>": "ERROR"}
    statuses: dict[str, str] = {}
    for case in root.iter("testcase"):
        node = _node_id(case)
        status = _status(case)
        # a test that failed and then errored in teardown appears twice: the worst one wins
        if statuses.get(node) in (None, "PASSED"):
            statuses[node] = status
    return statuses


def _node_id(case: ET.Element) -> str:
    file = case.get("file", "")
    classname = case.get("classname", "")
    name = case.get("name", "")
    module = file[:-3].replace("/", ".") if file.endswith(".py") else ""
    inner = classname[len(module) + 1 :] if module and classname.startswith(module) else ""
    parts = [file or classname.replace(".", "/") + ".py"] + inner.split(".") * bool(inner) + [name]
    return "::".join(p for p in parts if p)


def _status(case: ET.Element) -> str:
    tags = {child.tag: child for child in case}
    if "error" in tags:
        return "ERROR"
    if "failure" in tags:
        return "FAILED"
    if "skipped" in tags:
        skipped = tags["skipped"]
        return "XFAIL" if "xfail" in (skipped.get("type", "") + skipped.get("message", "")) else (
            "SKIPPED"
        )
    return "PASSED"


def disagreements(junit: dict[str, str], log: dict[str, str], ids: list[str]) -> list[str]:
    """Ids on which the two sources disagree about passing (or one of them lacks)."""
    out = []
    for test_id in ids:
        # the log parser splits lines on whitespace: an id holding a space ("test_f[a b]")
        # appears there cut at its first space
        cut = test_id.split()[0] if test_id.strip() else test_id
        a, b = junit.get(test_id), log.get(test_id, log.get(cut))
        if a is None and b is None:
            continue
        if a is None or b is None or (a in PASSING) != (b in PASSING):
            out.append(test_id)
    return out
