"""``cargo test``: each test binary runs through repogym's runner
(``/opt/repogym/cargo-runner.sh``), which gives libtest ``--logfile`` in the grader's folder,
one file per binary (``ok NAME`` / ``failed NAME`` / ``ignored NAME``, some with a message
before the name: ``logfile_records``): the machine-readable results. The console's
``test NAME ... ok`` lines are read by swebench's ``parse_log_cargo``. Test ids are libtest's
names (``tests::parses``), as in SWE-bench Multilingual; doc tests are not run."""

from __future__ import annotations

import posixpath
import random

from repogym.schema import Environment

from .language import OUT, Canary, Results, invocation, merge, plain_exit, put, words

LOGFILE = {"ok": "PASSED", "failed": "FAILED", "ignored": "SKIPPED"}


def logfile_records(text: str) -> list[str]:
    """libtest's logfile, one record per test: ``STATUS NAME``, where STATUS may carry a
    message before the name (``failed: test did not panic as expected NAME``, ``ignored: why
    NAME``), over several lines when the message has them (``#[should_panic(expected = ...)]``:
    the lines after the first start with spaces). The name, which has no spaces, ends it."""
    records: list[str] = []
    for line in text.splitlines():
        if line[:1].isspace() and records:
            records[-1] += "\n" + line
        elif line.strip():
            records.append(line.strip())
    return records


class CargoTest:
    name = "cargo"
    log_parser = "cargo"
    default_cmd = "cargo test"

    def command(self, env: Environment, files: list[str]) -> str:
        cmd = invocation(env, self.default_cmd)
        return ("__rg_host=$(rustc -vV | sed -n 's/^host: //p' | tr a-z- A-Z_); "
                f"export CARGO_TARGET_${{__rg_host}}_RUNNER=/opt/repogym/cargo-runner.sh "
                f"REPOGYM_OUT={OUT}; {cmd} --offline --no-fail-fast --lib --bins --tests "
                "-- --test-threads=2")

    def parse(self, outputs: dict[str, str], log: str) -> dict[str, str]:
        statuses: dict[str, str] = Results()
        for name, text in outputs.items():
            if not name.startswith("cargo/"):
                continue
            for record in logfile_records(text):
                words_ = record.split()
                status = LOGFILE.get(words_[0].rstrip(":,"))
                if status and len(words_) > 1:
                    merge(statuses, words_[-1], status)
        return statuses

    def log_key(self, test_id: str) -> str:
        return test_id

    def canary(self, test_files: list[str], rng: random.Random) -> Canary:
        a, b = words(rng)
        folder = next((posixpath.dirname(f) for f in test_files if f.startswith("tests/")),
                      "tests")
        path = posixpath.join(folder if folder.startswith("tests") else "tests", f"{a}_{b}.rs")
        x, y = words(rng)
        good, bad, n = f"{a}_{x}", f"{b}_{y}", rng.randint(3, 97)
        text = (f"#[test]\nfn {good}() {{\n    let s: u64 = (0..{n}u64).sum();\n"
                f"    assert_eq!(s, {n * (n - 1) // 2});\n}}\n\n"
                f"#[test]\nfn {bad}() {{\n    let mut v = vec![{n}u64, 1];\n    v.sort();\n"
                f"    assert_eq!(v, vec![{n}u64, 1]);\n}}\n")
        return Canary(path, put(path, text), {good: "PASSED", bad: "FAILED"})

    def exit_problem(self, code: int, statuses: dict[str, str]) -> str | None:
        return plain_exit(code, statuses, ok=0)

    def built(self, log: str, statuses: dict[str, str]) -> bool | None:
        return "error: could not compile" not in log and "error[E" not in log
