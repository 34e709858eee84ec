"""Tables and durations for people; numbers follow :mod:`pi_notebook.formatting`.

A card's table writes each value as the preview the model reads does
(:func:`pi_notebook.formatting.format_value`, with the column's name, so ``2024`` and
``customer_id`` 10001 get no separators and ``1234567`` gets them), and from the same values:
the rows the database returned, where the backend kept them for the DataFrame
(:func:`pi_notebook.exact_rows.rows_of`: a ``numeric`` keeps its digits and scale, where the
DataFrame holds a float), the DataFrame's own cells past them. It shows a missing value
(``None``, NaN, ``NA``, ``NaT``) as ``NULL``, right-aligns a column whose values are all
numbers (Decimal and nullable ``Int64`` included), and cuts long text but never a number.
Every value that came from a database or a model is escaped before it becomes HTML.
"""

from __future__ import annotations

import html
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from ..exact_rows import rows_of
from ..formatting import format_count, format_value, is_missing, is_number

if TYPE_CHECKING:
    import pandas as pd

__all__ = [
    "cell_text",
    "format_count",
    "format_seconds",
    "format_value",
    "frame_html",
    "frame_text",
]

_CELL_CHARS = 200


def format_seconds(seconds: float) -> str:
    """A duration: ``0.04 s``, ``12.3 s``, ``2 min 05 s``."""
    if seconds < 10:
        return f"{seconds:.2f} s"
    if seconds < 60:
        return f"{seconds:.1f} s"
    minutes, rest = divmod(round(seconds), 60)
    return f"{minutes} min {rest:02d} s"


def cell_text(value: Any, column: str = "") -> str:
    """One table cell as text: ``NULL`` if missing, else the shared format; text is cut at
    200 characters, a number never."""
    if is_missing(value):
        return "NULL"
    text = format_value(value, column)
    if len(text) <= _CELL_CHARS or is_number(value):
        return text
    return text[: _CELL_CHARS - 1] + "…"


# Inline layout that JupyterLab's sanitizer keeps when it strips the record's <style> (see
# record.INLINE): the box scrolls both ways, numbers right-aligned and text left-aligned
# (JupyterLab's own table style right-aligns every cell).
_WRAP = "max-width:100%;max-height:22em;overflow:auto;margin:4px 0"


def _align(numeric: bool) -> str:
    if numeric:
        return "class='pi-num' style='text-align:right'"
    return "class='' style='text-align:left'"


def _numeric(values: Sequence[Any]) -> bool:
    present = [v for v in values if not is_missing(v)]
    return bool(present) and all(is_number(v) for v in present)


def _columns(frame: pd.DataFrame, max_rows: int) -> tuple[list[str], list[list[Any]]]:
    """The column names and the values of the first ``max_rows`` rows, column by column: as
    the database returned them where the backend kept them, else the DataFrame's."""
    head = frame.head(max_rows)
    columns = [str(c) for c in head.columns]
    exact = rows_of(frame)[: len(head)]
    if exact and all(len(row) == len(columns) for row in exact):
        cols = [list(values) for values in zip(*exact, strict=True)]
        if len(exact) < len(head):  # rows past the kept ones: the DataFrame's values
            rest = head.iloc[len(exact) :]
            for i, col in enumerate(cols):
                col.extend(rest.iloc[:, i])
        return columns, cols
    return columns, [list(head.iloc[:, i]) for i in range(len(columns))]


def frame_html(frame: pd.DataFrame, *, max_rows: int = 10, total: int | None = None) -> str:
    """An escaped HTML table of the first ``max_rows`` rows, numbers formatted per column.

    The table sits in a ``pi-table-wrap`` box that scrolls both ways inside the card. A note
    under it says how many rows were left out of the preview.
    """
    columns, cols = _columns(frame, max_rows)
    shown = len(cols[0]) if cols else len(frame.head(max_rows))
    numeric = [_numeric(c) for c in cols]
    out = [
        f"<div class='pi-table-wrap' style='{_WRAP}'><table class='dataframe pi-table'><thead><tr>"
    ]
    for name, is_num in zip(columns, numeric, strict=True):
        out.append(f"<th {_align(is_num)}>{html.escape(name)}</th>")
    out.append("</tr></thead><tbody>")
    for r in range(shown):
        out.append("<tr>")
        for c in range(len(columns)):
            text = cell_text(cols[c][r], columns[c])
            out.append(f"<td {_align(numeric[c])}>{html.escape(text)}</td>")
        out.append("</tr>")
    out.append("</tbody></table></div>")
    rows = len(frame) if total is None else total
    if rows > shown:
        out.append(
            f"<div class='pi-table-note' style='opacity:0.75'>first {format_count(shown)} of "
            f"{format_count(rows)} rows</div>"
        )
    return "".join(out)


def frame_text(frame: pd.DataFrame, *, max_rows: int = 10, max_width: int = 40) -> str:
    """The first ``max_rows`` rows as aligned plain text, formatted as :func:`frame_html`
    (text cut at ``max_width``, a number never)."""
    columns, cols = _columns(frame, max_rows)
    shown = len(cols[0]) if cols else len(frame.head(max_rows))
    numeric = [_numeric(c) for c in cols]
    cells = [
        [cell_text(v, name) if is_number(v) else _clip(cell_text(v, name), max_width) for v in col]
        for col, name in zip(cols, columns, strict=True)
    ]
    widths = [
        max([len(_clip(n, max_width)), *map(len, c)]) for n, c in zip(columns, cells, strict=True)
    ]

    def line(texts: list[str]) -> str:
        return "  ".join(
            t.rjust(w) if num else t.ljust(w)
            for t, w, num in zip(texts, widths, numeric, strict=True)
        ).rstrip()

    rows = [line([_clip(n, max_width) for n in columns])]
    rows += [line([c[r] for c in cells]) for r in range(shown)]
    return "\n".join(rows)


def _clip(text: str, width: int) -> str:
    return text if len(text) <= width else text[: width - 1] + "…"
