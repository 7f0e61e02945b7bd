"""MkDocs hooks of the manual (``mkdocs.yml``: ``hooks:``), run by ``make docs``.

- The API pages are made from the docstrings of one staged ``repogym`` tree (the package's
  folders are mapped with ``package_dir``, which griffe cannot follow): ``build/docs/api``.
- A navigation entry whose page does not exist yet is left out, with a line in the log: the
  navigation names the pages other work will add, and each appears once it lands. The
  opposite, a page that no entry names, fails ``tests/test_docs.py``.
- ``<!-- generated: cli|settings|bench -->`` in a page is replaced by the reference made from
  the code (``repogym.scripts.docs_ref``).
"""

from __future__ import annotations

import json
import logging
import shutil
import sys
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
API_TREE = ROOT / "build" / "docs" / "api"
LOG = logging.getLogger("mkdocs.hooks.repogym")

sys.path.insert(0, str(ROOT / "tools"))
from lint_imports import stage  # noqa: E402 - a sibling script

shutil.rmtree(API_TREE, ignore_errors=True)
stage(API_TREE)  # at import: before mkdocstrings reads its paths


def _present(entry: Any, docs: Path) -> Any:
    """The nav entry without pages that do not exist (None when nothing is left)."""
    if isinstance(entry, str):
        if entry.startswith(("http://", "https://")) or (docs / entry).exists():
            return entry
        LOG.info("nav: %s is not written yet; left out", entry)
        return None
    if isinstance(entry, list):
        kept = [e for e in (_present(x, docs) for x in entry) if e is not None]
        return kept or None
    if isinstance(entry, dict):
        kept = {k: v for k, v in ((k, _present(v, docs)) for k, v in entry.items())
                if v is not None}
        return kept or None
    return entry


def on_config(config: Any) -> Any:
    config["nav"] = _present(config["nav"], Path(config["docs_dir"]))
    return config


def on_page_markdown(markdown: str, page: Any, config: Any, files: Any) -> str:
    from repogym.scripts import docs_ref

    if "<!-- generated: cli -->" in markdown:
        markdown = markdown.replace("<!-- generated: cli -->", docs_ref.cli_reference())
    if "<!-- generated: settings -->" in markdown:
        markdown = markdown.replace("<!-- generated: settings -->", docs_ref.settings_table())
    if "<!-- generated: bench -->" in markdown:
        data = json.loads((Path(config["docs_dir"]) / "bench.json").read_text())
        markdown = markdown.replace("<!-- generated: bench -->", docs_ref.bench_tables(data))
    return markdown
