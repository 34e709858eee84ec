"""SQLite on the seam (SQLAlchemy's ``sqlite`` dialect; runs in the kernel)."""

from pi_notebook.sql.engines.base import EngineInfo

__all__ = ["ENGINE"]

ENGINE = EngineInfo(
    engine="sqlite",
    dialect="sqlite",
    url_scheme="sqlite:///PATH",
    schemes=("sqlite",),
    read_only_backstop="an authorizer on every connection: only pure reads while a read runs; "
    "ATTACH, DETACH and pragma writes never",
    bounds="rows stepped to the cap + 1; bytes kept bounded; each value at most 64 MiB",
    cancel="the connection's interrupt()",
    write_preview="run in a transaction that is rolled back, else SELECT count(*)",
    arrow=True,
    read_path="rows (a long read of a file: ADBC's Arrow in a child process)",
)
