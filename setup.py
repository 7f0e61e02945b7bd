"""Package discovery for the folders that setup.cfg's ``package_dir`` maps onto ``repogym``.

setup.cfg's ``packages = find:`` searches one folder and names what it finds after that
folder, not after ``repogym``; listing the packages by hand left new ones out of the wheel
(``repogym.envs.backends`` and ``repogym.envs.grading.runners`` were missing, so a plain
``pip install`` was broken). So every package under each mapped folder is found here, named
under the mapping. The folders of repositories and data inside them (``tasks/demo``,
``tasks/adversarial``, ``tasks/data``) are package data (setup.cfg), never packages.
"""

import configparser
from pathlib import Path

from setuptools import find_packages, setup

ROOT = Path(__file__).resolve().parent
DATA = ("demo", "demo.*", "adversarial", "adversarial.*", "data", "data.*")


def mapped_packages() -> list[str]:
    config = configparser.ConfigParser()
    config.read(ROOT / "setup.cfg")
    found = []
    for line in config["options"]["package_dir"].strip().splitlines():
        name, _, folder = (part.strip() for part in line.partition("="))
        found.append(name)
        found += [f"{name}.{p}" for p in find_packages(str(ROOT / folder), exclude=DATA)]
    return sorted(set(found))


setup(packages=mapped_packages())
