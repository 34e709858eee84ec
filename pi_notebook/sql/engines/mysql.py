"""MySQL and MariaDB on the seam (SQLAlchemy with PyMySQL)."""

from pi_notebook.sql.engines.base import EngineInfo

__all__ = ["ENGINE"]

ENGINE = EngineInfo(
    engine="mysql",
    dialect="mysql",
    url_scheme="mysql+pymysql://user@host:3306/db (or mariadb+pymysql://)",
    schemes=("mysql", "mariadb"),
    read_only_backstop="START TRANSACTION READ ONLY with the server's statement time limit",
    bounds="sql_select_limit at the cap + 1, an unbuffered cursor, bytes kept bounded",
    cancel="KILL QUERY from another connection",
    write_preview="run in a transaction that is rolled back (InnoDB, no trigger), else "
    "SELECT count(*)",
    read_path="rows",
    extra="db",
    modules=("pymysql",),
)
