"""The engine's catalog as the write preview reads it, with SQL on the preview's own
connection inside its transaction: the foreign keys that reference a table
(:func:`referencing`: SQLite ``pragma_foreign_key_list``, PostgreSQL ``pg_constraint``,
MySQL/MariaDB ``information_schema``, DuckDB ``duckdb_constraints()``), whether the
connection enforces them now (:func:`enforced`), and the user triggers on a table
(:func:`triggers`).

SQL rather than SQLAlchemy's inspector: the inspector takes a connection of its own (an
in-memory SQLite database or a DuckDB file has one, and it is inside the preview's
transaction) and reads every table's keys to find the few that reference the table.
What the keys mean for a write is said by :mod:`.references`.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from sqlglot import exp

from pi_notebook.sql.backend.measure import query

__all__ = ["CatalogTable", "ForeignKey", "enforced", "qualified", "referencing", "triggers"]

_PG_ACTIONS = {
    "a": "NO ACTION",
    "r": "RESTRICT",
    "c": "CASCADE",
    "n": "SET NULL",
    "d": "SET DEFAULT",
}


@dataclass(frozen=True, kw_only=True)
class ForeignKey:
    """A foreign key of ``table`` (the child) that references the parent table.

    Attributes:
        schema: the child's schema (``""``: the parent's).
        table: the child table.
        columns: the child's key columns.
        referred: the parent's columns they reference, in the same order.
        on_delete: ``CASCADE``, ``SET NULL``, ``SET DEFAULT``, ``RESTRICT`` or ``NO ACTION``.
        on_update: the same, for a change of the parent's key.
    """

    schema: str
    table: str
    columns: tuple[str, ...]
    referred: tuple[str, ...]
    on_delete: str
    on_update: str


@dataclass(frozen=True, kw_only=True)
class CatalogTable:
    """A table as the catalog names it (``schema`` ``""``: the default one)."""

    schema: str
    name: str
    label: str

    def node(self) -> exp.Table:
        db = exp.to_identifier(self.schema, quoted=True) if self.schema else None
        return exp.Table(this=exp.to_identifier(self.name, quoted=True), db=db)


def enforced(raw: Any, backend: str) -> bool:
    """Whether this connection enforces foreign keys now."""
    if backend == "sqlite":
        return bool(query(raw, backend, "PRAGMA foreign_keys").rows[0][0])
    if backend == "mysql":
        return bool(int(query(raw, backend, "SELECT @@foreign_key_checks").rows[0][0]))
    if backend == "postgresql":  # foreign keys are triggers, which a replica role skips
        return query(raw, backend, "SHOW session_replication_role").rows[0][0] != "replica"
    return True


_SQLITE_KEYS = (
    'SELECT m.name, k.id, k."from", k."to", k.on_delete, k.on_update '
    "FROM {schema}.sqlite_master AS m, pragma_foreign_key_list(m.name, ?) AS k "
    "WHERE m.type = 'table' AND lower(k.\"table\") = lower(?) ORDER BY m.name, k.id, k.seq"
)
_PG_KEYS = """
SELECT n.nspname, r.relname,
  ARRAY(SELECT a.attname::text FROM unnest(c.conkey) WITH ORDINALITY AS k(num, i)
        JOIN pg_attribute a ON a.attrelid = c.conrelid AND a.attnum = k.num ORDER BY k.i),
  ARRAY(SELECT a.attname::text FROM unnest(c.confkey) WITH ORDINALITY AS k(num, i)
        JOIN pg_attribute a ON a.attrelid = c.confrelid AND a.attnum = k.num ORDER BY k.i),
  c.confdeltype::text, c.confupdtype::text, pn.nspname
FROM pg_constraint c
JOIN pg_class r ON r.oid = c.conrelid JOIN pg_namespace n ON n.oid = r.relnamespace
JOIN pg_class p ON p.oid = c.confrelid JOIN pg_namespace pn ON pn.oid = p.relnamespace
WHERE c.contype = 'f' AND c.confrelid = to_regclass(%s)
  -- a key inherited by a partition of the referencing table is its parent key's copy; one
  -- that references a partition (the written table) stands for the parent key here
  AND (c.conparentid = 0 OR (SELECT k.confrelid FROM pg_constraint k
                             WHERE k.oid = c.conparentid) <> c.confrelid)
ORDER BY n.nspname, r.relname, c.conname
"""
_MYSQL_KEYS = """
SELECT k.TABLE_SCHEMA, k.TABLE_NAME, k.CONSTRAINT_NAME, k.COLUMN_NAME, k.REFERENCED_COLUMN_NAME,
  r.DELETE_RULE, r.UPDATE_RULE, k.REFERENCED_TABLE_SCHEMA
FROM information_schema.KEY_COLUMN_USAGE k
JOIN information_schema.REFERENTIAL_CONSTRAINTS r
  ON r.CONSTRAINT_SCHEMA = k.CONSTRAINT_SCHEMA AND r.CONSTRAINT_NAME = k.CONSTRAINT_NAME
  AND r.TABLE_NAME = k.TABLE_NAME
