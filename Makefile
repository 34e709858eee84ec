# Two entry points (see README): `make lab` (the main job) and `make test`.
PYTHON ?= python3
VENV ?= .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.installed

.PHONY: venv lab headless demo test lint typecheck pytest bench clean

$(STAMP): pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --upgrade pip
	$(PY) -m pip install --quiet -e ".[dev,db,providers,mcp,arrow,bench,lab,clickhouse]"
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

## Every benchmark, each against its baseline in the same run (no test asserts a timing).
## QUICK=1: smaller sizes and fewer runs. BENCH_PG: the PostgreSQL server the PostgreSQL rows
## use (scratch databases, dropped afterwards); BENCH_PG=none skips them.
BENCH_PG ?= postgresql+psycopg://postgres@127.0.0.1:5432/test
BENCH_Q = $(if $(QUICK),--quick,)
bench: $(STAMP)
	$(PY) bench/bench_loop.py $(BENCH_Q)
	$(PY) bench/bench_sql.py $(BENCH_Q)
	$(PY) bench/bench_session.py $(BENCH_Q)
	$(if $(filter none,$(BENCH_PG)),,$(PY) bench/bench_session.py $(BENCH_Q) --pg $(BENCH_PG))
	$(PY) bench/bench_audit.py $(BENCH_Q)
	PYTHONPATH=$(CURDIR) $(PY) bench/bench_db.py $(BENCH_Q) --pg $(BENCH_PG)
	PYTHONPATH=$(CURDIR) $(PY) bench/bench_notebook.py $(BENCH_Q)
	PYTHONPATH=$(CURDIR) $(PY) bench/bench_mcp.py $(BENCH_Q)
	PYTHONPATH=$(CURDIR) $(PY) bench/bench_chdb.py $(BENCH_Q)
	PYTHONPATH=$(CURDIR) $(PY) bench/bench_duckdb_worker.py $(BENCH_Q)

clean:
	rm -rf $(VENV) test-artifacts .pytest_cache .ruff_cache
