"""DuckDB on the seam (duckdb-engine; runs in the kernel)."""

from pi_notebook.sql.engines.base import EngineInfo

__all__ = ["ENGINE"]

ENGINE = EngineInfo(
    engine="duckdb",
    dialect="duckdb",
    url_scheme="duckdb:///PATH",
    schemes=("duckdb",),
    read_only_backstop="BEGIN TRANSACTION READ ONLY; no external access, no Python "
    "replacement scans, configuration locked",
    bounds="a LIMIT of the cap + 1 on the relation, bytes kept bounded, memory_limit",
    cancel="the connection's interrupt()",
    write_preview="run in a transaction that is rolled back, else SELECT count(*)",
    arrow=True,
    read_path="Arrow record batches",
    extra="db",
    modules=("duckdb", "duckdb_engine"),
)
