"""Snowflake on the seam: its dialect and policy table only ("dialect only": no connection)."""

from pi_notebook.sql.engines.base import EngineInfo

__all__ = ["ENGINE"]

ENGINE = EngineInfo(
    engine="snowflake",
    dialect="snowflake",
    url_scheme="snowflake://USER@ACCOUNT/DATABASE/SCHEMA",
    schemes=("snowflake",),
    read_only_backstop="a role with only SELECT grants, statement timeouts (not enforced by "
    "this tool yet); the tool cannot connect to Snowflake yet",
    bounds="none yet: the tool cannot connect to Snowflake",
    cancel=None,
    write_preview="none yet: the tool cannot connect to Snowflake",
    connects=False,
    tested_against="dialect only",
)
