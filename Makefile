# Two entry points (see README): `make lab` (the main job) and `make test`.
PYTHON ?= python3
VENV ?= .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.installed

.PHONY: venv lab headless demo test lint typecheck pytest bench clean

$(STAMP): pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --upgrade pip
	$(PY) -m pip install --quiet -e ".[dev,db,providers,mcp,arrow,bench,lab,clickhouse,snowflake,trino,spark,bigquery]"
	touch $(STAMP)

venv: $(STAMP)

## The Snowflake emulator the tests run against (fakesnow's server), in its own venv: fakesnow
## pins sqlglot ~=30.22 (the project pins 30.30.0) and breaks with the 5.x Snowflake client.
FAKESNOW := $(VENV)-fakesnow
$(FAKESNOW)/.installed:
	$(PYTHON) -m venv $(FAKESNOW)
	$(FAKESNOW)/bin/python -m pip install --quiet "fakesnow[server]==0.12.1" "snowflake-connector-python==4.8.1" "duckdb==2.0.1"
	touch $(FAKESNOW)/.installed

## The BigQuery emulator the tests run against (bqemulator), in its own venv: it requires
## sqlglot<30.12 (the project pins 30.30.0) and loads DuckDB's spatial extension at start,
## which offline comes from the duckdb-extension-spatial package (on PyPI up to DuckDB 1.5.5,
## the project runs 2.0). DuckDB's INSTALL of that file copies it where DuckDB 1.5.5 looks,
## ~/.duckdb/extensions/v1.5.5/ (the project's DuckDB 2.0 looks in v2.0.1/: untouched).
BQEMULATOR := $(VENV)-bqemulator
$(BQEMULATOR)/.installed:
	$(PYTHON) -m venv $(BQEMULATOR)
	$(BQEMULATOR)/bin/python -m pip install --quiet "bqemulator==1.4.0" "duckdb==1.5.5" \
		"duckdb-extension-spatial==1.5.5" "numpy==2.4.6"
	$(BQEMULATOR)/bin/python -c "import duckdb, pathlib, duckdb_extension_spatial as s; \
		f = next(pathlib.Path(s.__file__).parent.glob('extensions/v*/spatial.duckdb_extension')); \
		duckdb.execute(f\"INSTALL '{f}'\"); duckdb.execute('LOAD spatial')"
	touch $(BQEMULATOR)/.installed

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

pytest: $(STAMP) $(FAKESNOW)/.installed $(BQEMULATOR)/.installed
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
	PYTHONPATH=$(CURDIR) $(PY) bench/bench_spark.py $(BENCH_Q)
	PYTHONPATH=$(CURDIR) $(PY) bench/bench_duckdb_worker.py $(BENCH_Q)

clean:
	rm -rf $(VENV) test-artifacts .pytest_cache .ruff_cache
