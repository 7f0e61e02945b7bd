"""SWE-bench Multilingual: swebench 4.1's JavaScript, Go, Rust and Java specs as data, their
translation into repogym's language environments (pinned on the published values), and what
is refused here with its reason."""

from __future__ import annotations

import json
import subprocess
import time
from pathlib import Path

import pytest
from multilingual_fixture import TEST, git, make_gson_like, write

from repogym.schema import Task
from repogym.tasks.sources import specs_langs
from repogym.tasks.sources.common import Rejected, SourceOptions
from repogym.tasks.sources.datasets import load_rows
from repogym.tasks.sources.specs import SpecError, published, unknown_spec_reason
from repogym.tasks.sources.specs_langs import language_spec, translate
from repogym.tasks.sources.swebench import SwebenchOptions, SwebenchSource

GSON = "com.google.gson.functional.PrimitiveTest"


def test_the_data_file_keeps_the_published_multilingual_specs() -> None:
    data = published()
    gson = language_spec("google/gson", "2158")
    assert gson is not None
    assert gson["docker_specs"] == {"java_version": "11"}
    assert gson["install"] == ["mvn clean install -B -pl gson -DskipTests -am"]
    assert len(gson["test_cmd"]) == 10
    assert gson["test_cmd"][0] == f"mvnd test -B -T 1C -pl gson -Dtest={GSON}#testByteSerialization"
    assert language_spec("caddyserver/caddy", "6411") == {
        "docker_specs": {"go_version": "1.23.8"}, "install": ["go mod tidy"],
        "test_cmd": ['go test -v . -run "TestReplacerNew*"']}
    assert language_spec("tokio-rs/tokio", "6724")["docker_specs"] == {"rust_version": "1.81"}
    assert language_spec("axios/axios", "5892")["test_cmd"] == [
        "npx mocha test/unit/adapters/http.js -R tap -g 'compression'"]
    assert data["language_parsers"]["google/gson"] == "parse_log_maven"
    assert data["language_parsers"]["vuejs/core"] == "parse_log_vitest"
    assert data["language_of"]["sharkdp/bat"] == "rust"
    assert data["language_of"]["vuejs/core"] == "javascript"
    assert len(data["language_specs"]) == 30
    assert sum(len(v) for v in data["language_specs"].values()) == 260
    # only C, PHP and Ruby are left unkept
    assert "google/gson" not in data["other_language_repos"]
    assert {"redis/redis", "jqlang/jq", "rubocop/rubocop", "laravel/framework"} <= set(
        data["other_language_repos"])
    assert "C, PHP or Ruby" in unknown_spec_reason("redis/redis", "1")
    assert data["specs"]["pallets/flask"]["2.0"]["python"] == "3.9"  # the Python ones stay


def test_gsons_maven_spec_becomes_the_junit_runner_on_debians_jars(tmp_path: Path) -> None:
    row = make_gson_like(tmp_path / "gson")
    spec = language_spec("google/gson", "2158")
    assert spec is not None
    out = translate(spec, "google/gson", "2158", str(row["test_patch"]), tmp_path / "gson",
                    str(row["base_commit"]))
    env = out.environment
    assert (env["language"], env["runner"], env["log_parser"]) == ("java", "junit", "ant")
    assert env["test_files"] == [TEST]  # the class every -Dtest= names, in the -pl module
    apt, templates, check = env["setup"]
    assert "apt-get install" in apt and "junit4" in apt and specs_langs.CLASSPATH in apt
    assert "java-templates" in templates and "2.9.2-SNAPSHOT" in templates
    # the module and its tests compile once at image build, failing with the reason
    assert "find gson/src/main/java" in check and "find gson/src/test/java" in check
    assert "tests do not compile against Debian" in check
    assert out.provenance["harness_log_parser"] == "parse_log_maven"
    notes = " ".join(out.provenance["notes"])
    assert "JDK 11 asked for; built and run with JDK 17" in notes
    assert "Maven is not run" in notes


