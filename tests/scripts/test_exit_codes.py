"""One exit-status rule for every command (#35): 0 success, 1 could not do its job, 2 bad input,
130 interrupted. Before, a missing suite and a malformed tasks.jsonl exited 1 while a non-empty
--out and an unknown agent exited 2, and `serve --host` printed a bare message and exited 1."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from repogym.scripts.cli import COMMANDS, main

# command -> invocations that give it bad input ({tmp} is a scratch folder)
BAD_INPUT: dict[str, list[list[str]]] = {
    "doctor": [["doctor", "--prune-images", "--dry-run", "--keep", "no-such-suite"]],
    "images": [["images", "build", "--suite", "no-such-suite"],
               ["images", "base", "--python", "2.7"],
               ["images", "prune", "--budget", "lots"]],
    "swebench": [["swebench", "run", "{tmp}/missing.jsonl", "--out", "{tmp}/s"],
                 ["swebench", "run", "{tmp}/bad.jsonl", "--out", "{tmp}/s", "--kinds", "bogus"],
                 ["swebench", "report", "--out", "{tmp}/nothing-run"]],
    "tasks": [["tasks", "validate", "--suite", "{tmp}/bad.jsonl"],
              ["tasks", "validate", "--suite", "demo", "--task", "demo__nope-1"],
              ["tasks", "validate"],
              ["tasks", "export", "harbor", "--suite", "no-such-suite", "--out", "{tmp}/h"],
              ["tasks", "add", "git", "{tmp}/no-such-repo", "--out", "{tmp}/a"],
              ["tasks", "add", "swebench", "{tmp}/missing.jsonl", "--out", "{tmp}/b"],
              ["tasks", "add", "git", "{tmp}", "--out", "{tmp}/bad.jsonl"],
              ["tasks", "certify", "--suite", "no-such-suite"],
              ["tasks", "enrich", "--suite", "no-such-suite", "--out", "{tmp}/e"]],
    "eval": [["eval", "--suite", "no-such-suite", "--agent", "null"],
             ["eval", "--suite", "{tmp}/bad.jsonl", "--agent", "null"],
             ["eval", "--suite", "demo", "--agent", "no-such-agent"],
             ["eval", "--suite", "demo", "--predictions", "{tmp}/missing.jsonl"]],
    "show": [["show", "{tmp}/missing.jsonl"], ["show", "{tmp}/bad.jsonl"]],
    "bench": [["bench", "--only", "no-such-section"]],
    "train": [["train", "--suite", "no-such-suite", "--model", "tiny"]],
    "gateway": [["gateway"], ["gateway", "--scripted", "gold", "--suite", "no-such-suite"]],
    "serve": [["serve", "--suite", "no-such-suite", "--token", "t"],
              ["serve", "--host", "0.0.0.0", "--token", "t"]],
}

# command -> an invocation that cannot do its job when no Docker engine answers
NO_ENGINE: dict[str, list[str]] = {
    "doctor": ["doctor"],
    "images": ["images", "build", "--suite", "demo", "--split", "train"],
    "tasks": ["tasks", "enrich", "--suite", "demo", "--task", "demo__textkit-5", "--out",
              "{tmp}/e"],
    "eval": ["eval", "--suite", "demo", "--agent", "null", "--task", "demo__textkit-1",
             "--out", "{tmp}/run", "--retries", "0"],
    "bench": ["bench", "--only", "step", "--quick", "--out", "{tmp}/bench.json"],
}


def _run(argv: list[str]) -> tuple[int, str]:
    """``main(argv)``'s status (argparse's own errors exit 2 through SystemExit)."""
    try:
        return main(argv), ""
    except SystemExit as exc:
        return int(exc.code or 0), ""


def _fill(argv: list[str], tmp: Path) -> list[str]:
    return [a.replace("{tmp}", str(tmp)) for a in argv]


def test_every_command_has_its_cases() -> None:
    """A command added without cases here fails this test, not silently the rule."""
    assert set(BAD_INPUT) == set(COMMANDS)


@pytest.mark.parametrize("argv", [a for cases in BAD_INPUT.values() for a in cases],
                         ids=lambda a: " ".join(a))
def test_bad_input_exits_2_with_one_error_line(argv: list[str], tmp_path: Path,
                                               capsys: pytest.CaptureFixture[str]) -> None:
    (tmp_path / "bad.jsonl").write_text("{not json\n")
    code, _ = _run(_fill(argv, tmp_path))
    err = capsys.readouterr().err
    assert code == 2, err
    assert err.count("error:") == 1 and "Traceback" not in err, err


@pytest.mark.parametrize("command", sorted(NO_ENGINE))
def test_no_engine_means_the_command_could_not_do_its_job(command: str, tmp_path: Path) -> None:
    env = {**os.environ, "DOCKER_HOST": f"unix://{tmp_path}/no-engine.sock"}
    env.pop("REPOGYM_DOCKER_HOSTS", None)
    proc = subprocess.run([sys.executable, "-m", "repogym", *_fill(NO_ENGINE[command], tmp_path)],
                          env=env, capture_output=True, text=True, timeout=300)
    assert proc.returncode == 1, proc.stdout + proc.stderr
    assert "No Docker engine answers" in proc.stdout + proc.stderr


def test_a_port_in_use_means_the_server_could_not_start(tmp_path: Path,
                                                        capsys: pytest.CaptureFixture[str]
                                                        ) -> None:
    from repogym.agents.gateway.gateway import bind

    sock = bind("127.0.0.1", 0)
    sock.listen()
    port = str(sock.getsockname()[1])
    try:
        assert _run(["gateway", "--scripted", "gold", "--port", port])[0] == 1
        assert "cannot listen" in capsys.readouterr().err
        assert _run(["serve", "--token", "t", "--port", port])[0] == 1
        assert "cannot listen" in capsys.readouterr().err
    finally:
        sock.close()


def test_a_run_that_kept_nothing_exits_1_and_ctrl_c_130() -> None:
    """The two other statuses, as the rule's own function gives them (the commands' tests
    show them end to end: test_sources_growth for 1 and 130, the servers' for 130)."""
    from repogym.errors import DockerUnavailable, ImageBuildError, TaskError, UsageError
    from repogym.scripts.cli import exit_status

    assert exit_status(KeyboardInterrupt()) == 130
    assert [exit_status(e) for e in (UsageError("x"), TaskError("x"), ValueError("x"),
                                     FileNotFoundError(2, "x", "f"))] == [2, 2, 2, 2]
    assert [exit_status(e) for e in (DockerUnavailable(), ImageBuildError("x"),
                                     RuntimeError("x"), PermissionError(13, "x"))] == [1, 1, 1, 1]
