#!/bin/sh
# repogym's cargo test runner (CARGO_TARGET_<triple>_RUNNER): runs one test binary with
# libtest's --logfile in the grader's folder, one file per binary, the second source the
# grader checks against the console's "test NAME ... ok" lines.
bin="$1"; shift
out="${REPOGYM_OUT:-/opt/repogym-grade/out}/cargo"
mkdir -p "$out" 2>/dev/null
name=$(basename "$bin")
exec "$bin" "$@" --logfile "$out/$name.log"
