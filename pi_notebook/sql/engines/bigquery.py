"""BigQuery on the seam: its dialect and policy table only ("dialect only": no connection).

It stays so because its emulator cannot run beside the project's pins: bqemulator 1.4
requires ``sqlglot<30.12`` (the project pins 30.30.0), and it loads DuckDB's ``spatial``
extension when it starts, which offline needs a spatial package built for the DuckDB in use;
PyPI has them only up to DuckDB 1.5 (``duckdb-extension-spatial`` 1.5.5), the project runs
DuckDB 2.0, and with DuckDB 2.0.1 bqemulator stops at start ("DuckDB spatial extension is
required"). In a virtual environment of its own (DuckDB 1.5.5, that spatial package installed
from its file, numpy) it starts and answers; no client path is wired to it yet, and the tool
claims nothing it has not run.
"""

from pi_notebook.sql.engines.base import EngineInfo

__all__ = ["ENGINE"]

ENGINE = EngineInfo(
    engine="bigquery",
    dialect="bigquery",
    url_scheme="bigquery://PROJECT/DATASET",
    schemes=("bigquery",),
    read_only_backstop="maximum_bytes_billed (a hard cap per job), a dry run, a job timeout "
    "and IAM roles (not enforced by this tool yet); the tool cannot connect to BigQuery yet: "
    "its emulator (bqemulator) cannot run beside the project's pins (it needs sqlglot<30.12, "
    "and DuckDB's spatial extension, packaged on PyPI only up to DuckDB 1.5)",
    bounds="none yet: the tool cannot connect to BigQuery",
    cancel=None,
    write_preview="none yet: the tool cannot connect to BigQuery",
    connects=False,
    tested_against="dialect only",
)
