"""Trino on the seam: its dialect and policy table only ("dialect only": no connection)."""

from pi_notebook.sql.engines.base import EngineInfo

__all__ = ["ENGINE"]

ENGINE = EngineInfo(
    engine="trino",
    dialect="trino",
    url_scheme="trino://USER@HOST:8080/CATALOG/SCHEMA",
    schemes=("trino",),
    read_only_backstop="server-side access control (access-control.name=read-only), not "
    "enforced by this tool; the tool cannot connect to Trino yet",
    bounds="none yet: the tool cannot connect to Trino",
    cancel=None,
    write_preview="none yet: the tool cannot connect to Trino",
    connects=False,
    tested_against="dialect only",
)
