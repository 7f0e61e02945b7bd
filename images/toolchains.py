"""Base images for languages other than Python, built the same offline way.

Each toolchain image starts from the Python base (:func:`.python_base.ensure_base`: Debian
bookworm from debootstrap, git, Python, the unprivileged user; the harness's scripts need its
Python) and adds Debian's packages for the toolchain. Nothing is downloaded while an episode
runs: a repository's dependencies are fetched by its ``setup`` commands when its image is built.

- javascript, typescript: ``nodejs``, and npm itself from the npm registry (one pinned tarball
  with its dependencies bundled, checked against its published sha512: Debian's ``npm`` is
  some 360 packages that take minutes to install); dependencies with ``npm ci`` /
  ``npm install`` from the npm registry.
- go: ``golang-1.23`` (bookworm-backports), the standard library built into the shared build
  cache; modules with ``go mod download`` through
  ``GOPROXY`` (Go's default, or ``REPOGYM_GOPROXY``); none for a module without requirements.
- rust: ``rustc``, ``cargo``; crates from cargo's registry, or with ``REPOGYM_CRATES=debian``
  Debian's ``librust-*-dev`` packages as a local registry (cargo's source replacement).
- java: ``openjdk-17-jdk-headless``, ``maven``, ``junit4``, ``junit5``; jars from Debian's
  ``/usr/share/java`` (``lib*-java`` packages) for the plain ``javac`` + JUnit console runner.

Every toolchain image also carries the harness's own test-runner helpers under
``/opt/repogym`` (root's, read-only for the tests' user) and a global git ignore file for build
output (``node_modules/``, ``target/``), so that dependencies and builds never enter a diff.
"""

from __future__ import annotations

import time
from dataclasses import dataclass

from repogym import settings
from repogym.errors import ImageBuildError
from repogym.images import runner_files
from repogym.images.build import BUILD_DIR, Layer, build_layer
from repogym.images.python_base import BASE_ENV, RECIPE_VERSION, base_tag, ensure_base
from repogym.images.recipe import (
    LABEL_USER,
    PREAMBLE,
    USER,
    WORKDIR,
    BuiltImage,
    build_files,
    digest,
    has_image,
    log_tail,
)
from repogym.progress import Progress
from repogym.sandbox.client import docker_client

TOOLCHAIN_RECIPE = "2"
BASE_PATH = dict(e.split("=", 1) for e in BASE_ENV)["PATH"]
BASE_PYTHON = "3.11"  # bookworm: the toolchains are Debian 12's


@dataclass(frozen=True)
class Toolchain:
    """One language's base image: Debian packages, environment, and a check that it works."""

    name: str
    packages: tuple[str, ...]
    env: tuple[tuple[str, str], ...] = ()
    backports: bool = False
    before: str = ""  # shell run before the packages go in, ending in "&& "
    after: str = "true"  # run once the packages are in (as root)
    check: str = "true"  # must succeed in the built image


GIT_IGNORE = "node_modules/\ntarget/\n.gradle/\n"

# npm 10.8 supports Node 18.17 and later (bookworm has 18.20); the digest is the registry's
NPM_VERSION = "10.8.2"
NPM_SHA512 = ("x/AIjFIKRllrhcb48dqUNAAZl0ig9+qMuN91RpZo3Cb2+zuibfh+KISl6+kVVyktDz230JKc208Uk"
              "QwwMqyB+w==")
NPM_TARBALL = f"https://registry.npmjs.org/npm/-/npm-{NPM_VERSION}.tgz"
INSTALL_NPM = f"""python3 - <<'__NPM__'
import base64, hashlib, io, tarfile, urllib.request
data = urllib.request.urlopen("{NPM_TARBALL}", timeout=120).read()
if base64.b64encode(hashlib.sha512(data).digest()).decode() != "{NPM_SHA512}":
    raise SystemExit("npm {NPM_VERSION}: the tarball's sha512 is not the published one")
with tarfile.open(fileobj=io.BytesIO(data)) as tar:
    for m in tar.getmembers():
        m.name = m.name.split("/", 1)[1] if "/" in m.name else ""
    tar.extractall("/usr/lib/node_modules/npm", [m for m in tar.getmembers() if m.name])
__NPM__
ln -sf ../lib/node_modules/npm/bin/npm-cli.js /usr/bin/npm
ln -sf ../lib/node_modules/npm/bin/npx-cli.js /usr/bin/npx
chown -R root:root /usr/lib/node_modules/npm && chmod -R a+rX,go-w /usr/lib/node_modules/npm"""

