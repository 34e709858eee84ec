"""S29: a value written to a secret-named column by an approved statement never reaches the
audit store, while the approval stays bound to the real arguments' hash."""

from __future__ import annotations

from pathlib import Path

import sqlalchemy as sa
from dbtest_support import Scratch, db  # noqa: F401

import pi_notebook.database
from pi_notebook import create_agent_session
from pi_notebook.sql.backend import query_args_hash, sqlglot_dialect
from pi_notebook.testing import ScriptedApprovalUI, ScriptedModel, text, tool_call

SECRET = "hunter2-Zq9xW"

# One statement per engine, each in that engine's own form of a secret-bearing write.
_WRITES = {
    "sqlite": "INSERT INTO {t} (name, password) VALUES ('bob', '" + SECRET + "')",
    "duckdb": "INSERT INTO {t} (name, password) VALUES ('bob', '" + SECRET + "')",
    "postgres": "INSERT INTO {t} (name, password) VALUES ('bob', E'" + SECRET + "')",
    "mysql": "INSERT INTO {t} SET name = 'bob', `password` = '" + SECRET + "'",
}


def _store_text(audit_url: str) -> str:
    """Every value of every table of the audit store, as text."""
    engine = sa.create_engine(audit_url)
    try:
        found: list[str] = []
        with engine.connect() as conn:
            for table in sa.inspect(conn).get_table_names():
                found += [
                    repr(tuple(row)) for row in conn.execute(sa.text(f"SELECT * FROM {table}"))
                ]
        return "\n".join(found)
    finally:
        engine.dispose()


async def test_s29_a_password_literal_of_an_approved_insert_is_not_stored_in_the_audit(
    db: Scratch,  # noqa: F811
    tmp_path: Path,
) -> None:
    table = f"users_{tmp_path.name[-8:].replace('-', '_')}"
    db.execute(f"CREATE TABLE {table} (name VARCHAR(20), password VARCHAR(40))")
    sql = _WRITES[db.engine].format(t=table)
    audit_url = f"sqlite:///{tmp_path / 'audit.sqlite'}"
    ui = ScriptedApprovalUI("approved")
    model = ScriptedModel([[tool_call("query_database", {"sql": sql}, id="w1")], text("done")])
    session = create_agent_session(
        model=model,
        ui=ui,
        audit=audit_url,
        extensions=[pi_notebook.database.database_extension(db.url)],
    )
    try:
        await session.prompt("go")
        audit = session.audit
        assert audit is not None
        frame = audit.to_dataframe()
    finally:
        await session.close()
    assert db.scalar(f"SELECT password FROM {table}") == SECRET  # the write ran, verbatim
    dialect = sqlglot_dialect(sa.make_url(db.url))
    [request] = ui.requests
    assert request.args_hash == query_args_hash(sql, dialect)  # bound to the real arguments
    [final] = frame[frame["kind"] == "final_args"]["payload"].tolist()
    assert final["args_hash"] == query_args_hash(sql, dialect) and "'***'" in final["sql"]
    stored = _store_text(audit_url)
    assert table in stored and SECRET not in stored and "hunter2" not in stored
