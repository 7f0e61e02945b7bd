"""`repogym doctor [--cleanup]`: the engine, images, disk and leftover containers."""

from __future__ import annotations

import argparse
import shutil

from repogym.envs.sandbox import owners
from repogym.envs.sandbox.client import docker_client
from repogym.scripts.common import table, write_json


def add_parser(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("doctor", help="check Docker, images, disk; remove leftover containers")
    p.add_argument(
        "--cleanup",
        action="store_true",
        help="remove containers left by repogym processes that are gone",
    )
    p.add_argument(
        "--all",
        action="store_true",
        help="with --cleanup: remove every repogym container, live owners' too",
    )
    p.add_argument(
        "--json", default=None, help="write the report as JSON to this path (- for stdout)"
    )
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    client = docker_client()
    version = client.version()
    images = [
        img for img in client.images.list() if any(t.startswith("repogym/") for t in img.tags)
    ]
    image_rows = [
        [t, f"{img.attrs.get('Size', 0) / 1e6:.0f} MB"]
        for img in images
        for t in img.tags
        if t.startswith("repogym/")
    ]
    mine = owners.leftovers(client, include_live=True)
    dead = owners.leftovers(client)
    free = shutil.disk_usage(client.info().get("DockerRootDir") or "/").free
    print(
        f"Docker engine {version.get('Version')} (API {version.get('ApiVersion')}), "
        f"disk free {free / 1e9:.1f} GB"
    )
    print(table(sorted(image_rows), ["image", "size"]) if image_rows else "no repogym images")
    print(f"repogym containers: {len(mine)} ({len(dead)} left by dead processes)")
    removed: list[str] = []
    if args.cleanup:
        removed = owners.remove_containers(mine if args.all else dead)
        print(f"removed {len(removed)} containers")
    elif dead:
        print("run `repogym doctor --cleanup` to remove the leftovers")
    write_json(
        args.json,
        {
            "engine": version.get("Version"),
            "api": version.get("ApiVersion"),
            "disk_free": free,
            "images": [{"tag": r[0], "size": r[1]} for r in image_rows],
            "containers": [c.name for c in mine],
            "leftovers": [c.name for c in dead],
            "removed": removed,
        },
    )
    return 0
