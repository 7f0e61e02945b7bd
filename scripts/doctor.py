"""`repogym doctor`: the engine, repogym's images and their real disk use, leftover containers,
and (asked for) the removal of task images that no suite uses."""

from __future__ import annotations

import argparse
import shutil
import statistics
from collections import Counter
from typing import Any

from repogym import settings
from repogym.envs.backends import BACKENDS
from repogym.errors import DockerUnavailable, RepogymError
from repogym.images import usage as image_usage
from repogym.images.usage import Image
from repogym.sandbox import engines, owners
from repogym.sandbox.bwrap import check_bwrap
from repogym.sandbox.client import docker_client, use_engine_of
from repogym.sandbox.features import engine_features
from repogym.sandbox.trees import sandbox_user, store
from repogym.scripts.output import table, write_json


def add_parser(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("doctor", help="check Docker, images, disk; remove leftover containers",
                       description="Checks the Docker engine and summarises repogym's images "
                       "(how many, their real disk use, which task images no suite uses). "
                       "Removes nothing unless asked.")
    p.add_argument("--cleanup", action="store_true",
                   help="remove containers left by repogym processes that are gone")
    p.add_argument("--all", action="store_true",
                   help="with --cleanup: remove every repogym container, live owners' too")
    p.add_argument("--images", action="store_true", help="list every image, not a summary")
    p.add_argument("--keep", action="append", default=[], metavar="SUITE",
                   help="a suite whose images count as used (repeatable; the built-in suites "
                   "always do)")
    p.add_argument("--prune-images", action="store_true",
                   help="remove the task images that neither the built-in suites nor the "
                   "--keep suites use, and that no container was made from")
    p.add_argument("--dry-run", action="store_true",
                   help="with --prune-images: say what would be removed, remove nothing")
    p.add_argument("--suite", action="append", default=[], metavar="SUITE",
                   help="also report this suite's disk use: its task and environment images, "
                   "built or missing, shared layers counted once (repeatable)")
    p.add_argument("--json", default=None, help="write the report as JSON to this path "
                   "(- for stdout)")
    p.add_argument("--backend", default=None, choices=sorted(BACKENDS),
                   help="the backend to check (default: REPOGYM_BACKEND, else docker)")
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    backend = args.backend or settings.BACKEND.get()
    if backend == "bwrap":
        return _bwrap_report(args)
    use_engine_of(backend)
    listed = engines.configured() if backend == "docker" else []
    if not listed:
        write_json(args.json, _engine_report(docker_client(), args))
        return 0
    # REPOGYM_DOCKER_HOSTS: every listed engine, so leftovers are found wherever they are
    reports, status = [], 0
    for engine in listed:
        print(f"== {engine.url}")
        try:
            client = engines.make_client(engine)
            local = engine.url.startswith("unix://")
            reports.append({"url": engine.url, **_engine_report(client, args, local)})
        except DockerUnavailable as exc:
            print(f"does not answer: {exc}")
            reports.append({"url": engine.url, "error": str(exc)})
            status = 1
    write_json(args.json, {"engines": reports})
    return status


def _bwrap_report(args: argparse.Namespace) -> int:
    """The daemonless sandbox: whether it can run here, as whom, and its exported trees."""
    try:
        version = check_bwrap()
    except RepogymError as exc:
        print(f"bwrap: cannot run here: {exc}")
        write_json(args.json, {"backend": "bwrap", "error": str(exc)})
        return 1
    user = sandbox_user()
    where = store()
    trees = sorted(p.name for p in where.glob("*.json")) if where.is_dir() else []
    size = sum(f.stat().st_size for f in where.rglob("*") if f.is_file() and not f.is_symlink()
               ) if trees else 0
    runs_as = user.pw_name if user is not None else "this user"
    print(f"{version}: unprivileged user namespaces work; sandboxes run as {runs_as}")
    print(f"  limits: RLIMIT_NPROC per sandbox, RLIMIT_DATA per process, sized tmpfs; CPU "
          f"none. Image trees in {where}: {len(trees)}, {_gb(size)}")
    write_json(args.json, {"backend": "bwrap", "bwrap": version, "user": runs_as,
                           "store": str(where), "trees": [t[:-5] for t in trees],
                           "disk_use": size})
    return 0


def _engine_report(client: Any, args: argparse.Namespace, local: bool = True
                   ) -> dict[str, Any]:
    version = client.version()
    # the data root's free space can only be measured on this machine's own engines
    root = client.info().get("DockerRootDir") or "/"
    free = shutil.disk_usage(root).free if local else None
    disk = f"disk free {_gb(free)}" if free is not None else "disk free unknown (remote)"
    features = engine_features(client)
    print(f"{features.describe()} (API {version.get('ApiVersion')}), {disk}")
    images = image_usage.repogym_images(client)
    suites = image_usage.keep_suites(args.keep)
    spare = image_usage.unused(images, image_usage.needed_tags(suites))
    report = _images_report(client, images, spare, suites)
    print(report["summary"])
    if args.images:
        rows = [[i.name, i.kind, _mb(i.size), _mb(i.own), str(i.containers)] for i in images]
        print(table(rows, ["image", "kind", "size", "own layers", "containers"]))
    suite_use = [_suite_report(client, images, suite) for suite in args.suite]
    removed: list[str] = []
    if args.prune_images:
        removed = _prune(client, spare, args.dry_run)
    elif spare:
        print("  `repogym doctor --prune-images [--keep SUITE ...]` removes them "
              "(--dry-run lists them first)")
    mine = owners.leftovers(client, include_live=True)
    dead = owners.leftovers(client)
    print(f"repogym containers: {len(mine)} ({len(dead)} left by dead processes)")
    left: list[str] = []
    if args.cleanup:
        left = owners.remove_containers(mine if args.all else dead, client)
        print(f"removed {len(left)} containers")
    elif dead:
        print("run `repogym doctor --cleanup` to remove the leftovers")
    return {
        "engine": version.get("Version"), "api": version.get("ApiVersion"), "disk_free": free,
        "features": features.as_json(),
        **{k: v for k, v in report.items() if k != "summary"},
        "images": [_image_json(i) for i in images],
        "unused": [i.name for i in spare], "images_removed": removed, "suites": suite_use,
        "containers": [c.name for c in mine], "leftovers": [c.name for c in dead],
        "removed": left,
    }


def _images_report(client: Any, images: list[Image], spare: list[Image], suites: list[str]
                   ) -> dict[str, Any]:
    if not images:
        return {"summary": "no repogym images (`repogym images build --suite demo` builds some)",
                "disk_use": 0, "nominal_size": 0, "unused_disk": 0, "kept_suites": suites}
    counts = Counter(i.kind for i in images)
    kinds = ", ".join(f"{n} {kind}" for kind, n in sorted(counts.items()))
    real, nominal = image_usage.disk_use(client, images), sum(i.size for i in images)
    lines = [f"repogym images: {len(images)} ({kinds}), {_gb(real)} on disk with shared layers "
             f"counted once ({_gb(nominal)} if each were alone)"]
    biggest = sorted((i for i in images if i.kind in image_usage.TASK_KINDS),
                     key=lambda i: -i.own)[:3]
    if biggest:
        lines.append("  largest task images by their own layers: "
                     + ", ".join(f"{i.name} ({_mb(i.own)})" for i in biggest))
    unused_disk = sum(i.own for i in spare)
    if spare:
        lines.append(f"  {len(spare)} task images no suite uses ({', '.join(suites)} kept): "
                     f"{_gb(unused_disk)} of their own layers")
    return {"summary": "\n".join(lines), "disk_use": real, "nominal_size": nominal,
            "unused_disk": unused_disk, "kept_suites": suites, "counts": dict(counts)}


def _suite_report(client: Any, images: list[Image], suite: str) -> dict[str, Any]:
    """What one suite's images take: task and environment images built and missing, their
    disk use with shared layers counted once, and the task images' own layers."""
    tasks, envs = image_usage.suite_tags([suite])
    held = [i for i in images if set(i.tags) & (tasks | envs)]
    names = {t for i in held for t in i.tags}
    own = sorted(i.own for i in held if i.kind in image_usage.TASK_KINDS)
    disk = image_usage.disk_use(client, held) if held else 0
    built_tasks, built_envs = len(tasks & names), len(envs & names)
    median = statistics.median(own) if own else None
    print(f"suite {suite}: {built_tasks} of {len(tasks)} task images and {built_envs} of "
          f"{len(envs)} environment images built, {_gb(disk)} on disk with shared layers "
          "counted once" + (f"; own layers per task image: median {_mb(median)}, largest "
                            f"{_mb(own[-1])}" if median is not None else ""))
    return {"suite": suite, "task_images": len(tasks), "task_images_built": built_tasks,
            "environment_images": len(envs), "environment_images_built": built_envs,
            "disk_use": disk, "own_median": median, "own_max": own[-1] if own else None}


def _prune(client: Any, spare: list[Image], dry_run: bool) -> list[str]:
    if not spare:
        print("no task image to remove")
        return []
    if dry_run:
        print(table([[i.name, _mb(i.own)] for i in spare], ["would remove", "own layers"]))
        return []
    removed, failed = image_usage.remove(client, spare)
    print(f"removed {len(removed)} task images")
    for line in failed:
        print(f"  kept {line}")
    return removed


def _image_json(image: Image) -> dict[str, Any]:
    return {"id": image.id, "tags": list(image.tags), "kind": image.kind, "size": image.size,
            "own": image.own, "containers": image.containers}


def _gb(n: int | float) -> str:
    return f"{n / 1e9:.1f} GB"


def _mb(n: int | float) -> str:
    return f"{n / 1e6:.0f} MB"
