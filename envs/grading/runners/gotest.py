"""``go test -json``: test2json's events (the go command's, framed apart from what the test
binary prints since Go 1.20) are the machine-readable results; the text of their ``output``
events is what ``go test -v`` prints, read by swebench's ``parse_log_gotest``. Test ids are the
names ``go test`` prints (``TestX``, ``TestX/sub``), as in SWE-bench Multilingual."""

from __future__ import annotations

import json
import posixpath
import random
import re
import shlex

from repogym.schema import Environment

from .language import OUT, Canary, Results, camel, invocation, merge, plain_exit, put, words

ACTIONS = {"pass": "PASSED", "fail": "FAILED", "skip": "SKIPPED"}
_PACKAGE = re.compile(r"^package\s+(\w+)", re.M)


class GoTest:
    name = "gotest"
    log_parser = "gotest"
    default_cmd = "go test"

    def command(self, env: Environment, files: list[str]) -> str:
        cmd = invocation(env, self.default_cmd)
        dirs = {posixpath.dirname(f) for f in files}
        packages = sorted(f"./{d}" if d else "." for d in dirs) or ["./..."]
        # the console log is rebuilt from the events; build errors come on stderr
        # the grading container's /tmp cannot hold executables: test binaries go to $HOME
        return (f"mkdir -p \"$HOME/.cache/go-tmp\" && export GOTMPDIR=\"$HOME/.cache/go-tmp\"; "
                f"{cmd} -json -count=1 {shlex.join(packages)} > {OUT}/go.json; __rc=$?; "
                f"python3 -c 'import json,sys\n"
                f"for l in open(sys.argv[1], errors=\"replace\"):\n"
                f" try: e = json.loads(l)\n except ValueError: print(l, end=\"\"); continue\n"
                f" if isinstance(e, dict): print(e.get(\"Output\") or \"\", end=\"\")' "
                f"{OUT}/go.json; exit $__rc")

    def parse(self, outputs: dict[str, str], log: str) -> dict[str, str]:
        """Each test of each package ends once with ``-count=1``. test2json reads what a test
        binary prints before its first framed line as the binary's own, so a package that
        prints ``--- PASS: TestX`` when it loads makes a second ending for TestX: a conflict."""
        statuses = Results()
        ended: set[tuple[str, str]] = set()
        for line in outputs.get("go.json", "").splitlines():
            try:
                event = json.loads(line)
            except ValueError:
                continue
            if isinstance(event, dict) and event.get("Test") and event.get("Action") in ACTIONS:
                test = str(event["Test"])
                key = (str(event.get("Package", "")), test)
                if key in ended:
                    statuses.conflicts.add(test)
                ended.add(key)
                merge(statuses, test, ACTIONS[str(event["Action"])])
        return statuses

    def log_key(self, test_id: str) -> str:
        return test_id

    def canary(self, test_files: list[str], rng: random.Random) -> Canary:
        folder = posixpath.dirname(test_files[0]) if test_files else ""
        a, b = words(rng)
        path = posixpath.join(folder, f"{a}_{b}_test.go")
        x, y = words(rng)
        good, bad, n = f"Test{camel([a, x])}", f"Test{camel([b, y])}", rng.randint(3, 97)
        body = (f"\n\nimport \"testing\"\n\nfunc {good}(t *testing.T) {{\n\ts := 0\n"
                f"\tfor i := 0; i < {n}; i++ {{\n\t\ts += i\n\t}}\n"
                f"\tif s != {n * (n - 1) // 2} {{\n\t\tt.Fatalf(\"sum %d\", s)\n\t}}\n}}\n\n"
                f"func {bad}(t *testing.T) {{\n\tv := []int{{{n}, 1}}\n"
                f"\tif v[0] > v[1] {{\n\t\tt.Fatalf(\"order %v\", v)\n\t}}\n}}\n")
        # the package clause of a test file beside it (an external _test package works too)
        d = shlex.quote(folder or ".")
        script = (f"__rg_pkg=$(sed -n 's/^package \\([A-Za-z0-9_]*\\).*/\\1/p' "
                  f"{d}/*_test.go {d}/*.go 2>/dev/null | head -1); "
                  f"[ -n \"$__rg_pkg\" ] || __rg_pkg=main; "
                  f"{put(path, 'package __RG_PKG__' + body)} && "
                  f"sed -i \"s/__RG_PKG__/$__rg_pkg/\" {shlex.quote(path)}")
        return Canary(path, script, {good: "PASSED", bad: "FAILED"})

    def exit_problem(self, code: int, statuses: dict[str, str]) -> str | None:
        if code == 2:  # a build failure: the tests it hid are missing, not a forged exit
            return None
        return plain_exit(code, statuses, ok=0)

    def built(self, log: str, statuses: dict[str, str]) -> bool | None:
        return "[build failed]" not in log and "[setup failed]" not in log
