"""The only code that talks to containers."""

from repogym.sandbox.base import ExecResult, Sandbox, SandboxConfig, SandboxLost

__all__ = ["ExecResult", "Sandbox", "SandboxConfig", "SandboxLost"]
