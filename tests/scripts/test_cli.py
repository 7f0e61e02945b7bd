"""The command line's start-up and its one error style: `repogym: error: ...`, a non-zero exit,
no traceback. None of these needs a Docker engine."""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
from pathlib import Path

import pytest

from repogym.scripts import cli
from repogym.scripts.cli import main
from repogym.suite import load_suite

HEAVY = ("gymnasium", "docker", "swebench", "datasets", "numpy", "torch")


def python(code: str, cwd: Path | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          timeout=120, cwd=cwd)


def error_of(argv: list[str], capsys: pytest.CaptureFixture[str]) -> tuple[int, str]:
    code = main(argv)
    err = capsys.readouterr().err
    assert err.startswith("repogym: error: ") and "Traceback" not in err, err
    assert err.count("\n") == 1, err  # one line
    return code, err


def test_help_and_version_import_nothing_heavy() -> None:
    code = ("import sys\nfrom repogym.scripts.cli import build_parser\n"
            "for argv in (['--help'], ['--version']):\n"
            "    try:\n        build_parser(argv).parse_args(argv)\n"
            "    except SystemExit:\n        pass\n"
            f"print(sorted(m for m in sys.modules if m.split('.')[0] in {HEAVY!r}))")
    done = python(code)
    assert done.returncode == 0, done.stderr
    assert "COMMAND" in done.stdout and "eval" in done.stdout
    assert done.stdout.strip().splitlines()[-1] == "[]", done.stdout


def test_every_command_is_listed_and_its_parser_loads() -> None:
    for name in cli.COMMANDS:
        parser = cli.build_parser([name])
        with pytest.raises(SystemExit) as exited:
            parser.parse_args([name, "--help"])
        assert exited.value.code == 0


Parsers = list[tuple[str, argparse.ArgumentParser]]


def _parsers(parser: argparse.ArgumentParser, path: str) -> Parsers:
    found = [(path, parser)]
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for name, child in action.choices.items():
                found += _parsers(child, f"{path} {name}")
    return found


def test_every_flag_has_help_and_no_markup_shows() -> None:
    for name in cli.COMMANDS:
        top = cli.build_parser([name])
        for path, parser in _parsers(top, "repogym")[1:]:
            if not path.startswith(f"repogym {name}"):
                continue
            assert "``" not in (parser.description or ""), path
            for action in parser._actions:
                if isinstance(action, argparse._HelpAction | argparse._SubParsersAction):
                    continue
                assert action.help, f"{path} {action.option_strings or action.dest}: no help"
                assert "``" not in action.help, f"{path} {action.option_strings}"
    eval_help = cli.build_parser(["eval"])._subparsers._group_actions[0].choices["eval"]
    assert "replication" in eval_help.format_help()  # every reward is named


def test_gymnasium_registration_works_in_either_import_order() -> None:
    for first, second in (("repogym", "gymnasium"), ("gymnasium", "repogym")):
        done = python(f"import sys, {first}, {second}\n"
                      "assert 'repogym/SWE-v0' in gymnasium.registry\n"
                      "print(gymnasium.__spec__.loader.__class__.__name__)")
        assert done.returncode == 0, done.stderr
        assert done.stdout.strip() == "SourceFileLoader"  # the module keeps its own loader
    done = python("import sys, repogym\nprint('gymnasium' in sys.modules)")
    assert done.stdout.strip() == "False", done.stderr


