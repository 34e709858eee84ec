# Two entry points (see README): `make lab` (the main job) and `make test`.
PYTHON ?= python3
VENV ?= .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.installed

.PHONY: venv lab headless demo test lint typecheck pytest bench clean

$(STAMP): pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --upgrade pip
	$(PY) -m pip install --quiet -e ".[dev,db,providers,mcp,arrow,bench]"
	touch $(STAMP)

venv: $(STAMP)

## Main job: JupyterLab on 127.0.0.1 with the quickstart open (SQLite sample + offline model).
lab: $(STAMP)
	$(PY) scripts/lab.py

## The same job without a browser: execute the quickstart and print its outputs.
headless: $(STAMP)
	$(PY) scripts/lab.py --headless

## A plain-Python session on the sample database, printing the conversation.
demo: $(STAMP)
	$(PY) scripts/demo.py

lint: $(STAMP)
	$(VENV)/bin/ruff check .
	$(VENV)/bin/ruff format --check .

typecheck: $(STAMP)
	$(VENV)/bin/pyright

pytest: $(STAMP)
	$(VENV)/bin/pytest -q -p no:cacheprovider

## Everything CI runs: lint, type check, the whole test suite.
test: lint typecheck pytest

bench: $(STAMP)
	$(PY) bench/bench_loop.py
	$(PY) bench/bench_sql.py
	$(PY) bench/bench_db.py
	$(PY) bench/bench_audit.py

clean:
	rm -rf $(VENV) test-artifacts .pytest_cache .ruff_cache