WHERE k.REFERENCED_TABLE_SCHEMA = COALESCE(%s, DATABASE()) AND k.REFERENCED_TABLE_NAME = %s
ORDER BY k.TABLE_SCHEMA, k.TABLE_NAME, k.CONSTRAINT_NAME, k.ORDINAL_POSITION
"""
_DUCKDB_KEYS = (
    "SELECT schema_name, table_name, constraint_column_names, referenced_column_names "
    "FROM duckdb_constraints() WHERE constraint_type = 'FOREIGN KEY' "
    "AND schema_name = COALESCE(?, current_schema()) AND lower(referenced_table) = lower(?) "
    "ORDER BY schema_name, table_name, constraint_index"
)


def referencing(raw: Any, backend: str, parent: CatalogTable) -> list[ForeignKey]:
    """The foreign keys that reference ``parent``, from the engine's catalog."""
    schema = parent.schema or None
    if backend == "sqlite":
        return _sqlite_keys(raw, parent)
    if backend == "postgresql":
        rows = query(raw, backend, _PG_KEYS, (qualified(parent, "postgres"),)).rows
        return [
            ForeignKey(
                schema="" if ns == pns else ns,
                table=t,
                columns=tuple(c),
                referred=tuple(r),
                on_delete=_PG_ACTIONS.get(str(d), str(d)),
                on_update=_PG_ACTIONS.get(str(u), str(u)),
            )
            for ns, t, c, r, d, u, pns in rows
        ]
    if backend == "mysql":
        grouped: dict[tuple[str, str, str], list[tuple[Any, ...]]] = {}
        for row in query(raw, backend, _MYSQL_KEYS, (schema, parent.name)).rows:
            grouped.setdefault((str(row[0]), str(row[1]), str(row[2])), []).append(row)
        return [
            ForeignKey(
                schema="" if ns == str(rows[0][7]) else ns,
                table=t,
                columns=tuple(str(r[3]) for r in rows),
                referred=tuple(str(r[4]) for r in rows),
                on_delete=str(rows[0][5]),
                on_update=str(rows[0][6]),
            )
            for (ns, t, _name), rows in grouped.items()
        ]
    if backend == "duckdb":  # DuckDB's foreign keys only restrict
        rows = query(raw, backend, _DUCKDB_KEYS, (schema, parent.name)).rows
        return [
            ForeignKey(
                schema="",
                table=t,
                columns=tuple(c),
                referred=tuple(r),
                on_delete="NO ACTION",
                on_update="NO ACTION",
            )
            for _ns, t, c, r in rows
        ]
    raise ValueError(f"no foreign key catalog for {backend}")


def _sqlite_keys(raw: Any, parent: CatalogTable) -> list[ForeignKey]:
    schema = parent.schema or "main"
    quoted = '"' + schema.replace('"', '""') + '"'
    rows = query(raw, "sqlite", _SQLITE_KEYS.format(schema=quoted), (schema, parent.name)).rows
    grouped: dict[tuple[str, int], list[tuple[Any, ...]]] = {}
    for row in rows:
        grouped.setdefault((str(row[0]), int(row[1])), []).append(row)
    keys: list[ForeignKey] = []
    primary: tuple[str, ...] | None = None
    for (table, _id), parts in grouped.items():
        referred = tuple(str(p[3]) if p[3] is not None else "" for p in parts)
        if "" in referred:  # REFERENCES parent without columns: the parent's primary key
            if primary is None:
                pk = query(
                    raw,
                    "sqlite",
                    "SELECT name FROM pragma_table_info(?, ?) WHERE pk > 0 ORDER BY pk",
                    (parent.name, schema),
                ).rows
                primary = tuple(str(r[0]) for r in pk)
            referred = primary
        keys.append(
            ForeignKey(
                schema="",
                table=table,
                columns=tuple(str(p[2]) for p in parts),
                referred=referred,
                on_delete=str(parts[0][4]).upper(),
                on_update=str(parts[0][5]).upper(),
            )
        )
    return keys


def qualified(table: CatalogTable, dialect: str) -> str:
    """The table's name as ``dialect`` writes it, quoted."""
    return table.node().sql(dialect=dialect)


def triggers(raw: Any, backend: str, table: CatalogTable) -> list[str]:
    """Names of the user triggers on ``table`` (DuckDB has none)."""
    if backend == "sqlite":
        names: list[str] = []
        for schema in dict.fromkeys([table.schema or "main", "temp"]):
            quoted = '"' + schema.replace('"', '""') + '"'
            names += [
                str(r[0])
                for r in query(
                    raw,
                    backend,
                    f"SELECT name FROM {quoted}.sqlite_master WHERE type = 'trigger' "
                    "AND lower(tbl_name) = lower(?) ORDER BY name",
                    (table.name,),
                ).rows
            ]
        return names
    if backend == "postgresql":
        sql = (
            "SELECT tgname::text FROM pg_trigger WHERE tgrelid = to_regclass(%s) "
            "AND NOT tgisinternal ORDER BY 1"
        )
        return [str(r[0]) for r in query(raw, backend, sql, (qualified(table, "postgres"),)).rows]
    if backend == "mysql":
        sql = (
            "SELECT TRIGGER_NAME FROM information_schema.TRIGGERS WHERE EVENT_OBJECT_SCHEMA "
            "= COALESCE(%s, DATABASE()) AND EVENT_OBJECT_TABLE = %s ORDER BY 1"
        )
        return [
            str(r[0]) for r in query(raw, backend, sql, (table.schema or None, table.name)).rows
        ]
    return []
