"""Whether an image's setup installed what it asked for, and which build tools leave after it.

``pip install -U x`` exits 0 without installing anything when the index cannot be reached and
``x`` is already satisfied, and a setup line such as ``pip install x; pip --version`` hides a
failure in its first half. So after the setup commands ran, the requests their pip commands
made (:func:`pip_requests`, parsed on the host) are checked in the container against the
environment's installed distributions (:func:`main`, run there by the environment's Python):
every named requirement is installed (at a version that satisfies it when it comes from the
last pip command), and the repository is installed from /testbed when a command installs it.

Then, in repogym's own environment, pip, setuptools and wheel are uninstalled unless setup
asked for them by name or an installed distribution needs them: their ``_vendor`` folders
hold copies of packaging, more-itertools, requests, urllib3, rich... (projects tasks are made
from), and an episode has no network for pip anyway.

This file also runs inside the container, so its top level imports only the standard library
and it runs on Python 3.8 and later.
"""

from __future__ import annotations

import json
import os
import re
import shlex
import site
import subprocess
import sys
from typing import Any

# pip install's options that take a value (given as the next word unless written --opt=value)
_VALUED = frozenset({
    "-r", "--requirement", "-c", "--constraint", "-e", "--editable", "-i", "--index-url",
    "--extra-index-url", "-f", "--find-links", "-t", "--target", "--prefix", "--root",
    "--src", "--upgrade-strategy", "--global-option", "--install-option", "-C",
    "--config-settings", "--platform", "--python-version", "--implementation", "--abi",
    "--no-binary", "--only-binary", "--progress-bar", "--log", "--log-file", "--cache-dir",
    "--trusted-host", "--retries", "--timeout", "--proxy", "--cert", "--client-cert",
    "--exists-action", "--report", "--root-user-action", "--python", "--keyring-provider",
    "--hash", "--build", "-b", "--path", "--group",
})
# a pip command with these installs somewhere else, or installs nothing: it is not checked
_ELSEWHERE = frozenset({"-t", "--target", "--prefix", "--root", "--user", "--dry-run",
                        "--python", "--path"})
_SEPARATORS = frozenset({"&&", "||", ";", "|", "&", "(", ")", ";;", "\n"})
BUILD_TOOLS = ("setuptools", "wheel", "pip")  # pip last: it uninstalls the others
_NAME = re.compile(r"^([A-Za-z0-9][A-Za-z0-9._-]*)")


