"""What the write preview derives from one write statement: :class:`WritePlan` (the reads
that count and sample the rows it would change, whether it is pure, the table it writes)
and :class:`TableRef`. :func:`~.derive.plan_write` makes one.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

__all__ = ["SAMPLE_ROWS", "TableRef", "WritePlan"]

SAMPLE_ROWS = 5
"""Most rows a preview's sample holds."""


@dataclass(frozen=True, kw_only=True)
class TableRef:
    """A table a statement writes, as named in it.

    Attributes:
        name: the table's name, unquoted.
        schema: its schema (or database) when qualified, else ``""``.
        sql: the (possibly qualified) name as SQL text of the dialect, quoted as written.
    """

    name: str
    schema: str = ""
    sql: str = ""


@dataclass(frozen=True, kw_only=True)
class WritePlan:
    """Reads derived from one write statement (see the module docstring).

    Attributes:
        operation: ``INSERT``, ``UPDATE``, ``DELETE``, ``MERGE``, ``DROP TABLE``,
            ``TRUNCATE``, ``CREATE TABLE AS``, ``DDL`` or ``OTHER``.
        dml: the statement changes rows in place (INSERT/UPDATE/DELETE/MERGE), so a
            transaction that is rolled back undoes it where the engine is transactional.
        pure: every expression it evaluates is a pure read (see the module docstring).
        target: the table written, when there is exactly one.
        count_sql: a read counting the rows it would change, or ``None``.
        static_rows: the count the statement states itself, or ``None``.
        sample_sql: a read of up to five of those rows, or ``None``.
        rows_sql: a read of every row of ``target`` an UPDATE, DELETE, TRUNCATE or DROP TABLE
            touches (all its columns), or ``None``: the rows of other tables that reference
            them are counted against it (see :mod:`.references`).
        set_columns: the columns an UPDATE assigns (lower case).
        cascade: a DROP TABLE or TRUNCATE that says ``CASCADE`` (PostgreSQL).
        sample: ``(columns, rows)`` of literal rows an INSERT ... VALUES would add.
        note: why something could not be derived, for the person reading the preview.
    """

    operation: str
    dml: bool = False
    pure: bool = False
    target: TableRef | None = None
    count_sql: str | None = None
    static_rows: int | None = None
    sample_sql: str | None = None
    sample: tuple[list[str], list[tuple[Any, ...]]] | None = None
    note: str | None = None
    rows_sql: str | None = None
    set_columns: tuple[str, ...] = ()
    cascade: bool = False
    probes: tuple[str, ...] = field(default=(), repr=False)
