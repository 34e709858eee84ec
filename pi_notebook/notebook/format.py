"""Numbers and tables for people: thousands separators, sensible precision, escaped HTML.

pandas' defaults show six decimals and ``1.23e+10``; a card shows ``12,300,000,000`` and as
many decimals as the column needs (at most :data:`MAX_DECIMALS`). Every value that came from
a database or a model is escaped before it becomes HTML.
"""

from __future__ import annotations

import html
import math
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    import pandas as pd

__all__ = ["MAX_DECIMALS", "format_count", "format_seconds", "format_value", "frame_html"]

MAX_DECIMALS = 4
_SIGNIFICANT = 6
_CELL_CHARS = 200


def format_count(n: int) -> str:
    """``1234567`` → ``1,234,567``."""
    return f"{n:,}"


def format_seconds(seconds: float) -> str:
    """A duration: ``0.04 s``, ``12.3 s``, ``2 min 05 s``."""
    if seconds < 10:
        return f"{seconds:.2f} s"
    if seconds < 60:
        return f"{seconds:.1f} s"
    minutes, rest = divmod(round(seconds), 60)
    return f"{minutes} min {rest:02d} s"


def _decimals(value: float) -> int:
    """Decimals needed to show ``value`` with about six significant digits, trailing zeros
    dropped (``19.99`` → 2, ``12345678.9`` → 0)."""
    if value == 0 or not math.isfinite(value):
        return 0
    wanted = max(0, min(MAX_DECIMALS, _SIGNIFICANT - 1 - math.floor(math.log10(abs(value)))))
    text = f"{value:.{wanted}f}".rstrip("0")
    return len(text) - text.index(".") - 1 if "." in text else 0


def _is_float(value: Any) -> bool:
    return isinstance(value, float) or type(value).__name__.startswith("float")


def _is_int(value: Any) -> bool:
    return (isinstance(value, int) and not isinstance(value, bool)) or type(
        value
    ).__name__.startswith(("int", "uint"))


def format_value(value: Any, decimals: int | None = None) -> str:
    """One value as text for a person; ``decimals`` fixes a float's decimals (a column's)."""
    if value is None or type(value).__name__ in ("NAType", "NaTType"):
        return "NULL"
    if _is_int(value):
        return f"{int(value):,}"
    if _is_float(value):
        number = float(value)
        if math.isnan(number):
            return "NULL"
        if math.isinf(number):
            return "∞" if number > 0 else "-∞"
        if number != 0 and abs(number) < 10**-MAX_DECIMALS:
            return f"{number:.3g}"
        places = _decimals(number) if decimals is None else decimals
        return f"{number:,.{places}f}"
    text = str(value)
    return text if len(text) <= _CELL_CHARS else text[: _CELL_CHARS - 1] + "…"


def _column_decimals(values: Sequence[Any]) -> int | None:
    floats = [float(v) for v in values if _is_float(v) and math.isfinite(float(v))]
    if not floats:
        return None
    return max(_decimals(v) for v in floats)


def _numeric(values: Sequence[Any]) -> bool:
    present = [v for v in values if v is not None and not (_is_float(v) and math.isnan(float(v)))]
    return bool(present) and all(_is_int(v) or _is_float(v) for v in present)


def frame_html(frame: pd.DataFrame, *, max_rows: int = 10, total: int | None = None) -> str:
    """An escaped HTML table of the first ``max_rows`` rows, numbers formatted per column.

    The table sits in a ``pi-table-wrap`` box that scrolls both ways inside the card. A note
    under it says how many rows were left out of the preview.
    """
    head = frame.head(max_rows)
    columns = [str(c) for c in head.columns]
    cols = [list(head.iloc[:, i]) for i in range(len(columns))]
    decimals = [_column_decimals(c) for c in cols]
    numeric = [_numeric(c) for c in cols]
    out = ["<div class='pi-table-wrap'><table class='dataframe pi-table'><thead><tr>"]
    for name, is_num in zip(columns, numeric, strict=True):
        out.append(f"<th class='{'pi-num' if is_num else ''}'>{html.escape(name)}</th>")
    out.append("</tr></thead><tbody>")
    for r in range(len(head)):
        out.append("<tr>")
        for c in range(len(columns)):
            text = format_value(cols[c][r], decimals[c])
            out.append(f"<td class='{'pi-num' if numeric[c] else ''}'>{html.escape(text)}</td>")
        out.append("</tr>")
    out.append("</tbody></table></div>")
    rows = len(frame) if total is None else total
    if rows > len(head):
        out.append(
            f"<div class='pi-table-note'>first {format_count(len(head))} of "
            f"{format_count(rows)} rows</div>"
        )
    return "".join(out)
