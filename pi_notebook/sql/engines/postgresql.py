"""PostgreSQL on the seam (SQLAlchemy with psycopg 3)."""

from pi_notebook.sql.engines.base import EngineInfo

__all__ = ["ENGINE"]

ENGINE = EngineInfo(
    engine="postgresql",
    dialect="postgres",
    url_scheme="postgresql+psycopg://user@host:5432/db",
    schemes=("postgresql",),
    read_only_backstop="BEGIN READ ONLY with SET LOCAL statement_timeout",
    bounds="a server-side cursor FETCHes to the cap + 1, in batches sized by the byte bound",
    cancel="libpq's cancel request (psycopg cancel_safe)",
    write_preview="run in a transaction that is rolled back, else SELECT count(*)",
    arrow=True,
    read_path="rows, or ADBC's Arrow for large reads",
    extra="db",
    modules=("psycopg",),
)
