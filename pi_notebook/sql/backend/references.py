"""What else a write reaches: rows of other tables that reference the rows it deletes (or
whose key it changes) through foreign keys, and the triggers that run with it.

Part of the write preview (see :mod:`.measure`): runs in the backend's worker, on the
preview's own connection inside its transaction (which is always rolled back), *before* the
statement itself, so the rows are counted as they stand. For a DELETE, or an UPDATE that
assigns a referenced column, of one table ``T`` whose touched rows are derivable
(:attr:`~.derive.WritePlan.rows_sql`):

- the engine's catalog lists the foreign keys that reference ``T`` (SQLite
  ``pragma_foreign_key_list``, PostgreSQL ``pg_constraint``, MySQL/MariaDB
  ``information_schema``, DuckDB ``duckdb_constraints()``), read in the same transaction;
- for each, ``SELECT count(*) FROM child JOIN (<the statement's rows of T>) ON <key>`` counts
  the referencing rows (a referenced key is unique, so each child row counts once), and the
  key's action says what the write does to them: delete them too (``CASCADE``, followed to
  the tables that reference those, :data:`MAX_DEPTH` levels deep), set their key to NULL or
  its default, or fail (``RESTRICT``/``NO ACTION``); where the connection does not enforce
  foreign keys, that they would be left referencing nothing;
- triggers on ``T`` and on the tables a cascade reaches are named (what they do is not
  previewed).

A DROP TABLE or TRUNCATE of a referenced table: SQLite's DROP TABLE and DuckDB's TRUNCATE
delete every row first (described as such a DELETE); elsewhere the engine refuses while
another table references it, which the preview says, naming the tables (PostgreSQL's
``CASCADE``: a TRUNCATE empties them too, a DROP drops their keys and leaves their rows).

Every derived count is classified again and run only if it is a pure read. A count that
cannot be taken is said plainly; nothing here ever claims "no other rows" it did not count.

The catalog is read with SQL rather than SQLAlchemy's inspector: the inspector takes a
connection of its own (an in-memory SQLite database or a DuckDB file has one, and it is inside
the preview's transaction) and reads every table's keys to find the few that reference ``T``.
What does not belong here: whether the write may run, or be covered by a grant
(``database/triggers.py`` decides that a cascading key puts a write outside every grant).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Literal

import sqlglot
from sqlglot import exp

from pi_notebook.sql import classify
from pi_notebook.sql.backend.derive import WritePlan
from pi_notebook.sql.backend.measure import query

__all__ = ["MAX_DEPTH", "MAX_NOTES", "ForeignKey", "reached"]

MAX_DEPTH = 3
"""Levels of ``ON DELETE CASCADE`` (or key changes) followed from the written table."""
MAX_NOTES = 12
"""Most foreign keys described; more are summed up in one line."""

Event = Literal["delete", "update"]

_DIALECT = {"sqlite": "sqlite", "postgresql": "postgres", "mysql": "mysql", "duckdb": "duckdb"}
_PG_ACTIONS = {
    "a": "NO ACTION",
    "r": "RESTRICT",
    "c": "CASCADE",
    "n": "SET NULL",
    "d": "SET DEFAULT",
}
_FAILS = ("NO ACTION", "RESTRICT")
_FAIL, _UNKNOWN, _CHANGE, _TRIGGER = range(4)


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
class _Table:
    """A table as the catalog names it (``schema`` ``""``: the default one)."""

    schema: str
    name: str
    label: str

    def node(self) -> exp.Table:
        db = exp.to_identifier(self.schema, quoted=True) if self.schema else None
        return exp.Table(this=exp.to_identifier(self.name, quoted=True), db=db)


def reached(raw: Any, backend: str, plan: WritePlan) -> list[str]:
    """Notes on the rows of other tables and the triggers the write of ``plan`` reaches
    (empty when it reaches none). Runs on ``raw`` inside the preview's transaction.

    Raises:
        Exception: a catalog read or a count failed (the caller says so in the preview).
    """
    target = plan.target
    if target is None or plan.operation not in ("DELETE", "UPDATE", "TRUNCATE", "DROP TABLE"):
        return []
    walk = _Walk(raw, backend, enforced=_enforced(raw, backend))
    table = _Table(schema=target.schema, name=target.name, label=target.name)
    why = plan.note or "the rows it touches cannot be derived"
    whole = plan.operation in ("TRUNCATE", "DROP TABLE")
    if whole and not _deletes_first(backend, plan.operation):
        walk.whole(table, plan.operation, cascade=plan.cascade, depth=0)
    else:
        event: Event = "update" if plan.operation == "UPDATE" else "delete"
        changed = frozenset(plan.set_columns) if event == "update" else None
        if not whole:
            walk.triggers(table)
        walk.follow(table, plan.rows_sql, event, changed, depth=0, why=why)
    notes = [text for _rank, text in sorted(walk.notes, key=lambda n: n[0])]
    if len(notes) > MAX_NOTES:
        notes = [
            *notes[: MAX_NOTES - 1],
            f"and {len(notes) - MAX_NOTES + 1} more effects on other tables (not listed)",
        ]
    return notes


class _Walk:
    """Follows foreign keys from one table's touched rows, collecting notes."""

    def __init__(self, raw: Any, backend: str, *, enforced: bool) -> None:
        self.raw, self.backend, self.enforced = raw, backend, enforced
        self.dialect = _DIALECT[backend]
        self.notes: list[tuple[int, str]] = []
        """(rank, text): failures first, then rows not counted, then what changes, triggers."""
        self._named: set[tuple[str, str]] = set()
        self._step = 0

    def follow(
        self,
        parent: _Table,
        rows_sql: str | None,
        event: Event,
        changed: frozenset[str] | None,
        *,
        depth: int,
        why: str,
    ) -> None:
        """Describe the foreign keys referencing ``parent``'s rows ``rows_sql`` (``changed``:
        the columns an update assigns; ``None`` for a delete)."""
        keys = [
            fk
            for fk in _referencing(self.raw, self.backend, parent)
            if changed is None or {c.lower() for c in fk.referred} & changed
        ]
        for fk in keys:
            child = self._child(parent, fk)
            action = fk.on_delete if event == "delete" else fk.on_update
            key = f"{_link(child, fk, parent)}, ON {event.upper()} {action}"
            these = f"{'these' if depth == 0 else 'those'} {parent.label}"
            if rows_sql is None:
                self.notes.append(
                    (
                        _UNKNOWN,
                        f"{child.label} references {parent.label} ({key}): "
                        f"the rows of it this reaches are not counted ({why})",
                    )
                )
                continue
            if depth >= MAX_DEPTH:
                self.notes.append(
                    (
                        _UNKNOWN,
                        f"{child.label} rows that reference {these} ({key}) "
                        f"are not counted: more than {MAX_DEPTH} levels of keys",
                    )
                )
                continue
            joined = self._joined(child, fk, rows_sql)
            n = self._count(joined)
            if n == 0:
                continue
            rows = f"{n:,} {child.label} row{'s' if n != 1 else ''}"
            refer = "references" if n == 1 else "reference"
            if not self.enforced:
                gone = "exist" if event == "delete" else "have that key"
                self.notes.append(
                    (
                        _FAIL,
                        f"leaves {rows} referencing {parent.label} rows that "
                        f"no longer {gone} ({key}): foreign keys are not enforced on "
                        "this connection",
                    )
                )
                continue
            if action in _FAILS:
                when = "would fail" if event == "delete" else "would fail if it changes their key"
                self.notes.append((_FAIL, f"{when}: {rows} {refer} {these} ({key})"))
                continue
            self.triggers(child)
            if action == "CASCADE" and event == "delete":
                self.notes.append((_CHANGE, f"also deletes {rows} that {refer} {these} ({key})"))
                self.follow(child, joined, "delete", None, depth=depth + 1, why=why)
                continue
            cols = ", ".join(fk.columns)
            if action == "CASCADE":
                done = f"changes {cols} to the new key in"
            else:
                done = f"sets {cols} to {'NULL' if action == 'SET NULL' else 'its default'} in"
            self.notes.append((_CHANGE, f"also {done} {rows} that {refer} {these} ({key})"))
            self.follow(
                child,
                joined,
                "update",
                frozenset(c.lower() for c in fk.columns),
                depth=depth + 1,
                why=why,
            )

    def whole(self, parent: _Table, operation: str, *, cascade: bool, depth: int) -> None:
        """Describe the foreign keys referencing ``parent`` for a DROP TABLE or TRUNCATE of
        it, which the engine refuses while another table references it (PostgreSQL
        ``CASCADE``: a TRUNCATE empties those tables too, a DROP drops their keys)."""
        for fk in _referencing(self.raw, self.backend, parent):
            if fk.table.lower() == parent.name.lower() and fk.schema in ("", parent.schema):
                continue  # a table may reference itself and still be dropped or emptied
            child = self._child(parent, fk)
            key = _link(child, fk, parent)
            n = self._count(f"SELECT * FROM {_qualified(child, self.dialect)}")
            rows = f"{n:,} row{'s' if n != 1 else ''}"
            verb, done = ("drop", "dropped") if operation == "DROP TABLE" else ("empty", "emptied")
            if not self.enforced:
                self.notes.append(
                    (
                        _FAIL,
                        f"leaves the {rows} of {child.label} referencing a "
                        f"table it would {verb} ({key}): foreign keys are not "
                        "enforced on this connection",
                    )
                )
            elif not cascade:
                self.notes.append(
                    (
                        _FAIL,
                        f"would fail: {child.label} ({rows}) references "
                        f"{parent.label} ({key}), and a table another table "
                        f"references cannot be {done}",
                    )
                )
            elif operation == "DROP TABLE":
                self.notes.append(
                    (
                        _CHANGE,
                        f"also drops the foreign key of {child.label} that "
                        f"references {parent.label} ({key}): its {rows} stay",
                    )
                )
            elif depth >= MAX_DEPTH:
                self.notes.append(
                    (
                        _UNKNOWN,
                        f"tables that reference {child.label} are not "
                        f"checked: more than {MAX_DEPTH} levels of keys",
                    )
                )
            else:
                self.notes.append(
                    (
                        _CHANGE,
                        f"also empties {child.label}, all its {rows} "
                        f"({key}, by TRUNCATE ... CASCADE)",
                    )
                )
                self.whole(child, operation, cascade=True, depth=depth + 1)

    def _child(self, parent: _Table, fk: ForeignKey) -> _Table:
        same = not fk.schema or fk.schema == parent.schema
        return _Table(
            schema=fk.schema or parent.schema,
            name=fk.table,
            label=fk.table if same else f"{fk.schema}.{fk.table}",
        )

    def triggers(self, table: _Table) -> None:
        """Name the triggers on ``table`` (once per table)."""
        ident = (table.schema.lower(), table.name.lower())
        if ident in self._named:
            return
        self._named.add(ident)
        names = _triggers(self.raw, self.backend, table)
        if names:
            shown = ", ".join(names[:5]) + (f" and {len(names) - 5} more" if len(names) > 5 else "")
            self.notes.append(
                (
                    _TRIGGER,
                    f"{table.label} has trigger{'s' if len(names) > 1 else ''} "
                    f"{shown}: they run with the write, and what they change is not "
                    "previewed",
                )
            )

    def _joined(self, child: _Table, fk: ForeignKey, rows_sql: str) -> str:
        """The rows of ``child`` that reference the parent rows ``rows_sql``."""
        self._step += 1
        c, q = f"_pi_c{self._step}", f"_pi_r{self._step}"
        rows = sqlglot.parse_one(rows_sql, read=self.dialect)
        if not isinstance(rows, exp.Query):
            raise ValueError("the rows it touches are not a query")
        on = exp.and_(
            *(
                exp.EQ(
                    this=exp.column(col, table=c, quoted=True),
                    expression=exp.column(ref, table=q, quoted=True),
                )
                for col, ref in zip(fk.columns, fk.referred, strict=True)
            )
        )
        select = (
            exp.select(exp.Column(this=exp.Star(), table=exp.to_identifier(c)))
            .from_(child.node().as_(c))
            .join(rows.subquery(q), on=on)
        )
        return select.sql(dialect=self.dialect)

    def _count(self, rows: str) -> int:
        select = sqlglot.parse_one(rows, read=self.dialect)
        assert isinstance(select, exp.Select)
        select.set("expressions", [exp.Count(this=exp.Star())])
        sql = select.sql(dialect=self.dialect)
        if classify(sql, self.dialect).kind != "read":  # fail closed, as derive does
            raise ValueError("counting them would not be a pure read")
        return int(query(self.raw, self.backend, sql).rows[0][0])


