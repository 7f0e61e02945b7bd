#!/usr/bin/env bash
# The package as a user installs it: the wheel built from this checkout, installed (not
# editable) into a fresh virtual environment, runs one demo episode (the gold agent on
# demo__textkit-1, graded in Docker) from a folder outside the checkout. `make test` runs it
# (tests/test_packaging.py); by hand: tools/wheel_check.sh [WORK_DIR]
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
builder=${BUILDER:-$root/.venv/bin/python}  # has setuptools and wheel: no build isolation
work=${1:-$(mktemp -d -t repogym-wheel-XXXXXX)}
mkdir -p "$work"
# a clean copy of the checkout (tracked files, and new ones git does not ignore): setuptools
# builds in the source folder, and a build/ left there would go into the wheel as it is
mkdir -p "$work/source"
(
  cd "$root"
  git ls-files -z --cached --others --exclude-standard | while IFS= read -r -d '' f; do
    if [ -f "$f" ]; then printf '%s\0' "$f"; fi
  done | xargs -0 -r cp --parents -t "$work/source" --
)
"$builder" -m pip wheel -q --no-deps --no-build-isolation -w "$work/dist" "$work/source"
wheel=$(ls "$work"/dist/repogym-*.whl)
"${PYTHON:-python3}" -m venv "$work/venv"
"$work/venv/bin/python" -m pip install -q "$wheel"
cd "$work"  # nothing of the checkout on the path
"$work/venv/bin/python" - <<'PY'
import repogym
import sys
assert "/site-packages/" in repogym.__file__, repogym.__file__
print("repogym from", repogym.__file__, file=sys.stderr)
PY
"$work/venv/bin/repogym" eval --suite demo --agent gold --task demo__textkit-1 \
  --out "$work/run" --quiet
"$work/venv/bin/python" - "$work/run/results.jsonl" <<'PY'
import json
import sys
rows = [json.loads(line) for line in open(sys.argv[1])]
assert len(rows) == 1 and rows[0]["resolved"] and rows[0]["reward"] == 1.0, rows
print("wheel check: demo__textkit-1 resolved by the gold agent from", sys.argv[1])
PY
