"""`repogym images build --suite S`: builds (cached) every image a suite needs; `export`: the
same as root file systems; `prune --budget SIZE`: removes least recently used task images
until the images fit."""

from __future__ import annotations

import argparse
import time

from repogym.images.lru import parse_size
from repogym.images.python_base import ensure_base, measure_base
from repogym.images.recipe import image_info
from repogym.images.repository import ensure_image, image_tag
from repogym.images.usage import prune_to
from repogym.sandbox.client import docker_client
from repogym.sandbox.trees import export_tree, store
from repogym.schema import PYTHON_SUITES, SPLITS
from repogym.scripts.output import progress, table, write_json
from repogym.suite import ALL, load_suite


def add_parser(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("images", help="build the images a suite needs")
    isub = p.add_subparsers(dest="images_command", metavar="ACTION", required=True)
    b = isub.add_parser("build", help="build (cached) every image the suite needs")
    b.add_argument("--suite", required=True, help="suite name, .jsonl file or folder")
    b.add_argument("--split", default=ALL, choices=(*SPLITS, ALL),
                   help="only the images of this split's tasks (default: all)")
    b.add_argument("--json", default=None, help="write results as JSON here (- for stdout)")
    b.set_defaults(func=build)
    e = isub.add_parser("export", help="export a suite's images as root file systems (the "
                        "bwrap backend's trees), building them first where needed")
    e.add_argument("--suite", required=True, help="suite name, .jsonl file or folder")
    e.add_argument("--split", default=ALL, choices=(*SPLITS, ALL),
                   help="only the images of this split's tasks (default: all)")
    e.add_argument("--json", default=None, help="write results as JSON here (- for stdout)")
    e.set_defaults(func=export)
    prune = isub.add_parser("prune", help="remove least recently used task images to fit a "
                            "disk budget (a removed image is built again when next needed)")
    prune.add_argument("--budget", required=True, type=_size, metavar="SIZE",
                       help="what the images may take, shared layers counted once (12GB, "
                       "500MB, 1.5GiB)")
    prune.add_argument("--suite", action="append", default=None, metavar="SUITE",
                       help="only the images of this suite count and go (repeatable; default: "
                       "every repogym image counts, every task image may go)")
    prune.add_argument("--dry-run", action="store_true", help="say what would go, remove nothing")
    prune.add_argument("--json", default=None, help="write results as JSON here (- for stdout)")
    prune.set_defaults(func=prune_images)
    base = isub.add_parser("base", help="build (cached) the base image of Python versions")
    base.add_argument("--python", default=["3.11"], type=_versions, metavar="VERSIONS",
                      help=f"a version, several (3.9,3.13) or all ({', '.join(PYTHON_SUITES)}; "
                           "default: 3.11)")
    base.add_argument("--measure", action="store_true",
                      help="build root and base from scratch under throwaway tags and report "
                           "seconds and sizes (nothing cached is used or replaced)")
    base.add_argument("--json", default=None, help="write results as JSON here (- for stdout)")
    base.set_defaults(func=build_base)


def _size(text: str) -> int:
    try:
        return parse_size(text)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from exc


def prune_images(args: argparse.Namespace) -> int:
    client = docker_client()
    done = prune_to(client, args.budget, args.suite, args.dry_run)
    scope = f"the images of {', '.join(args.suite)}" if args.suite else "repogym's images"
    verb = "would remove" if args.dry_run else "removed"
    gone = done["evict"] if args.dry_run else done["removed"]
    print(f"{scope}: {done['before'] / 1e9:.2f} GB (shared layers counted once), budget "
          f"{done['budget'] / 1e9:.2f} GB; {verb} {len(gone)} images, "
          f"{done['after'] / 1e9:.2f} GB left" + ("" if done["fits"] else
                                                  " (still over: what is left is shared or in "
                                                  "use)"))
    for name in gone:
        print(f"  {name}")
    for line in done["failed"]:
        print(f"  kept {line}")
    write_json(args.json, done)
    return 0 if done["fits"] else 1


def _versions(text: str) -> list[str]:
    versions = list(PYTHON_SUITES) if text == "all" else text.split(",")
    unknown = [v for v in versions if v not in PYTHON_SUITES]
    if unknown:
        raise argparse.ArgumentTypeError(
            f"no base recipe for Python {', '.join(unknown)}: use {', '.join(PYTHON_SUITES)} "
            "(comma-separated) or all")
    return versions


def build_base(args: argparse.Namespace) -> int:
    rows: list[dict[str, object]] = []
    for python in args.python:
        if args.measure:
            found = measure_base(python, progress=progress)
            rows.append(found)
            print(f"Python {python}: root {found['root_seconds']} s, {found['root_mb']} MB; "
                  f"base {found['base_seconds']} s, {found['base_mb']} MB")
            continue
        built = ensure_base(python, progress=progress)
        info = image_info(built.tag)
        state = "cached" if built.cached else f"built in {built.seconds:.0f} s"
        print(f"{built.tag} ({state}, {info['size'] / 1e6:.0f} MB)")
        rows.append({"python": python, "tag": built.tag, "cached": built.cached,
                     "seconds": round(built.seconds, 1), "mb": round(info["size"] / 1e6)})
    write_json(args.json, rows)
    return 0


def build(args: argparse.Namespace) -> int:
    tasks = load_suite(args.suite, args.split)
    seen: dict[str, dict[str, object]] = {}
    start = time.monotonic()
    for i, task in enumerate(tasks, 1):
        tag = image_tag(task)
        if tag in seen:
            continue
        progress(f"[{i}/{len(tasks)}] {task.instance_id}: {tag}")
        built = ensure_image(task, progress=progress)
        seen[tag] = {"tag": tag, "cached": built.cached, "seconds": round(built.seconds, 1)}
    rows = [
        [v["tag"], "cached" if v["cached"] else f"built in {v['seconds']} s"] for v in seen.values()
    ]
    print(table(rows, ["image", "status"]))
    print(f"{len(seen)} images for {len(tasks)} tasks in {time.monotonic() - start:.1f} s")
    write_json(args.json, list(seen.values()))
    return 0


def export(args: argparse.Namespace) -> int:
    """Each image of the suite as a tree in the store (``REPOGYM_ROOTFS_DIR``): copy that
    folder to a machine where no engine may run, and the bwrap backend uses it there."""
    tasks = load_suite(args.suite, args.split)
    rows: list[dict[str, object]] = []
    for i, task in enumerate(tasks, 1):
        tag = image_tag(task)
        if any(r["tag"] == tag for r in rows):
            continue
        progress(f"[{i}/{len(tasks)}] {task.instance_id}: {tag}")
        ensure_image(task, progress=progress)
        tree = export_tree(tag)
        rows.append({"tag": tag, "tree": str(tree.root)})
    print(table([[r["tag"], r["tree"]] for r in rows], ["image", "tree"]))
    print(f"{len(rows)} trees in {store()}: copy that folder (and set REPOGYM_ROOTFS_DIR to it) "
          "where the bwrap backend runs")
    write_json(args.json, rows)
    return 0
