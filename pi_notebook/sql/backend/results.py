"""Result shaping: rows for the application (a DataFrame in ``details``), a bounded text
preview for the model (``content``).

The preview is built from the fetched tuples, not from the DataFrame, because pandas'
``to_string`` alone costs more than the whole fixed overhead budget of a query.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import pandas as pd

__all__ = ["PREVIEW_CHARS", "PREVIEW_ROWS", "QueryOutcome", "render_preview"]

PREVIEW_ROWS = 20
PREVIEW_CHARS = 4_000
_CELL_CHARS = 80


@dataclass(kw_only=True)
class QueryOutcome:
    """What one statement produced.

    Attributes:
        dataframe: the rows kept (at most the row cap), as a pandas DataFrame.
        columns: column names, in order.
        row_count: rows the statement returned in total (counted past the cap, see
            ``row_count_exact``); for a statement without a result set, the rows affected.
        truncated: True when ``dataframe`` holds fewer rows than ``row_count``.
        row_count_exact: False when counting stopped at the counting limit.
        duration_ms: wall time of the statement, fetch included.
        statement_kind: ``"read"`` or ``"write"``, the backend's own verdict.
        dialect: the sqlglot dialect the statement was checked with.
        args_hash: canonical hash of the final arguments.
        preview: the text the model sees.
    """

    dataframe: pd.DataFrame
    columns: list[str]
    row_count: int
    truncated: bool
    row_count_exact: bool = True
    duration_ms: float
    statement_kind: str
    dialect: str
    args_hash: str
    has_rows: bool = True
    preview: str = field(default="")

    def details(self) -> dict[str, Any]:
        """The ``details`` dict of the tool result (for the application, never the model)."""
        return {
            "dataframe": self.dataframe,
            "columns": list(self.columns),
            "row_count": self.row_count,
            "row_count_exact": self.row_count_exact,
            "truncated": self.truncated,
            "duration_ms": self.duration_ms,
            "statement_kind": self.statement_kind,
            "dialect": self.dialect,
            "args_hash": self.args_hash,
        }


def _cell(value: Any) -> str:
    text = "NULL" if value is None else str(value)
    text = text.replace("\n", "\\n").replace("|", "\\|")
    return text if len(text) <= _CELL_CHARS else text[: _CELL_CHARS - 1] + "…"


def render_preview(
    columns: Sequence[str],
    rows: Sequence[Sequence[Any]],
    *,
    row_count: int,
    row_count_exact: bool,
    truncated: bool,
    has_rows: bool,
    max_rows: int = PREVIEW_ROWS,
    max_chars: int = PREVIEW_CHARS,
) -> str:
    """A pipe table of the first rows, within ``max_rows`` and ``max_chars``, with the counts.

    The first line always states the counts, and the last says what was left out, so the
    model never mistakes a preview for the whole result.
    """
    if not has_rows:
        return f"Statement executed; {row_count} row(s) affected."
    total = f"{row_count}" if row_count_exact else f"at least {row_count}"
    head = f"{total} row(s), {len(columns)} column(s)."
    if truncated:
        head += f" Only the first {len(rows)} rows were kept (row cap)."
    lines = [head, " | ".join(_cell(c) for c in columns)]
    used = sum(len(line) + 1 for line in lines)
    shown = 0
    for row in rows[:max_rows]:
        line = " | ".join(_cell(v) for v in row)
        if used + len(line) + 1 > max_chars:
            break
        lines.append(line)
        used += len(line) + 1
        shown += 1
    if shown < row_count:
        lines.append(
            f"[preview shows {shown} of {total} rows; the user sees the kept rows as a table. "
            "Use aggregates or LIMIT to look at more.]"
        )
    return "\n".join(lines)
