PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed

.PHONY: install test lint typecheck pytest run bench schema clean

$(BIN)/python:
	$(PYTHON) -m venv $(VENV)

$(STAMP): $(BIN)/python pyproject.toml
	$(BIN)/python -m pip install -q --disable-pip-version-check --upgrade pip
	$(BIN)/python -m pip install -q --disable-pip-version-check -e '.[dev]'
	touch $(STAMP)

install: $(STAMP)

lint: $(STAMP)
	$(BIN)/ruff check src tests examples bench
	$(BIN)/ruff format --check src tests examples bench

typecheck: $(STAMP)
	$(BIN)/mypy

pytest: $(STAMP)
	$(BIN)/python -m pytest -q

test: lint typecheck pytest

run: $(STAMP)
	$(BIN)/interaction-worker run

bench: $(STAMP)
	$(BIN)/python bench/run.py

schema: $(STAMP)
	$(BIN)/interaction-worker schema --out docs/schemas

clean:
	rm -rf $(VENV) .mypy_cache .pytest_cache .ruff_cache
