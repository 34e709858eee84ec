"""Result shaping: rows for the application (a DataFrame in ``details``), a bounded text
preview for the model (``content``).

The preview is built from the first fetched rows, not from the DataFrame (pandas'
``to_string`` alone costs more than the whole fixed overhead budget of a query), and keeps to
its budget in rows, columns and characters however wide the result (D7). Numbers
are written for people and exactly (thousands separators, every digit the database returned,
a decimal's own scale, a float's shortest round-trip text), by the same function the
notebook's cards and records use (:func:`pi_notebook.formatting.format_value`), from the same
rows (:attr:`QueryOutcome.head`); a number is never cut to fit a cell's width.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import pandas as pd

from pi_notebook.exact_rows import remember
from pi_notebook.formatting import format_value, is_number
from pi_notebook.sql.backend.fetch import Fetched

__all__ = [
    "PREVIEW_CHARS",
    "PREVIEW_COLUMNS",
    "PREVIEW_ROWS",
    "QueryOutcome",
    "format_value",
    "render_fetched",
    "render_preview",
    "shape",
]

PREVIEW_ROWS = 20
PREVIEW_CHARS = 4_000
PREVIEW_COLUMNS = 40
"""Most columns a preview shows; the rest are named (as far as the budget allows)."""
_CELL_CHARS = 80
_MIN_CELL_CHARS = 8
_ROWS_AIMED = 5  # a wide result still shows this many rows: cells shrink to make room


@dataclass(kw_only=True)
class QueryOutcome:
    """What one statement produced.

    Attributes:
        dataframe: the rows kept (at most the row cap), as a pandas DataFrame.
        columns: column names, in order.
        row_count: rows the statement returned; a lower bound when ``row_count_exact`` is
            false (a read that stopped at the cap reports ``row_cap + 1``: "more than the
            cap"). For a statement without a result set, the rows affected.
        truncated: True when ``dataframe`` holds fewer rows than the statement returned.
        row_count_exact: False when fetching stopped before the end of the result.
        size_capped: True when the rows kept stopped at the size bound (``max_result_bytes``
            of values, see :mod:`.sizes`) rather than the row cap.
        duration_ms: wall time of the statement, fetch included.
        statement_kind: ``"read"`` or ``"write"``, the backend's own verdict.
        dialect: the sqlglot dialect the statement was checked with.
        args_hash: canonical hash of the final arguments.
        preview: the text the model sees.
        head: the first rows (at most 50) as the database returned them (a ``numeric`` as a
            ``Decimal`` with its scale, where the DataFrame holds a float): the values the
            model's preview, the notebook's card and its record are written from, so the
            person and the model read the same text for each cell.
    """

    dataframe: pd.DataFrame
    columns: list[str]
    row_count: int
    truncated: bool
    row_count_exact: bool = True
    size_capped: bool = False
    duration_ms: float
    statement_kind: str
    dialect: str
    args_hash: str
    has_rows: bool = True
    preview: str = field(default="")
    head: list[tuple[Any, ...]] = field(default_factory=list[tuple[Any, ...]])

    def details(self) -> dict[str, Any]:
        """The ``details`` dict of the tool result (for the application, never the model)."""
        return {
            "dataframe": self.dataframe,
            "columns": list(self.columns),
            "row_count": self.row_count,
            "row_count_exact": self.row_count_exact,
            "truncated": self.truncated,
            "size_capped": self.size_capped,
            "duration_ms": self.duration_ms,
            "statement_kind": self.statement_kind,
            "dialect": self.dialect,
            "args_hash": self.args_hash,
        }


def _cell(value: Any, column: str, width: int) -> str:
    text = format_value(value, column)
    if "\n" in text or "|" in text:
        text = text.replace("\n", "\\n").replace("|", "\\|")
    if len(text) <= width or is_number(value):  # a number is never cut: it would be wrong
        return text
    return text[: width - 1] + "…"


def render_preview(
    columns: Sequence[str],
    rows: Sequence[Sequence[Any]],
    *,
    row_count: int,
    row_count_exact: bool,
    truncated: bool,
    has_rows: bool,
    kept: int | None = None,
    size_capped: bool = False,
    max_rows: int = PREVIEW_ROWS,
    max_chars: int = PREVIEW_CHARS,
    max_columns: int = PREVIEW_COLUMNS,
) -> str:
    """A pipe table of the first rows, within ``max_rows``, ``max_columns`` and ``max_chars``
    (the whole text, notes included), with the counts.

    The first line always states the counts, and the last says what was left out, so the
    model never mistakes a preview for the whole result. ``kept`` is the number of rows in
    the DataFrame (default: ``len(rows)``); ``size_capped`` says the rows kept stopped at the
    size bound.
    """
    if not has_rows:
        return _fit(f"Statement executed; {row_count:,} row(s) affected.", max_chars)
    kept = len(rows) if kept is None else kept
    head = (
        _size_head(len(columns), row_count, row_count_exact, kept)
        if size_capped
        else _head(len(columns), row_count, row_count_exact, truncated, kept)
    )
    names = [str(c) for c in columns[:max_columns]]
    budget = max_chars - len(head) - 200  # room for the closing notes
    aimed = max(1, min(len(rows), max_rows, _ROWS_AIMED)) + 1  # + the header line
    width = max(_MIN_CELL_CHARS, min(_CELL_CHARS, budget // aimed // max(1, len(names)) - 3))
    header = " | ".join([_cell(n, "", width) for n in names])
    lines = [head, header]
    used = len(head) + len(header) + 2
    room = max_chars - 200
    shown = 0
    for row in rows[:max_rows]:
        line = " | ".join([_cell(row[k], name, width) for k, name in enumerate(names)])
        if used + len(line) + 1 > room:
            break
        lines.append(line)
        used += len(line) + 1
        shown += 1
    lines.extend(_left_out(columns, len(names), shown, row_count, row_count_exact, kept))
    return _fit("\n".join(lines), max_chars)


def _left_out(
    columns: Sequence[str], named: int, shown: int, row_count: int, exact: bool, kept: int
) -> list[str]:
    """The closing notes of a preview: the rows and the columns it does not show."""
    notes: list[str] = []
    if shown < row_count:
        total = (
            f"{row_count:,}"
            if exact
            else (f"more than {kept:,}" if row_count <= kept + 1 else f"at least {row_count:,}")
        )
        notes.append(
            f"[preview shows {shown} of {total} rows; the user sees the kept rows as a "
            "table. Use aggregates or LIMIT to look at more.]"
        )
    if len(columns) > named:
        hidden = [str(c) for c in columns[named:]]
        listed = ", ".join(hidden)
        if len(listed) > 120:
            listed = listed[:119] + "…"
        notes.append(f"[{len(hidden)} more column(s) not shown: {listed}]")
    return notes


def _head(columns: int, row_count: int, exact: bool, truncated: bool, kept: int) -> str:
    if exact and not truncated:
        return f"{row_count:,} row(s), {columns} column(s)."
    if exact:
        return f"{row_count:,} rows, {columns} column(s); the DataFrame keeps the first {kept:,} (row cap)."
    if row_count > kept + 1:
        return (
            f"At least {row_count:,} rows, {columns} column(s) (counting stopped there); "
            f"the DataFrame keeps the first {kept:,}."
        )
    return (
        f"More than {kept:,} rows, {columns} column(s): the read stopped at the row cap "
        f"(call again with count_rows=true for the exact count); the DataFrame keeps the "
        f"first {kept:,}."
    )


def _size_head(columns: int, row_count: int, exact: bool, kept: int) -> str:
    total = f"{row_count:,} rows" if exact else f"At least {row_count:,} rows"
    return (
        f"{total}, {columns} column(s); the DataFrame keeps the first {kept:,}: the "
        "values kept reached the size limit for one result. Select fewer or narrower "
        "columns (or cut long text), or aggregate, to see more."
    )


def render_fetched(fetched: Fetched) -> str:
    """The model's preview of ``fetched`` (its DataFrame built or not)."""
    return render_preview(
        fetched.columns,
        fetched.head,
        row_count=fetched.row_count,
        row_count_exact=fetched.row_count_exact,
        truncated=fetched.truncated,
        has_rows=fetched.has_rows,
        kept=fetched.rows_kept(),
        size_capped=fetched.size_capped,
    )


def shape(
    fetched: Fetched, *, kind: str, dialect: str, args_hash: str, seconds: float
) -> QueryOutcome:
    """The outcome of one statement (the worker already built the DataFrame and, through
    :func:`render_fetched`, the preview)."""
    frame = fetched.build()
    remember(frame, fetched.head)  # the card and the record write the cells the model reads
    preview = fetched.preview if fetched.preview is not None else render_fetched(fetched)
    return QueryOutcome(
        dataframe=frame,
        columns=fetched.columns,
        row_count=fetched.row_count,
        truncated=fetched.truncated,
        row_count_exact=fetched.row_count_exact,
        size_capped=fetched.size_capped,
        duration_ms=round(seconds * 1000, 3),
        statement_kind=kind,
        dialect=dialect,
        args_hash=args_hash,
        has_rows=fetched.has_rows,
        preview=preview,
        head=fetched.head,
    )


def _fit(text: str, max_chars: int) -> str:
    return text if len(text) <= max_chars else text[: max_chars - 1] + "…"
