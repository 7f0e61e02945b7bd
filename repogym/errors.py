"""One error hierarchy. Every message says what to do about it."""


class RepogymError(Exception):
    """Base class of every error repogym raises on purpose."""


DOCKER_FIX = ("Start one (`dockerd &` as root, or `make docker`), or set DOCKER_HOST, then run "
              "`repogym doctor`.")
PODMAN_FIX = ("Start rootless Podman's API (`podman system service --time=0 &` as the user that "
              "runs it, or `tools/ensure_podman.sh` as root), or set REPOGYM_PODMAN_HOST, then "
              "run `repogym doctor`.")


class DockerUnavailable(RepogymError):
    """No container engine answers (Docker, or Podman through its Docker-compatible API)."""

    def __init__(self, detail: str = "", fix: str = DOCKER_FIX) -> None:
        self.detail = detail
        what = "Podman engine" if fix == PODMAN_FIX else "Docker engine"
        super().__init__(f"No {what} answers" + (f" ({detail})" if detail else "") + f". {fix}")


class SandboxError(RepogymError):
    """The sandbox itself failed (not a command inside it)."""


class ImageBuildError(RepogymError):
    """An image could not be built."""


class SetupFailed(ImageBuildError):
    """A step of the repository's own setup failed while its image was built: the repository
    at that commit does not install (not an infrastructure failure)."""


class UsageError(RepogymError):
    """A command was given something it cannot use: a missing file, a file of another kind,
    an unknown name. The command line exits 2 for it (bad input)."""


class TaskError(UsageError):
    """A task or suite is malformed or cannot be found (bad input, as every UsageError)."""


class SourceIncomplete(TaskError):
    """A task's repository lacks objects of the commit it names (a partial or shallow clone, a
    mirror whose largest files were left out): its tree cannot be written out whole."""


class GradingError(RepogymError):
    """The grader could not run (an infrastructure failure, never an agent failure)."""


class ActionError(RepogymError):
    """An action could not be parsed; the env turns it into an observation."""


class SetupIncomplete(ImageBuildError):
    """The setup commands of an image exited 0 but did not install what they asked for
    (typically: the package index could not be reached and pip said nothing was to do)."""