NODE = Toolchain(
    "node", ("nodejs",),
    env=(("NPM_CONFIG_UPDATE_NOTIFIER", "false"), ("NPM_CONFIG_FUND", "false"),
         ("NPM_CONFIG_AUDIT", "false")),
    after=INSTALL_NPM,
    check=f"node --version && test \"$(npm --version)\" = {NPM_VERSION}",
)
GO = Toolchain(
    "go", ("golang-1.23-go",), backports=True,
    # Go would download a newer toolchain that a go.mod asks for: never, the episode is
    # offline. The module cache is shared and root's; the build cache is the tests' user's.
    env=(("PATH", "/usr/lib/go-1.23/bin:" + BASE_PATH), ("GOTOOLCHAIN", "local"),
         ("GOPATH", "/opt/go"), ("GOMODCACHE", "/opt/go/pkg/mod"),
         ("GOCACHE", "/opt/go/cache"), ("GOPROXY", "off"), ("GOFLAGS", "-buildvcs=false"),
         ("CGO_ENABLED", "0")),
    # Debian's Go ships the standard library as source: built once here, with the episodes'
    # settings (CGO_ENABLED=0), the cache serves every task image's and episode's builds
    # instead of each compiling it again. Writable by all, as the task setup leaves it.
    after=("mkdir -p /opt/go/pkg/mod /opt/go/cache && go build std "
           "&& chmod -R a+rwX /opt/go/cache && chmod 1777 /opt/go/cache"),
    check="go version && test -z \"$(go list -f '{{if .Stale}}{{.ImportPath}}{{end}}' std)\"",
)
RUST = Toolchain(
    "rust", ("rustc", "cargo"),
    env=(("CARGO_HOME", "/opt/cargo"), ("CARGO_NET_OFFLINE", "true"),
         ("CARGO_TERM_COLOR", "never"), ("CARGO_INCREMENTAL", "0")),
    after="mkdir -p /opt/cargo && chmod 755 /opt/cargo",
    check="cargo --version && rustc --version",
)
JAVA = Toolchain(
    "java", ("openjdk-17-jdk-headless", "maven", "junit4", "junit5", "libhamcrest-java"),
    # the JDK's postinst links its man pages; debootstrap's clean-up removed the folder
    before="mkdir -p /usr/share/man/man1 && ",
    env=(("JAVA_TOOL_OPTIONS", "-Dfile.encoding=UTF-8"),),
    after=runner_files.BUILD_JAVA_LISTENER,
    check="javac -version && test -s /opt/repogym/junit/repogym-listener.jar",
)

TOOLCHAINS: dict[str, Toolchain] = {
    "javascript": NODE, "typescript": NODE, "go": GO, "rust": RUST, "java": JAVA,
}


def toolchain(language: str) -> Toolchain:
    if language not in TOOLCHAINS:
        raise ValueError(f"no toolchain for language {language!r}; valid: {sorted(TOOLCHAINS)}")
    return TOOLCHAINS[language]


def toolchain_tag(language: str) -> str:
    """Names what the image is: its base, script and the harness's files (never the CA)."""
    chain = toolchain(language)
    recipe = digest(RECIPE_VERSION, TOOLCHAIN_RECIPE, base_tag(BASE_PYTHON), script(chain),
                     chain.env, runner_files.digest())
    return f"repogym/toolchain:{chain.name}-{recipe}"


def ensure_toolchain(language: str, progress: Progress = print) -> BuiltImage:
    """The toolchain's base image for ``language``, built unless it exists."""
    client = docker_client()
    tag = toolchain_tag(language)
    if has_image(client, tag):
        return BuiltImage(tag, "", True, 0.0)
    start = time.monotonic()
    chain = toolchain(language)
    base = ensure_base(BASE_PYTHON, progress).tag
    progress(f"building {tag} from {base} (Debian's {', '.join(chain.packages)})")
    files = {**build_files(), **{f"/opt/{name}": data
                                  for name, data in runner_files.context().items()}}
    run = build_layer(Layer(image=base, tag=tag, script=script(chain), files=files,
                            labels={LABEL_USER: USER}, workdir=WORKDIR,
                            timeout=settings.BUILD_TIMEOUT.number(),
                            env=tuple(f"{k}={v}" for k, v in chain.env)), progress)
    if run.exit_code != 0:
        raise ImageBuildError(f"building {tag} failed (exit {run.exit_code}); its output "
                              f"ends:\n{log_tail(run.log)}")
    return BuiltImage(tag, "", False, time.monotonic() - start)


def script(chain: Toolchain) -> str:
    """The build script, run as root in a container of the Python base (with network)."""
    sources = ("echo 'deb http://deb.debian.org/debian bookworm-backports main' "
               "> /etc/apt/sources.list.d/backports.list\n" if chain.backports else "")
    release = " -t bookworm-backports" if chain.backports else ""
    return PREAMBLE + f"""
phase packages
{chain.before.removesuffix("&& ")}
{sources}apt-get update -qq
DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends{release} \\
  {' '.join(chain.packages)} >/tmp/apt.log 2>&1 || {{ tail -30 /tmp/apt.log; exit 1; }}
rm -rf /var/lib/apt/lists/* /tmp/apt.log /usr/share/doc /usr/share/man
phase harness
chown -R root:root /opt/repogym && chmod -R a+rX,go-w /opt/repogym
chmod 755 /opt/repogym/cargo-runner.sh
printf '{GIT_IGNORE.replace(chr(10), chr(92) + 'n')}' > /etc/repogym-gitignore
git config --system core.excludesFile /etc/repogym-gitignore
phase check
{chain.after}
{chain.check}
rm -rf {BUILD_DIR}
"""


def dockerfile(chain: Toolchain, base: str) -> str:
    """The recipe as a Dockerfile, for reading (``repogym images build`` runs ``script``)."""
    env = " ".join(f'{k}="{v}"' for k, v in chain.env)
    return f"FROM {base}\n{'ENV ' + env if env else ''}\nRUN <<EOF\n{script(chain)}EOF\n"


def require_toolchain(language: str) -> None:
    if language != "python" and language not in TOOLCHAINS:
        raise ImageBuildError(
            f"no base image recipe for language {language!r}; use one of "
            f"{sorted(TOOLCHAINS)} or set environment.image.")