def test_a_dependency_debian_lacks_is_refused(tmp_path: Path) -> None:
    row = make_gson_like(tmp_path / "gson")
    pom = (tmp_path / "gson" / "gson" / "pom.xml").read_text().replace(
        "</dependencies>", "<dependency><groupId>org.example</groupId><artifactId>rare"
        "</artifactId></dependency></dependencies>")
    write(tmp_path / "gson", {"gson/pom.xml": pom})
    git(tmp_path / "gson", "commit", "-qam", "rare")
    head = git(tmp_path / "gson", "rev-parse", "HEAD").strip()
    spec = language_spec("google/gson", "2158")
    assert spec is not None
    with pytest.raises(SpecError, match="org.example:rare.*Maven Central, which this machine "
                       "does not reach"):
        translate(spec, "google/gson", "2158", str(row["test_patch"]), tmp_path / "gson", head)


@pytest.mark.parametrize(("repo", "version", "reason"), [
    ("tokio-rs/tokio", "6724", "asks for rustc 1.81; repogym's rust image has rustc 1.63"),
    ("vuejs/core", "11899", "asks for Node 20; repogym's javascript image has Node 18"),
    ("apache/lucene", "13494", "asks for JDK 21"),
    ("reactivex/rxjava", "7597", "builds with Gradle"),
    ("projectlombok/lombok", "3602", "builds with Ant"),
    ("preactjs/preact", "3689", "with Karma"),
    ("markedjs/marked", "0.3", "with Jasmine"),
    ("chartjs/Chart.js", "3.0", "cap_add"),
])
def test_what_cannot_be_had_here_is_refused_with_the_reason(repo: str, version: str,
                                                            reason: str) -> None:
    spec = language_spec(repo, version)
    assert spec is not None
    with pytest.raises(SpecError, match=reason) as err:
        translate(spec, repo, version, "", None, "HEAD")
    if "asks for" in reason:  # says which toolchains there are
        assert "Node 18, Go 1.23, rustc 1.63 and JDK 17" in str(err.value)


GO_TEST_PATCH = """\
diff --git a/replacer_test.go b/replacer_test.go
--- a/replacer_test.go
+++ b/replacer_test.go
diff --git a/testdata/in.txt b/testdata/in.txt
new file mode 100644
"""


def go_module(root: Path, requires: bool) -> str:
    subprocess.run(["git", "init", "-q", str(root)], check=True)
    mod = "module example.com/caddy\n\ngo 1.21\n"
    write(root, {"go.mod": mod + ("require example.com/dep v1.0.0\n" if requires else ""),
                 "replacer.go": "package caddy\n"})
    git(root, "add", "-A")
    git(root, "commit", "-qm", "base")
    return git(root, "rev-parse", "HEAD").strip()


def test_go_modules_need_the_module_proxy(tmp_path: Path,
                                          monkeypatch: pytest.MonkeyPatch) -> None:
    spec = language_spec("caddyserver/caddy", "6051")  # install: go test -c ./caddyconfig/...
    assert spec is not None
    base = go_module(tmp_path / "caddy", requires=True)
    monkeypatch.delenv("REPOGYM_REGISTRIES", raising=False)
    with pytest.raises(SpecError, match="go.mod requires modules, which come from the Go "
                       "module proxy, which this machine does not reach"):
        translate(spec, "caddyserver/caddy", "6051", GO_TEST_PATCH, tmp_path / "caddy", base)
    monkeypatch.setenv("REPOGYM_REGISTRIES", "debian,npm,go")
    env = translate(spec, "caddyserver/caddy", "6051", GO_TEST_PATCH, tmp_path / "caddy",
                    base).environment
    assert (env["runner"], env["test_cmd"], env["log_parser"]) == ("gotest", "go test", "gotest")
    assert env["test_files"] == ["replacer_test.go"]  # testdata is no package
    assert env["setup"][0].startswith(f"timeout {specs_langs.STEP_LIMIT} bash -c ")
    assert "go mod download" in env["setup"][0]
    # the harness's `go test -c` would leave a binary beside the code
    assert env["setup"][1] == "go test -count=1 -run '^$' ./caddyconfig/caddyfile"


def test_a_go_module_without_requirements_needs_no_registry(tmp_path: Path) -> None:
    spec = language_spec("gin-gonic/gin", "3741")
    assert spec is not None
    base = go_module(tmp_path / "gin", requires=False)
    out = translate(spec, "gin-gonic/gin", "3741", GO_TEST_PATCH, tmp_path / "gin", base)
    assert out.environment["setup"] == ["go test -count=1 -run '^$' .",
                                        "chmod -R a+rwX /opt/go/cache"]
    assert "go test's -run filter dropped" in " ".join(out.provenance["notes"])


