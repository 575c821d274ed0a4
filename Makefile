PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed
# The npm MCP servers some tests run, pinned by the lock file; reinstalled when it changes.
NPM_DIR := tests/mcp/npm
NPM_STAMP := $(NPM_DIR)/node_modules/.installed

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

lint: $(STAMP)
	$(BIN)/ruff check src tests examples bench
	$(BIN)/ruff format --check src tests examples bench

typecheck: $(STAMP)
	$(BIN)/mypy

pytest: $(STAMP) $(NPM_STAMP)
	$(BIN)/python -m pytest -q -m "not slow"

# pytest exits 5 when no test is selected: not a failure here.
test-slow: $(STAMP) $(NPM_STAMP)
	$(BIN)/python -m pytest -q -m slow; status=$$?; [ $$status -eq 0 ] || [ $$status -eq 5 ]

test: lint typecheck pytest

run: $(STAMP)
	$(BIN)/interaction-worker run

bench: $(STAMP)
	$(BIN)/python bench/run.py

# Instructions per call under valgrind's callgrind (docs/benchmarks.md): slow, but steady on a busy machine.
bench-instructions: $(STAMP)
	$(BIN)/python bench/instructions.py

schema: $(STAMP)
	$(BIN)/interaction-worker schema --out docs/schemas

clean:
	rm -rf $(VENV) .mypy_cache .pytest_cache .ruff_cache $(NPM_DIR)/node_modules
