"""Every ``REPOGYM_*`` environment variable repogym reads, in one place.

Each is read when it is used, never at import, so a variable set after ``import repogym`` (in
a notebook, a test, a parent process that serves its children) counts. An empty value is the
same as an unset one. The manual's settings page (docs/settings.md) is made from
:data:`SETTINGS` when it is built.
"""

from __future__ import annotations

import os
from dataclasses import dataclass


@dataclass(frozen=True)
class Setting:
    """One environment variable: its name, its default (as text) and what it does."""

    name: str
    default: str
    help: str

    def get(self) -> str:
        return os.environ.get(self.name) or self.default

    def is_on(self) -> bool:
        """For switches: ``1`` turns them on."""
        return self.get() == "1"

    def number(self) -> float:
        text = self.get()
        try:
            value = float(text)
        except ValueError:
            raise ValueError(f"{self.name}={text!r} is not a number: {self.help}") from None
        if not value > 0:
            raise ValueError(f"{self.name}={text!r} must be positive: {self.help}")
        return value

    def integer(self) -> int:
        value = self.number()
        if value != int(value):
            raise ValueError(f"{self.name}={self.get()!r} is not a whole number: {self.help}")
        return int(value)


# --- containers ------------------------------------------------------------------------------
RUN_ID = Setting("REPOGYM_RUN_ID", "", "the run id in container names and labels (letters, "
                 "digits, '-'); default: one per process")
DOCKER_HOSTS = Setting("REPOGYM_DOCKER_HOSTS", "", "several Docker engines, separated by commas "
                       "or spaces (unix://, ssh://, tcp:// with TLS; ?slots=N): each process "
                       "takes the one with the most free slots")
IMAGE_SOURCES = Setting("REPOGYM_IMAGE_SOURCES", "", "more engines that images may be copied "
                        "from (same form as REPOGYM_DOCKER_HOSTS)")
DOCKER_TIMEOUT = Setting("REPOGYM_DOCKER_TIMEOUT", "120", "seconds an engine call may take")
MAX_STARTS = Setting("REPOGYM_MAX_STARTS", "4", "container starts a process runs at once (read "
                     "at the first start)")
POOL_BROKER = Setting("REPOGYM_POOL_BROKER", "", "set by a process that serves its shared "
                      "pools to its children (a vector env's workers); not for users")

BACKEND = Setting("REPOGYM_BACKEND", "docker", "the sandbox backend when none is named: docker, "
                  "podman (rootless, through its Docker-compatible socket), bwrap (daemonless, "
                  "bubblewrap over exported root file systems) or fake (no isolation)")
PODMAN_HOST = Setting("REPOGYM_PODMAN_HOST", "", "the Podman API socket of the podman backend "
                      "(unix:///path/podman.sock); default: $XDG_RUNTIME_DIR/podman/podman.sock, "
                      "as root the repogym-podman user's")
ROOTFS_DIR = Setting("REPOGYM_ROOTFS_DIR", "", "where the bwrap backend keeps images exported "
                     "as root file systems; default: ~/.cache/repogym/rootfs, as root "
                     "/var/lib/repogym/rootfs")
SANDBOX_USER = Setting("REPOGYM_SANDBOX_USER", "repogym-sandbox", "the unprivileged user the "
                       "bwrap backend runs its sandboxes as when repogym runs as root")

# --- images ----------------------------------------------------------------------------------
CA_BUNDLE = Setting("REPOGYM_CA_BUNDLE", "", "a PEM file that build steps trust too (a proxy "
                    "that intercepts TLS); never part of an image")
BASE_IMAGE = Setting("REPOGYM_BASE_IMAGE", "", "an image to build the Python base on instead of "
                     "a debootstrapped root ({python} is replaced by the version)")
PULL = Setting("REPOGYM_PULL", "", "1: pull REPOGYM_BASE_IMAGE and a dataset's own images when "
               "the engine lacks them")
DEBIAN_MIRROR = Setting("REPOGYM_DEBIAN_MIRROR", "", "the Debian mirror debootstrap uses")
REGISTRIES = Setting("REPOGYM_REGISTRIES", "debian,pypi,npm", "the package registries image "
                     "builds reach, of debian, pypi, npm, go, crates, maven: SWE-bench "
                     "Multilingual instances whose dependencies need another are refused")
BUILD_TIMEOUT = Setting("REPOGYM_BUILD_TIMEOUT", "3600", "seconds an image build may take")

# --- task sources ----------------------------------------------------------------------------
MIRRORS = Setting("REPOGYM_MIRRORS", "", "where repositories are cloned once and kept; "
                  "default: ~/.cache/repogym/mirrors")
GIT_URL = Setting("REPOGYM_GIT_URL", "", "the address repositories are cloned from ({repo} is "
                  "owner/name); default: the repository's public address")

# --- agents and commands ---------------------------------------------------------------------
LLM_MODEL = Setting("REPOGYM_LLM_MODEL", "", "the model the llm agent, the harnesses and "
                    "`tasks add --llm-base-url` use (with OPENAI_BASE_URL, OPENAI_API_KEY)")
CALLS_DIR = Setting("REPOGYM_CALLS_DIR", "runs/calls", "where the gateway records a harness's "
                    "model calls when no run folder is given")
TOKEN = Setting("REPOGYM_TOKEN", "", "the shared token of `repogym serve`")
DEBUG = Setting("REPOGYM_DEBUG", "", "set (to 1, say): the command line shows the traceback of "
                "an unexpected error")

SETTINGS: tuple[Setting, ...] = (
    RUN_ID, DOCKER_HOSTS, IMAGE_SOURCES, DOCKER_TIMEOUT, MAX_STARTS, POOL_BROKER, BACKEND,
    PODMAN_HOST, ROOTFS_DIR, SANDBOX_USER, CA_BUNDLE,
    BASE_IMAGE, PULL, DEBIAN_MIRROR, REGISTRIES, BUILD_TIMEOUT, MIRRORS, GIT_URL, LLM_MODEL,
    CALLS_DIR, TOKEN, DEBUG,
)