def test_javascript_runners_and_package_managers() -> None:
    spec = language_spec("diegomura/react-pdf", "2.0")  # Node 18.20.4, yarn, jest
    assert spec is not None
    patch = ("diff --git a/packages/layout/tests/text.test.js b/packages/layout/tests/text.test.js"
             "\ndiff --git a/packages/layout/tests/fixtures/a.js b/packages/layout/tests/fixtures"
             "/a.js\n")
    env = translate(spec, "diegomura/react-pdf", "2.0", patch, None, "HEAD").environment
    assert (env["language"], env["runner"]) == ("javascript", "jest")
    assert env["test_cmd"] == "NODE_OPTIONS=--experimental-vm-modules node_modules/.bin/jest"
    assert env["test_files"] == ["packages/layout/tests/text.test.js"]
    assert "apt-get install" in env["setup"][0] and "libcairo2-dev" in env["setup"][0]
    assert "npm install -g" in env["setup"][1] and "yarn" in env["setup"][1]
    assert "yarn install" in env["setup"][-1]
    old = language_spec("diegomura/react-pdf", "1.0")  # Node 8
    assert old is not None
    notes = translate(old, "diegomura/react-pdf", "1.0", patch, None, "HEAD").provenance["notes"]
    assert "Node 8.17.0 asked for; built and run with Node 18" in notes


def test_a_registry_step_gives_up_and_says_which_registry(monkeypatch: pytest.MonkeyPatch
                                                          ) -> None:
    monkeypatch.setattr(specs_langs, "STEP_LIMIT", 1)
    start = time.monotonic()
    proc = subprocess.run(["bash", "-c", specs_langs._guarded("sleep 30", "go")],
                          capture_output=True, text=True)
    assert time.monotonic() - start < 10
    assert proc.returncode == 1
    assert "needs the Go module proxy and failed (exit 124" in proc.stdout


def test_bad_registry_names_are_refused(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("REPOGYM_REGISTRIES", "debian,cpan")
    with pytest.raises(SpecError, match="cpan"):
        specs_langs.reachable()


def source(tmp_path: Path, rows: list[dict[str, object]], name: str = "rows.jsonl"
           ) -> SwebenchSource:
    file = tmp_path / name
    file.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return SwebenchSource(SwebenchOptions(file, tmp_path / "repos", validate=False,
                                          clone=False), SourceOptions())


def test_multilingual_records_load_as_tasks_or_say_why(tmp_path: Path) -> None:
    row = make_gson_like(tmp_path / "repos" / "google__gson")
    rows = [row, {**row, "instance_id": "google__gson-9999", "version": "9999"},
            {**row, "repo": "tokio-rs/tokio", "instance_id": "tokio-rs__tokio-6724",
             "version": "6724"}]
    task, unknown, tokio = source(tmp_path, rows).candidates()
    assert isinstance(task, Task)
    assert task.environment.language == "java" and task.environment.runner == "junit"
    assert task.FAIL_TO_PASS == (f"{GSON}#testDoubleSerialization",)
    assert task.environment.test_files == (TEST,)
    provenance = task.extra["environment_source"]
    assert provenance["from"] == "swebench 4.1.0 specs (google/gson 2158)"
    assert provenance["harness_log_parser"] == "parse_log_maven"
    assert isinstance(unknown, Rejected) and "no spec for google/gson version '9999'" in (
        unknown.reason)
    # refused before any clone: tokio has no mirror here
    assert isinstance(tokio, Rejected) and tokio.reason.startswith(
        "cannot build here: the spec asks for rustc 1.81")


def test_a_multilingual_parquet_file_loads(tmp_path: Path) -> None:
    import pyarrow as pa
    import pyarrow.parquet as pq

    row = make_gson_like(tmp_path / "repos" / "google__gson")
    pq.write_table(pa.Table.from_pylist([row]), tmp_path / "test-00000-of-00001.parquet")
    assert load_rows(tmp_path / "test-00000-of-00001.parquet") == [row]
    got = list(SwebenchSource(SwebenchOptions(tmp_path / "test-00000-of-00001.parquet",
                                              tmp_path / "repos", validate=False, clone=False),
                              SourceOptions()).candidates())
    assert isinstance(got[0], Task) and got[0].environment.language == "java"