def _link(child: _Table, fk: ForeignKey, parent: _Table) -> str:
    """``order_items.order_id → orders.order_id``; ``c(a, b) → p(x, y)`` for a composite key."""

    def cols(table: _Table, names: tuple[str, ...]) -> str:
        return (
            f"{table.label}.{names[0]}" if len(names) == 1 else f"{table.label}({', '.join(names)})"
        )

    return f"{cols(child, fk.columns)} → {cols(parent, fk.referred)}"


def _deletes_first(backend: str, operation: str) -> bool:
    """Whether the engine runs ``operation`` on a referenced table as a DELETE of all its rows
    (SQLite's DROP TABLE with foreign keys on, DuckDB's TRUNCATE), keys' actions included."""
    return (backend, operation) in (("sqlite", "DROP TABLE"), ("duckdb", "TRUNCATE"))


def _enforced(raw: Any, backend: str) -> bool:
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


def _referencing(raw: Any, backend: str, parent: _Table) -> list[ForeignKey]:
    """The foreign keys that reference ``parent``, from the engine's catalog."""
    schema = parent.schema or None
    if backend == "sqlite":
        return _sqlite_keys(raw, parent)
    if backend == "postgresql":
        rows = query(raw, backend, _PG_KEYS, (_qualified(parent, "postgres"),)).rows
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


def _sqlite_keys(raw: Any, parent: _Table) -> list[ForeignKey]:
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


def _qualified(table: _Table, dialect: str) -> str:
    return table.node().sql(dialect=dialect)


def _triggers(raw: Any, backend: str, table: _Table) -> list[str]:
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
        return [str(r[0]) for r in query(raw, backend, sql, (_qualified(table, "postgres"),)).rows]
    if backend == "mysql":
        sql = (
            "SELECT TRIGGER_NAME FROM information_schema.TRIGGERS WHERE EVENT_OBJECT_SCHEMA "
            "= COALESCE(%s, DATABASE()) AND EVENT_OBJECT_TABLE = %s ORDER BY 1"
        )
        return [
            str(r[0]) for r in query(raw, backend, sql, (table.schema or None, table.name)).rows
        ]
    return []
