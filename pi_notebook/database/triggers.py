"""Whether a write does only what its statement says: no triggers, rules or cascades.

A scoped grant is written over the tables a statement names. A trigger on the written table
(or an ``INSTEAD OF`` trigger on a view), a PostgreSQL rule, a child table an ``UPDATE`` or
``DELETE`` of its parent reaches, or a foreign key that cascades from the written table can
change tables the grant never named. :func:`hidden_effects` asks the engine's catalog, where it
is cheap to ask, and says why a statement's written tables fall outside every grant:

- SQLite: ``sqlite_master`` (triggers, and whether the name is a table at all) and
  ``pragma_foreign_key_list`` (``ON DELETE/UPDATE CASCADE | SET NULL | SET DEFAULT``);
- PostgreSQL: ``pg_class`` (only an ordinary table, ``relkind = 'r'``), ``pg_trigger`` (not
  the internal ones of constraints), ``pg_rewrite`` (rules), ``pg_inherits`` (children) and
  ``pg_constraint`` (cascading foreign keys);
- MySQL/MariaDB: ``information_schema.TABLES`` (a ``BASE TABLE``), ``TRIGGERS`` and
  ``REFERENTIAL_CONSTRAINTS``. MySQL lists only the triggers the user holds the ``TRIGGER``
  privilege for, so a user without it cannot see them;
- DuckDB: no triggers, no updatable views, no cascading foreign keys: nothing to ask.

A table that cannot be found, a name the check cannot resolve (a three-part name) and a
catalog that cannot be read count as outside every grant: the person is asked.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

import sqlalchemy as sa

from pi_notebook.errors import AbortError

__all__ = ["hidden_effects"]

_CASCADING = ("CASCADE", "SET NULL", "SET DEFAULT")


async def hidden_effects(backend: Any, tables: Iterable[str], *, signal: Any = None) -> str | None:
    """Why writing ``tables`` (normalised names, see :mod:`.scope`) may change more than they
    name, or ``None`` when each is a plain table without triggers, rules or cascades.

    Runs on the backend's worker (``backend.offload``), bounded by its statement timeout.

    Raises:
        AbortError: ``signal`` aborted.
    """
    names = sorted(set(tables))
    if backend.dialect == "duckdb" or not names:
        return None
    check = {"sqlite": _sqlite, "postgres": _postgres, "mysql": _mysql}.get(backend.dialect)
    if check is None:
        return f"the {backend.dialect} catalog is not checked for triggers"
    try:
        return await backend.offload(_each, backend.engine, check, names, signal=signal)
    except AbortError:
        raise
    except Exception as exc:
        return f"its tables could not be checked for triggers ({type(exc).__name__}: {exc})"


def _each(engine: sa.Engine, check: Any, names: list[str]) -> str | None:
    with engine.connect() as conn:
        for name in names:
            why = check(conn, name)
            if why is not None:
                return why
    return None


def _sqlite(conn: sa.Connection, name: str) -> str | None:
    parts = name.split(".")
    if len(parts) > 2:
        return f"{name} is not a table name the trigger check can resolve"
    table = parts[-1]
    # A TEMP trigger may sit on a table of any schema: temp is always searched too.
    schemas = list(dict.fromkeys([parts[0], "temp"])) if len(parts) == 2 else ["temp", "main"]
    found = False
    for schema in schemas:
        master = '"' + schema.replace('"', '""') + '".sqlite_master'
        rows = conn.exec_driver_sql(
            f"SELECT type, name FROM {master} WHERE type IN ('table', 'view', 'trigger') "
            "AND lower(tbl_name) = lower(?)",
            (table,),
        ).all()
        for kind, object_name in rows:
            if kind == "trigger":
                return f"{name} has a trigger ({object_name})"
            if kind == "view":
                return f"{name} is a view"
            found = True
        cascades = conn.exec_driver_sql(
            f"SELECT m.name FROM {master} AS m, pragma_foreign_key_list(m.name) AS k "
            "WHERE m.type = 'table' AND lower(k.\"table\") = lower(?) "
            f"AND (k.on_delete IN {_CASCADING!r} OR k.on_update IN {_CASCADING!r})",
            (table,),
        ).first()
        if cascades is not None:
            return f"a foreign key of {cascades[0]} cascades from {name}"
    return None if found else f"{name} was not found"


_PG = sa.text("""
SELECT c.relkind::text AS kind,
  EXISTS (SELECT 1 FROM pg_trigger t WHERE t.tgrelid = c.oid AND NOT t.tgisinternal) AS triggers,
  EXISTS (SELECT 1 FROM pg_rewrite r WHERE r.ev_class = c.oid AND r.rulename <> '_RETURN')
    AS rules,
  EXISTS (SELECT 1 FROM pg_inherits i WHERE i.inhparent = c.oid) AS children,
  EXISTS (SELECT 1 FROM pg_constraint k WHERE k.confrelid = c.oid AND k.contype = 'f'
          AND (k.confdeltype IN ('c', 'n', 'd') OR k.confupdtype IN ('c', 'n', 'd')))
    AS cascades
FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace
WHERE c.relname = :name
  AND CASE WHEN CAST(:schema AS text) IS NULL THEN pg_table_is_visible(c.oid)
           ELSE n.nspname = CAST(:schema AS text) END
""")


def _postgres(conn: sa.Connection, name: str) -> str | None:
    parts = name.split(".")
    if len(parts) > 2:
        return f"{name} is not a table name the trigger check can resolve"
    schema = parts[0] if len(parts) == 2 else None
    row = conn.execute(_PG, {"name": parts[-1], "schema": schema}).mappings().first()
    if row is None:
        return f"{name} was not found"
    if row["kind"] in ("v", "m"):
        return f"{name} is a view"
    if row["kind"] != "r":
        return f"{name} is not an ordinary table (a partitioned or foreign table)"
    for key, text in (
        ("triggers", "has a trigger"),
        ("rules", "has a rule"),
        ("children", "has child tables"),
        ("cascades", "is referenced by a foreign key that cascades"),
    ):
        if row[key]:
            return f"{name} {text}"
    return None


def _mysql(conn: sa.Connection, name: str) -> str | None:
    parts = name.split(".")
    if len(parts) > 2:
        return f"{name} is not a table name the trigger check can resolve"
    args = {"name": parts[-1], "schema": parts[0] if len(parts) == 2 else None}
    where = "= COALESCE(:schema, DATABASE())"
    kind = conn.execute(
        sa.text(
            f"SELECT TABLE_TYPE FROM information_schema.TABLES WHERE TABLE_SCHEMA {where} "
            "AND TABLE_NAME = :name"
        ),
        args,
    ).scalar()
    if kind is None:
        return f"{name} was not found"
    if kind == "VIEW":
        return f"{name} is a view"
    if kind != "BASE TABLE":
        return f"{name} is not a base table ({kind})"
    trigger = conn.execute(
        sa.text(
            f"SELECT TRIGGER_NAME FROM information_schema.TRIGGERS WHERE EVENT_OBJECT_SCHEMA {where} "
            "AND EVENT_OBJECT_TABLE = :name LIMIT 1"
        ),
        args,
    ).scalar()
    if trigger is not None:
        return f"{name} has a trigger ({trigger})"
    cascade = conn.execute(
        sa.text(
            "SELECT TABLE_NAME FROM information_schema.REFERENTIAL_CONSTRAINTS "
            f"WHERE UNIQUE_CONSTRAINT_SCHEMA {where} AND REFERENCED_TABLE_NAME = :name "
            "AND (DELETE_RULE IN ('CASCADE', 'SET NULL', 'SET DEFAULT') "
            "OR UPDATE_RULE IN ('CASCADE', 'SET NULL', 'SET DEFAULT')) LIMIT 1"
        ),
        args,
    ).scalar()
    if cascade is not None:
        return f"a foreign key of {cascade} cascades from {name}"
    return None
