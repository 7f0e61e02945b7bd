"""Where a dataset's repositories come from: a folder of mirrors, or a shared clone cache.

``--repos DIR`` holds mirrors as ``DIR/owner__name``, ``DIR/owner/name`` or
``DIR/owner+name/repo`` (each may end in ``.git``, or be a ``.bundle``). Without it, a
repository is cloned once from its public URL into a shared cache of bare mirrors
(``REPOGYM_MIRRORS``, default ``~/.cache/repogym/mirrors``) and fetched again when a commit is
missing. Suites made from these point at the mirror instead of copying it: one copy per
repository on the machine, not one per suite.
"""

from __future__ import annotations

import os
import subprocess
import tempfile
from dataclasses import dataclass, field
from pathlib import Path

from repogym import settings
from repogym.errors import TaskError
from repogym.tls import explain_certificate

from .common import run_git

# The repository's public address; {repo} is owner/name. REPOGYM_GIT_URL replaces it.
URL_TEMPLATE = "https://github.com/{repo}.git"
CLONE_TIMEOUT = 900.0
SYSTEM_CERTS = "/etc/ssl/certs/ca-certificates.crt"


def _git_env(tmp: Path) -> dict[str, str]:
    """git's environment for a clone: no prompt, and REPOGYM_CA_BUNDLE trusted besides the
    system's certificates, as image builds trust it (a proxy that intercepts TLS)."""
    env = {**os.environ, "GIT_TERMINAL_PROMPT": "0"}
    bundle = settings.CA_BUNDLE.get()
    if bundle:
        trust = tmp / "trust.pem"
        system = Path(SYSTEM_CERTS)
        try:
            extra = Path(bundle).read_bytes()
        except OSError as exc:
            raise TaskError(f"REPOGYM_CA_BUNDLE={bundle} cannot be read ({exc}): point it at a "
                            "PEM file or unset it.") from exc
        trust.write_bytes((system.read_bytes() + b"\n" if system.is_file() else b"") + extra)
        env["GIT_SSL_CAINFO"] = str(trust)
    return env


def cache_dir() -> Path:
    default = Path.home() / ".cache" / "repogym" / "mirrors"
    return Path(settings.MIRRORS.get() or default)


def find_mirror(repos: Path, repo: str) -> Path | None:
    """The mirror of ``repo`` in ``repos`` in any of the layouts above, or None."""
    owner, _, name = repo.partition("/")
    for base in (repos / f"{owner}__{name}", repos / owner / name, repos / f"{owner}+{name}"):
        for path in (base, base.with_name(base.name + ".git"),
                     base.with_name(base.name + ".bundle"), base / "repo"):
            if path.exists() and (path.is_file() or (path / "HEAD").exists()
                                  or (path / ".git").exists()):
                return path
    return None


def has_commit(mirror: Path, commit: str) -> bool:
    return run_git(mirror, "cat-file", "-t", commit, check=False).strip() == "commit"


@dataclass
class Mirrors:
    """Resolves repositories to local mirrors; clones into the cache when allowed."""

    repos: Path | None = None  # --repos DIR
    clone: bool = True  # clone into the cache when --repos lacks the repository
    failed: dict[str, str] = field(default_factory=dict, init=False)  # repo -> why not (once)

    def get(self, repo: str, commit: str | None = None) -> Path:
        """A mirror of ``repo`` that holds ``commit``; raises ``TaskError`` saying what to do."""
        if repo in self.failed:
            raise TaskError(self.failed[repo])
        if self.repos is not None:
            found = find_mirror(self.repos, repo)
            if found is not None and found.is_file():  # a bundle: git reads it as a clone
                found = self._unbundled(found, repo)
            if found is not None:
                if commit and not has_commit(found, commit):
                    raise TaskError(f"base commit missing: {commit} is not in {found}; "
                                    "update the mirror")
                return found
            if not self.clone:
                raise TaskError(f"no mirror: put {repo} at {self.repos}/"
                                f"{repo.replace('/', '__')}")
        return self._cached(repo, commit)

    def _unbundled(self, bundle: Path, repo: str) -> Path:
        """A bare mirror of ``bundle`` in the shared cache (made once; git cannot look up a
        commit inside a bundle file)."""
        path = cache_dir() / f"{repo.replace('/', '__')}.from-bundle.git"
        if not path.exists():
            path.parent.mkdir(parents=True, exist_ok=True)
            proc = subprocess.run(["git", "clone", "--quiet", "--mirror", str(bundle.resolve()),
                                   str(path)], capture_output=True, text=True)
            if proc.returncode:
                raise TaskError(f"{bundle} is no git bundle git can clone "
                                f"({proc.stderr.strip()[-200:]}); give a mirror or a bundle")
        else:
            run_git(path, "fetch", "--quiet", str(bundle.resolve()), "+refs/*:refs/*",
                    check=False)
        return path

    def _cached(self, repo: str, commit: str | None) -> Path:
        path = cache_dir() / f"{repo.replace('/', '__')}.git"
        if path.exists() and (not commit or has_commit(path, commit)):
            return path
        url = (settings.GIT_URL.get() or URL_TEMPLATE).format(repo=repo)
        args = (["git", "-C", str(path), "fetch", "--quiet", "--prune", "origin"] if path.exists()
                else ["git", "clone", "--quiet", "--mirror", url, str(path)])
        with tempfile.TemporaryDirectory(prefix="repogym-git-") as tmp:
            try:
                proc = subprocess.run(args, capture_output=True, text=True,
                                      timeout=CLONE_TIMEOUT, env=_git_env(Path(tmp)))
                error = proc.stderr.strip() if proc.returncode else ""
            except subprocess.TimeoutExpired:
                error = f"no answer in {CLONE_TIMEOUT:.0f} s"
        if error:
            where = f" under --repos {self.repos}" if self.repos else ""
            said = explain_certificate(error) or error.splitlines()[-1][:200]
            self.failed[repo] = (f"no mirror: {repo} is not{where} and cloning {url} failed "
                                 f"({said}); pass --repos DIR with a mirror at "
                                 f"DIR/{repo.replace('/', '__')}")
            raise TaskError(self.failed[repo])
        if commit and not has_commit(path, commit):
            raise TaskError(f"base commit missing: {commit} is not in {url} (fetched into {path})")
        return path
