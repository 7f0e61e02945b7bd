# The two commands: `make demo` and `make test`. Both install what is missing first.
PYTHON ?= python3
VENV ?= .venv
BIN := $(VENV)/bin
# Build steps trust this CA bundle too (proxies that intercept TLS); empty to turn off.
export REPOGYM_CA_BUNDLE ?= $(wildcard /etc/ssl/certs/ca-certificates.crt)
TORCH ?= torch==2.13.0
PYTEST_ARGS ?=
# test processes: the Docker tests mostly wait on containers, so two share two cores well
PYTEST_WORKERS ?= 2

.PHONY: demo test venv docker podman base lint typecheck clean-containers shellcheck wheel-check docs

demo: venv docker base
	$(BIN)/repogym images build --suite demo
	$(BIN)/repogym eval --suite demo --agent gold --workers 2 --out runs/demo/gold
	$(BIN)/repogym eval --suite demo --agent null --workers 2 --out runs/demo/null

test: venv docker podman base lint typecheck docs
	$(BIN)/python -m pytest -n $(PYTEST_WORKERS) --dist loadgroup --durations=25 $(PYTEST_ARGS)

venv: $(VENV)/.installed

$(VENV)/.installed: setup.cfg pyproject.toml
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install -q --upgrade pip setuptools wheel
	$(BIN)/python -m pip install -q "$(TORCH)"
	$(BIN)/python -m pip install -q -e '.[dev,train,ray,harness]'
	touch $@

docker:
	tools/ensure_docker.sh

# rootless Podman (its own unprivileged user, as root) and bubblewrap, for the other backends;
# where it cannot (not root, no podman), the tests that need them skip, or fail under CI=true
podman:
	-tools/ensure_podman.sh

# the wheel installed (not editable) in a fresh venv runs a demo episode; `make test` runs the
# same script (tests/test_packaging.py)
wheel-check: venv docker base
	BUILDER=$(BIN)/python tools/wheel_check.sh

base: venv docker
	$(BIN)/repogym images base

lint: venv shellcheck
	$(BIN)/ruff check .
	shellcheck $$(git ls-files '*.sh')
	$(BIN)/python tools/lint_imports.py

# the scripts that run in containers are checked too; shellcheck from Debian's packages
shellcheck:
	@command -v shellcheck >/dev/null || apt-get install -y -q shellcheck \
		|| { apt-get update -q && apt-get install -y -q shellcheck; }

# mypy on the package as one repogym tree (see tools/typecheck.py), then the tools
typecheck: venv
	$(BIN)/python tools/typecheck.py
	$(BIN)/mypy tools/lint_imports.py tools/typecheck.py

# the manual (docs/, mkdocs.yml) into site/, warnings as errors; its examples run in the tests
docs: venv
	NO_MKDOCS_2_WARNING=1 $(BIN)/mkdocs build --strict --quiet

clean-containers: venv
	$(BIN)/repogym doctor --cleanup
