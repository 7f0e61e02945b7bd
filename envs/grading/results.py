"""Test results from the two independent sources: the JUnit XML file and the console log."""

from __future__ import annotations

import re
import xml.etree.ElementTree as ET
from collections.abc import Collection
from typing import Any

PASSING = {"PASSED", "XFAIL"}
# libtest marks a #[should_panic] test on the console, "test NAME - should panic ... ok";
# swebench's cargo parser reads "test NAME ... ok" alone and would not see the test at all
_SHOULD_PANIC = re.compile(r"^(\s*test\s+\S+) - should panic(\s+\.\.\.)", re.M)


def parser_for(name: str) -> Any:
    # swebench (and the datasets library it imports) costs seconds: only when parsing
    from swebench.harness.log_parsers import PARSER_REGISTRY

    key = name if name.startswith("parse_log_") else f"parse_log_{name}"
    if key not in PARSER_REGISTRY:
        valid = sorted(k.removeprefix("parse_log_") for k in PARSER_REGISTRY)
        raise ValueError(f"unknown log_parser {name!r}; valid: {valid}")
    return PARSER_REGISTRY[key]


def parse_log(log: str, parser: str) -> dict[str, str]:
    if parser.removeprefix("parse_log_") == "cargo":
        log = _SHOULD_PANIC.sub(r"\1\2", log)
    return dict(parser_for(parser)(log, None))


def parse_junit(xml_text: str, known: Collection[str] = ()) -> dict[str, str]:
    """Statuses by pytest node id from a JUnit file written with ``junit_family=xunit1``.

    A case's ``classname`` comes from its node id; its ``file`` is where the test function is
    written, which for a method a test class inherits is another file (cachetools' test
    classes take their methods from ``tests/__init__.py``). Where the two disagree, the id is
    rebuilt from ``classname``: the split into file and classes that ``known`` (the ids
    another source reported) holds, else the one whose classes are capitalised."""
    if not xml_text.strip():
        return {}
    try:
        root = ET.fromstring(xml_text)
    except ET.ParseError:
        return {"<unparsable junit>": "ERROR"}
    known = set(known)
    statuses: dict[str, str] = {}
    for case in root.iter("testcase"):
        node = _node_id(case, known)
        status = _status(case)
        # a test that failed and then errored in teardown appears twice: the worst one wins
        if statuses.get(node) in (None, "PASSED"):
            statuses[node] = status
    return statuses


def _node_id(case: ET.Element, known: set[str]) -> str:
    file = case.get("file", "")
    classname = case.get("classname", "")
    name = case.get("name", "")
    module = file[:-3].replace("/", ".") if file.endswith(".py") else ""
    if module and (classname == module or classname.startswith(module + ".")) or not classname:
        inner = classname[len(module) + 1:]
        return "::".join(p for p in [file, *inner.split("."), name] if p)
    parts = classname.split(".")
    splits = ["::".join(["/".join(parts[:k]) + ".py", *parts[k:], name])
              for k in range(len(parts), 0, -1)]
    for node in splits:
        if node in known:
            return node
    for k in range(len(parts), 0, -1):  # the classes: the trailing capitalised names
        if not parts[k - 1][:1].isupper():
            return splits[len(parts) - k]
    return splits[0]


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


# pytest's -rA summary lists passes, then skips, xfails, xpasses, errors and failures; swebench's
# parsers keep the last line they read for an id, so of tests sharing one id the later wins
SUMMARY_ORDER = ("PASSED", "SKIPPED", "XFAIL", "XPASS", "ERROR", "FAILED")


def log_keys(test_id: str, parser: str) -> set[str]:
    """The ids the log parser reports for ``test_id``, on a summary line of each status. The
    pytest parsers split lines on whitespace: ``t[a b]`` is reported as ``t[a``, and that cut
    id is what SWE-bench's published lists hold. Those lists were made by such parsers, so the
    cut id is always one of the keys: swebench 5's parser for Sphinx keeps the whole id, and
    sphinx-doc__sphinx-8713's PASS_TO_PASS (``test_escape_args_and_kwargs[x,``) named nothing
    it reads."""
    parse = parser_for(parser)
    keys: set[str] = {test_id.split()[0]} if test_id.split() != [test_id] else set()
    for status in SUMMARY_ORDER:
        tail = " - x" if status in ("FAILED", "ERROR") else ""
        try:
            keys |= set(parse(f"{status} {test_id}{tail}\n", None))
        except Exception:  # a parser that cannot read the line reports nothing for it
            continue
    return keys


def worst(statuses: list[str]) -> str:
    """The status swebench's parser keeps for tests that share one id: the last one pytest's
    summary prints."""
    rank = {s: i for i, s in enumerate(SUMMARY_ORDER)}
    return max(statuses, key=lambda s: rank.get(s, len(SUMMARY_ORDER)))


def match_cut_ids(expected: list[str], junit: dict[str, str], parser: str) -> dict[str, list[str]]:
    """For each expected id JUnit lacks, the JUnit ids the log parser reports under it (ids
    cut at a space, as SWE-bench's lists hold them). Several full ids may share a cut id."""
    missing = [t for t in expected if t not in junit]
    if not missing:
        return {}
    by_file: dict[str, list[str]] = {}
    for node in junit:
        by_file.setdefault(node.split("::")[0], []).append(node)
    keys: dict[str, set[str]] = {}
    out: dict[str, list[str]] = {}
    for test_id in missing:
        members = []
        for node in by_file.get(test_id.split("::")[0], []):
            if node not in keys:
                keys[node] = log_keys(node, parser)
            if test_id in keys[node]:
                members.append(node)
        if members:
            out[test_id] = sorted(members)
    return out


def resolve_cut_ids(junit: dict[str, str], groups: dict[str, list[str]]) -> dict[str, str]:
    """JUnit's statuses, plus one for each cut id: the status swebench's parser would give it
    (a failure among the tests that share it fails it)."""
    view = dict(junit)
    for test_id, members in groups.items():
        view[test_id] = worst([junit[m] for m in members])
    return view


def disagreements(junit: dict[str, str], log: dict[str, str], ids: list[str],
                  parser: str = "pytest") -> list[str]:
    """Ids on which the two sources disagree about passing. ``junit``
    holds cut ids too (see ``resolve_cut_ids``); the log is read under the id the parser
    gives each test."""
    out = []
    for test_id in ids:
        a, b = junit.get(test_id), log.get(test_id)
        if b is None:
            b = next((log[k] for k in sorted(log_keys(test_id, parser)) if k in log), None)
        if a is None and b is None:
            continue
        # the reporter's unexpected pass, no pass to score: JUnit writes it as a pass and
        # swebench's parser leaves it out, so neither can contradict it
        if a == "XPASS":
            continue
        # a source that lacks a test claims no pass for it (some parsers leave skips out)
        if (a in PASSING) != (b in PASSING):
            out.append(test_id)
    return out
