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

The catalog (the keys, whether they are enforced, the triggers) is read with SQL, see
:mod:`.catalog_keys`.
What does not belong here: whether the write may run, or be covered by a grant
(``database/triggers.py`` decides that a cascading key puts a write outside every grant).
"""

from __future__ import annotations

from typing import Any, Literal

import sqlglot
from sqlglot import exp

from pi_notebook.sql import classify
from pi_notebook.sql.backend.catalog_keys import (
    CatalogTable,
    ForeignKey,
    enforced,
    qualified,
    referencing,
)
from pi_notebook.sql.backend.catalog_keys import triggers as table_triggers
from pi_notebook.sql.backend.derive import WritePlan
from pi_notebook.sql.backend.measure import query

__all__ = ["MAX_DEPTH", "MAX_NOTES", "ForeignKey", "reached"]

MAX_DEPTH = 3
"""Levels of ``ON DELETE CASCADE`` (or key changes) followed from the written table."""
MAX_NOTES = 12
"""Most foreign keys described; more are summed up in one line."""

Event = Literal["delete", "update"]

_DIALECT = {"sqlite": "sqlite", "postgresql": "postgres", "mysql": "mysql", "duckdb": "duckdb"}
_FAILS = ("NO ACTION", "RESTRICT")
_FAIL, _UNKNOWN, _CHANGE, _TRIGGER = range(4)


def reached(raw: Any, backend: str, plan: WritePlan) -> list[str]:
    """Notes on the rows of other tables and the triggers the write of ``plan`` reaches
    (empty when it reaches none). Runs on ``raw`` inside the preview's transaction.

    Raises:
        Exception: a catalog read or a count failed (the caller says so in the preview).
    """
    target = plan.target
    if target is None or plan.operation not in ("DELETE", "UPDATE", "TRUNCATE", "DROP TABLE"):
        return []
    walk = _Walk(raw, backend, enforced=enforced(raw, backend))
    table = CatalogTable(schema=target.schema, name=target.name, label=target.name)
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
        parent: CatalogTable,
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
            for fk in referencing(self.raw, self.backend, parent)
            if changed is None or {c.lower() for c in fk.referred} & changed
        ]
        for fk in keys:
            self._follow_key(parent, fk, rows_sql, event, depth=depth, why=why)

    def _follow_key(
        self,
        parent: CatalogTable,
        fk: ForeignKey,
        rows_sql: str | None,
        event: Event,
        *,
        depth: int,
        why: str,
    ) -> None:
        """Describe one foreign key referencing ``parent``'s rows ``rows_sql``, and follow it
        to the child's rows where the write changes them."""
        child = self._child(parent, fk)
        action = fk.on_delete if event == "delete" else fk.on_update
        key = f"{_link(child, fk, parent)}, ON {event.upper()} {action}"
        these = f"{'these' if depth == 0 else 'those'} {parent.label}"
        if rows_sql is None or depth >= MAX_DEPTH:
            self._not_counted(parent, child, key, these, derived=rows_sql is not None, why=why)
            return
        joined = self._joined(child, fk, rows_sql)
        n = self._count(joined)
        if n == 0:
            return
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
            return
        if action in _FAILS:
            when = "would fail" if event == "delete" else "would fail if it changes their key"
            self.notes.append((_FAIL, f"{when}: {rows} {refer} {these} ({key})"))
            return
        self.triggers(child)
        if action == "CASCADE" and event == "delete":
            self.notes.append((_CHANGE, f"also deletes {rows} that {refer} {these} ({key})"))
            self.follow(child, joined, "delete", None, depth=depth + 1, why=why)
            return
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

    def _not_counted(
        self,
        parent: CatalogTable,
        child: CatalogTable,
        key: str,
        these: str,
        *,
        derived: bool,
        why: str,
    ) -> None:
        """Say that the rows of ``child`` a key reaches are not counted, and why: the
        parent's rows are not ``derived``, or the keys go deeper than :data:`MAX_DEPTH`."""
        if not derived:
            text = (
                f"{child.label} references {parent.label} ({key}): "
                f"the rows of it this reaches are not counted ({why})"
            )
        else:
            text = (
                f"{child.label} rows that reference {these} ({key}) "
                f"are not counted: more than {MAX_DEPTH} levels of keys"
            )
        self.notes.append((_UNKNOWN, text))

    def whole(self, parent: CatalogTable, operation: str, *, cascade: bool, depth: int) -> None:
        """Describe the foreign keys referencing ``parent`` for a DROP TABLE or TRUNCATE of
        it, which the engine refuses while another table references it (PostgreSQL
        ``CASCADE``: a TRUNCATE empties those tables too, a DROP drops their keys)."""
        for fk in referencing(self.raw, self.backend, parent):
            if fk.table.lower() == parent.name.lower() and fk.schema in ("", parent.schema):
                continue  # a table may reference itself and still be dropped or emptied
            child = self._child(parent, fk)
            key = _link(child, fk, parent)
            n = self._count(f"SELECT * FROM {qualified(child, self.dialect)}")
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

    def _child(self, parent: CatalogTable, fk: ForeignKey) -> CatalogTable:
        same = not fk.schema or fk.schema == parent.schema
        return CatalogTable(
            schema=fk.schema or parent.schema,
            name=fk.table,
            label=fk.table if same else f"{fk.schema}.{fk.table}",
        )

    def triggers(self, table: CatalogTable) -> None:
        """Name the triggers on ``table`` (once per table)."""
        ident = (table.schema.lower(), table.name.lower())
        if ident in self._named:
            return
        self._named.add(ident)
        names = table_triggers(self.raw, self.backend, table)
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

    def _joined(self, child: CatalogTable, fk: ForeignKey, rows_sql: str) -> str:
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


def _link(child: CatalogTable, fk: ForeignKey, parent: CatalogTable) -> str:
    """``order_items.order_id → orders.order_id``; ``c(a, b) → p(x, y)`` for a composite key."""

    def cols(table: CatalogTable, names: tuple[str, ...]) -> str:
        return (
            f"{table.label}.{names[0]}" if len(names) == 1 else f"{table.label}({', '.join(names)})"
        )

    return f"{cols(child, fk.columns)} → {cols(parent, fk.referred)}"


def _deletes_first(backend: str, operation: str) -> bool:
    """Whether the engine runs ``operation`` on a referenced table as a DELETE of all its rows
    (SQLite's DROP TABLE with foreign keys on, DuckDB's TRUNCATE), keys' actions included."""
    return (backend, operation) in (("sqlite", "DROP TABLE"), ("duckdb", "TRUNCATE"))