def test_unknown_agent(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    code, err = error_of(["eval", "--suite", "demo", "--agent", "nosuchagent", "--out",
                          str(tmp_path / "run")], capsys)
    assert code == 2 and "unknown agent 'nosuchagent'" in err and "gold" in err
    assert not (tmp_path / "run").exists()


def test_show_on_what_is_no_record(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    code, err = error_of(["show", str(tmp_path / "missing.jsonl")], capsys)
    assert code == 2 and "does not exist" in err
    (tmp_path / "results.jsonl").write_text(json.dumps({"instance_id": "a"}) + "\n")
    code, err = error_of(["show", str(tmp_path / "results.jsonl")], capsys)
    assert code == 2 and "is a results file" in err
    (tmp_path / "notes.txt").write_text("hello\n")
    code, err = error_of(["show", str(tmp_path / "notes.txt")], capsys)
    assert code == 2 and "line 1 is not JSON" in err
    (tmp_path / "blob.bin").write_bytes(b"\xff\xfe\x00")
    assert error_of(["show", str(tmp_path / "blob.bin")], capsys)[0] == 2
    code, err = error_of(["show", str(tmp_path)], capsys)
    assert code == 2 and "is a folder" in err


def test_validate_and_eval_on_a_task_or_split_that_is_not_there(
        capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    code, err = error_of(["tasks", "validate", "--suite", "demo", "--task", "NO_SUCH_ID"], capsys)
    assert code == 2 and "no task 'NO_SUCH_ID'" in err  # bad input (#35: it was 1)
    code, err = error_of(["tasks", "validate", "--suite", "demo", "--task", "demo__textkit-1x"],
                         capsys)
    assert "close matches: demo__textkit-1" in err
    code, err = error_of(["eval", "--suite", "adversarial", "--agent", "hacker", "--out",
                          str(tmp_path / "a")], capsys)
    held = len(load_suite("adversarial"))  # the suite grows with the attacks
    assert code == 2 and f"no 'eval' tasks (it holds adversarial: {held})" in err
    code, err = error_of(["eval", "--suite", "demo", "--task", "demo__textkit-5", "--out",
                          str(tmp_path / "b")], capsys)  # a train task
    assert "is in split 'train'" in err and "--split train" in err
    code, err = error_of(["images", "build", "--suite", str(tmp_path / "nope")], capsys)
    assert code == 2 and "neither a built-in suite" in err


def test_bad_flags_and_files(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    assert error_of(["eval"], capsys)[0] == 2
    assert error_of(["eval", "--suite", "demo", "--agent-option", "x"], capsys)[0] == 2
    assert "holds no config.json" in error_of(["eval", "--rerun", str(tmp_path)], capsys)[1]
    (tmp_path / "preds.jsonl").write_text("garbage\n")
    code, err = error_of(["eval", "--suite", "demo", "--predictions",
                          str(tmp_path / "preds.jsonl"), "--out", str(tmp_path / "p")], capsys)
    assert "neither JSON nor JSON Lines" in err
    (tmp_path / "file").write_text("x")
    code, err = error_of(["tasks", "add", "synthetic", str(tmp_path / "file"), "--out",
                          str(tmp_path / "o")], capsys)
    assert "no git bundle" in err
    assert error_of(["bench", "--only", "warp"], capsys)[0] == 2


def test_unexpected_errors_are_one_line_unless_debugging(
        capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch) -> None:
    def broken(_args: object) -> int:
        raise KeyError("boom")

    monkeypatch.setattr("repogym.scripts.show.run", broken)
    code, err = error_of(["show", "x"], capsys)
    assert code == 1 and "unexpected KeyError: 'boom'" in err and "REPOGYM_DEBUG=1" in err
    monkeypatch.setenv("REPOGYM_DEBUG", "1")
    assert main(["show", "x"]) == 1
    assert "Traceback" in capsys.readouterr().err


def test_the_console_script_prints_no_traceback(tmp_path: Path) -> None:
    done = subprocess.run([sys.executable, "-m", "repogym", "show", str(tmp_path / "x.jsonl")],
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 2 and done.stdout == ""
    assert done.stderr.startswith("repogym: error: ") and "Traceback" not in done.stderr


def test_show_names_the_episode_a_branch_forked_from(capsys: pytest.CaptureFixture[str],
                                                     tmp_path: Path) -> None:
    from repogym.envs.record import EpisodeRecorder

    recorder = EpisodeRecorder(tmp_path, "toy__calc-1", 1, "run")
    recorder.write("reset", task_id="toy__calc-1", task_hash="h", observation="Fix it.",
                   image="repogym/repo:x", fork={"snapshot": "s1", "step": 3,
                                                 "parent_record": "a.jsonl",
                                                 "parent_snapshot": None})
    recorder.close()
    assert main(["show", str(recorder.path)]) == 0
    out = capsys.readouterr().out
    assert "fork: from snapshot s1 at step 3 of a.jsonl\n" in out


def test_a_module_of_repogym_that_does_not_import_is_a_broken_install(
        monkeypatch: pytest.MonkeyPatch, tmp_path: Path,
        capsys: pytest.CaptureFixture[str]) -> None:
    """An editable install made before the checkout gained a package (images/, sandbox/) fails
    to import repogym's own modules: that is said as such, not as a missing optional extra
    (`pip install 'repogym[train]'`) with an empty `--help`."""
    (tmp_path / "needs_an_extra.py").write_text("import no_such_package_xyz\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.setitem(cli.COMMANDS, "gone", ("repogym.scripts.no_such_module", "gone"))
    monkeypatch.setitem(cli.COMMANDS, "extra", ("needs_an_extra", "needs an extra"))
    assert cli.main(["gone", "--help"]) == cli.FAILED
    err = capsys.readouterr().err
    assert "lacks its own module repogym.scripts.no_such_module" in err and "install it" in err
    assert cli.main(["extra"]) == cli.FAILED
    assert "pip install 'repogym[train]'" in capsys.readouterr().err