def canonical(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


# ---------------------------------------------------------------------------- the host's side


def pip_requests(setup: list[str] | tuple[str, ...], workdir: str = "/testbed"
                 ) -> dict[str, list[Any]]:
    """What the pip install commands of ``setup`` ask for: ``requirements`` (each with the
    command it came from and whether that is the last pip command), requirement ``files`` and
    local ``paths`` it installs (absolute: each setup line starts in ``workdir`` and follows
    its own ``cd``), and ``names``: every distribution named, canonical."""
    pips: list[tuple[str, list[str]]] = []  # (the folder it runs in, its arguments)
    for line in setup:
        cwd = workdir
        for words in _simple_commands(line):
            if words[0] == "cd" and len(words) == 2 and "$" not in words[1]:
                cwd = os.path.normpath(os.path.join(cwd, os.path.expanduser(words[1])))
            args = _pip_install_args(words)
            if args is not None:
                pips.append((cwd, args))
    out: dict[str, list[Any]] = {"requirements": [], "files": [], "paths": [], "names": []}
    for n, (cwd, args) in enumerate(pips):
        if any(a.split("=", 1)[0] in _ELSEWHERE for a in args):
            continue
        last = n == len(pips) - 1
        for kind, value in _classify(args):
            if kind == "file":
                out["files"].append({"path": os.path.join(cwd, value), "last": last})
            elif kind == "path":
                out["paths"].append(os.path.normpath(os.path.join(cwd, value)))
            else:
                out["requirements"].append({"requirement": value, "last": last,
                                            "command": " ".join(["pip install", *args])[:200]})
    out["names"] = sorted({canonical(m.group(1)) for r in out["requirements"]
                           if (m := _NAME.match(r["requirement"]))})
    return out


def _simple_commands(line: str) -> list[list[str]]:
    """The simple commands of a shell line (words between ``&&``, ``;``, ``|``...); a line
    that does not split as shell words gives none."""
    lexer = shlex.shlex(line, posix=True, punctuation_chars=True)
    lexer.whitespace_split = True
    lexer.commenters = ""  # as in the shell, ``#`` starts a comment only where a word starts
    try:
        words = list(lexer)
    except ValueError:
        return []
    commands: list[list[str]] = [[]]
    for word in words:
        if word.startswith("#"):
            break
        if word in _SEPARATORS:
            commands.append([])
        else:
            commands[-1].append(word)
    return [c for c in commands if c]


def _pip_install_args(words: list[str]) -> list[str] | None:
    """The arguments after ``install`` when ``words`` run pip install, else None."""
    i = 0
    while i < len(words) and re.match(r"^[A-Za-z_][A-Za-z0-9_]*=", words[i]):
        i += 1  # NAME=value prefixes
    if i < len(words) and words[i] in ("env", "sudo", "command", "exec"):
        return _pip_install_args(words[i + 1:])
    rest = words[i:]
    program = os.path.basename(rest[0]) if rest else ""
    if re.fullmatch(r"pip(3(\.\d+)?)?", program):
        rest = rest[1:]
    elif re.fullmatch(r"python(3(\.\d+)?)?", program) and rest[1:3] == ["-m", "pip"]:
        rest = rest[3:]
    else:
        return None
    while rest and rest[0].startswith("-"):  # pip's general options before the subcommand
        rest = rest[2:] if rest[0] in _VALUED else rest[1:]
    return rest[1:] if rest and rest[0] == "install" else None


def _classify(args: list[str]) -> list[tuple[str, str]]:
    """Each argument of pip install as a requirement, a requirement file or a local path."""
    out: list[tuple[str, str]] = []
    i = 0
    while i < len(args):
        arg = args[i]
        option, eq, inline = arg.partition("=")
        if option in _VALUED and arg.startswith("-"):
            value = inline if eq else (args[i + 1] if i + 1 < len(args) else "")
            i += 1 if eq else 2
            if option in ("-r", "--requirement"):
                out.append(("file", value))
            elif option in ("-e", "--editable"):
                out.append(_target(value))
            continue
        i += 1
        if not arg.startswith("-"):
            out.append(_target(arg))
    return [x for x in out if x[0]]


def _target(arg: str) -> tuple[str, str]:
    """A requirement, a local path, or ("", "") for what cannot be checked (URLs without a
    name, archives, globs, variables)."""
    if any(c in arg for c in "$*?`") or not arg:
        return "", ""
    head = arg.split(";")[0]
    named = re.match(r"^\s*([A-Za-z0-9][A-Za-z0-9._-]*)\s*(\[[^\]]*\])?\s*@", head)
    if named and "://" in head:
        return "requirement", named.group(1)
    if "://" in arg or re.match(r"^(git|hg|svn|bzr)\+", arg):
        egg = re.search(r"#egg=([A-Za-z0-9._-]+)", arg)
        return ("requirement", egg.group(1)) if egg else ("", "")
    if arg.endswith((".whl", ".tar.gz", ".zip", ".tar.bz2", ".tgz")):
        return "", ""
    if arg.startswith((".", "/", "~")) or "/" in head:
        return "path", re.sub(r"\[[^\]]*\]$", "", os.path.expanduser(arg))
    return ("requirement", arg) if _NAME.match(arg) else ("", "")


def missing_message(tag: str, found: dict[str, Any], log: str) -> str:
    """What the build failure says: what is missing, where pip's output ends, what to do."""
    items = [str(x) for x in found.get("missing", [])]
    tail = "\n".join(line for line in log.splitlines() if line.strip()
                     and not line.startswith("REPOGYM-"))[-1500:]
    return (f"building {tag}: setup exited 0 but did not install what it asked for: "
            f"{'; '.join(items)}.\nIts output ends:\n{tail}\nIf the build cannot reach the "
            "package index (behind a proxy that intercepts TLS), set REPOGYM_CA_BUNDLE="
            "/path/to/ca.pem (the proxy's CA); otherwise fix the task's environment.setup.")


# ---------------------------------------------------------------------------- the container's


def _installed() -> dict[str, tuple[str, object]]:
    """Canonical name -> (version, distribution) of what this interpreter sees."""
    from importlib import metadata

    out: dict[str, tuple[str, object]] = {}
    for dist in metadata.distributions():
        name = dist.metadata["Name"]
        if name and canonical(name) not in out:
            out[canonical(name)] = (dist.version, dist)
    return out


def _checker() -> object:
    """``packaging`` when importable (versions and markers are then checked), else None."""
    try:
        from packaging.requirements import Requirement
    except ImportError:
        return None
    return Requirement


def _from_file(path: str, seen: set[str]) -> list[tuple[str, str]]:
    """Requirements and local paths in a requirements file (nested ``-r`` followed)."""
    path = os.path.abspath(path)
    if path in seen or not os.path.isfile(path):
        return []
    seen.add(path)
    out: list[tuple[str, str]] = []
    with open(path, encoding="utf-8", errors="replace") as f:
        for raw in f:
            line = re.sub(r"(^|\s)#.*$", "", raw).strip()
            if not line:
                continue
            if line.startswith(("-r ", "--requirement")):
                nested = line.split(None, 1)[1] if " " in line else line.split("=", 1)[1]
                out += _from_file(os.path.join(os.path.dirname(path), nested.strip()), seen)
            elif line.startswith(("-e ", "--editable")):
                kind, value = _target(line.split(None, 1)[1] if " " in line else "")
                if kind == "path":
                    value = os.path.normpath(os.path.join(os.path.dirname(path), value))
                out.append((kind, value))
            elif not line.startswith("-"):
                out.append(_target(line))
    return [x for x in out if x[0]]


def _holds(text: str, requirement: object, installed: dict[str, tuple[str, object]],
           strict: bool) -> str | None:
    """None when ``text`` is satisfied, else what is wrong."""
    match = _NAME.match(text)
    if not match:
        return None
    name = canonical(match.group(1))
    if requirement is not None:
        try:
            req = requirement(text)  # type: ignore[operator]
        except Exception:  # noqa: BLE001 - an unusual spelling: the name alone is checked
            req = None
        if req is not None and req.marker is not None and not req.marker.evaluate():
            return None
        if req is not None and name in installed and strict and req.specifier and \
                not req.specifier.contains(installed[name][0], prereleases=True):
            return f"{text} (installed: {installed[name][0]})"
    return None if name in installed else f"{text} (not installed)"


def _sources(dist: object) -> list[str]:
    """Where a distribution was installed from (a local folder), and where its metadata is."""
    out = []
    text = dist.read_text("direct_url.json") or ""  # type: ignore[attr-defined]
    try:
        url = json.loads(text).get("url", "") if text.strip() else ""
    except ValueError:
        url = ""
    if url.startswith("file://"):
        out.append(os.path.normpath(url[len("file://"):]))
    location = str(getattr(dist, "_path", ""))
    if location:  # an egg-info in the repository itself (``setup.py develop``)
        out.append(os.path.dirname(os.path.normpath(location)))
    return out


def _within(source: str, path: str) -> bool:
    return source == path or source.startswith(path.rstrip(os.sep) + os.sep)


def _from_repository(paths: list[str], installed: dict[str, tuple[str, object]]) -> list[str]:
    """The paths that no installed distribution came from."""
    sources = [s for _version, dist in installed.values() for s in _sources(dist)]
    return [p for p in paths if not any(_within(s, p) for s in sources)]


def check(wanted: dict[str, Any]) -> list[str]:
    """What of ``wanted`` (see :func:`pip_requests`) this interpreter does not have."""
    installed, requirement = _installed(), _checker()
    missing: list[str] = []
    for item in wanted.get("requirements", []):
        wrong = _holds(item["requirement"], requirement, installed, item["last"])
        if wrong:
            missing.append(f"{wrong} from `{item['command']}`")
    paths = list(wanted.get("paths", []))
    for item in wanted.get("files", []):
        if not os.path.isfile(item["path"]):
            missing.append(f"requirements file {item['path']} (does not exist)")
        for kind, value in _from_file(item["path"], set()):
            if kind == "path":
                paths.append(value)
                continue
            wrong = _holds(value, requirement, installed, item["last"])
            if wrong:
                missing.append(f"{wrong} from {item['path']}")
    for path in _from_repository(sorted(set(paths)), installed):
        what = "the repository" if path == os.getcwd() else path
        missing.append(f"{what} (pip install {path} left no installed distribution from it)")
    return missing


# modules of the build tools that a project's code imports at run time, by distribution
_TOOL_MODULES = {"pkg_resources": "setuptools", "setuptools": "setuptools", "wheel": "wheel",
                 "pip": "pip"}
_TOOL_IMPORT = re.compile(r"^\s*(?:from|import)\s+(pkg_resources|setuptools|wheel|pip)\b",
                          re.MULTILINE)


def imported_tools(root: str) -> set[str]:
    """The build tools the repository's code imports (Sphinx's ``from pkg_resources import
    iter_entry_points``, a test's ``importorskip("pkg_resources")`` aside): they are needed,
    as an installed distribution's requirement is. The root ``setup.py`` does not count: it
    runs at install, not in the tests."""
    found: set[str] = set()
    for folder, dirs, files in os.walk(root):
        dirs[:] = [d for d in dirs if not d.startswith(".") and d not in ("build", "dist")]
        for name in files:
            path = os.path.join(folder, name)
            if not name.endswith(".py") or path == os.path.join(root, "setup.py"):
                continue
            try:
                with open(path, encoding="utf-8", errors="replace") as f:
                    text = f.read()
            except OSError:
                continue
            found |= {_TOOL_MODULES[m] for m in _TOOL_IMPORT.findall(text)}
            if len(found) == len(set(_TOOL_MODULES.values())):
                return found
    return found


def prune(wanted: dict[str, Any]) -> list[str]:
    """Uninstalls the build tools nobody asked for or needs; returns their names."""
    installed = _installed()
    needed: set[str] = set(wanted.get("names", []))
    for name, (_version, dist) in installed.items():
        if name not in BUILD_TOOLS:
            for req in dist.requires or []:  # type: ignore[attr-defined]
                match = _NAME.match(req)
                if match and "extra ==" not in req:
                    needed.add(canonical(match.group(1)))
    needed |= imported_tools(os.getcwd())
    local = set(wanted.get("paths", [])) | {os.getcwd()}
    gone = [t for t in BUILD_TOOLS if t in installed and t not in needed and not any(
        _within(s, p) for s in _sources(installed[t][1]) for p in local)]
    if gone:
        subprocess.run([sys.executable, "-m", "pip", "uninstall", "-y", "-q", *gone],
                       check=True)
    return gone


def forget(folder: str) -> list[str]:
    """Uninstalls every distribution installed from ``folder`` (the repository an
    environment image installed only to pull in its dependencies) and returns their names;
    raises when a trace of the folder is left in ``sys.path`` afterwards (a ``.pth`` line),
    for the folder is about to be removed and the image must not hold its code."""
    installed = _installed()
    names = sorted(name for name, (_version, dist) in installed.items()
                   if any(_within(s, folder) for s in _sources(dist)))
    if names:
        subprocess.run([sys.executable, "-m", "pip", "uninstall", "-y", "-q", *names],
                       check=True)
    left = []
    for base in site.getsitepackages():
        for entry in sorted(os.listdir(base)) if os.path.isdir(base) else []:
            if entry.endswith(".pth"):
                with open(os.path.join(base, entry), encoding="utf-8", errors="replace") as f:
                    if any(_within(line.strip(), folder) for line in f):
                        left.append(os.path.join(base, entry))
    if left:
        raise RuntimeError(f"{folder} is still on sys.path through {left} after uninstalling "
                           f"{names}")
    return names


def main(argv: list[str]) -> int:
    """``python installed.py check|prune WANTED.json`` or ``forget FOLDER``: prints one
    ``REPOGYM-...`` line."""
    if argv[1] == "forget":
        print("REPOGYM-FORGOTTEN " + json.dumps(forget(argv[2])), flush=True)
        return 0
    with open(argv[2]) as f:
        wanted = json.load(f)
    if argv[1] == "check":
        missing = check(wanted)
        print("REPOGYM-MISSING " + json.dumps({"missing": missing}), flush=True)
        return 1 if missing else 0
    print("REPOGYM-PRUNED " + json.dumps(prune(wanted)), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
