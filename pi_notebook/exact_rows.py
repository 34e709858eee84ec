"""The first rows of a result as the database returned them, kept beside its DataFrame.

A result's DataFrame holds what pandas makes of the rows: a ``numeric`` becomes a float
(``70131.10`` is ``70131.1``, and past 15 digits a float drops some), as
``from_records(coerce_float=True)`` and ``read_sql`` make it. The model's preview is written
from the rows themselves. So that the notebook's card and record write each cell from the
same value as the model's preview, the backend remembers those rows for the DataFrame it
returns (:func:`remember`), and the table writer asks for them (:func:`rows_of`).

The rows are held for as long as the DataFrame lives and no longer (a weak reference: when
the session's retention drops a result's DataFrame, its rows go with it), and never in a
tool result's ``details``, which the audit records (it records a DataFrame's shape, never its
values).
"""

from __future__ import annotations

import weakref
from collections.abc import Sequence
from typing import Any

__all__ = ["remember", "rows_of"]

_ROWS: dict[int, tuple[weakref.ref[Any], Sequence[tuple[Any, ...]]]] = {}


def remember(frame: Any, rows: Sequence[tuple[Any, ...]]) -> None:
    """Keep ``rows`` (the first rows of ``frame``, in order, as the database returned them)
    for as long as ``frame`` lives. Nothing is kept for a frame that takes no weak
    reference, or when ``rows`` is empty."""
    if not rows:
        return
    key = id(frame)
    try:
        ref = weakref.ref(frame, lambda dead: _forget(key, dead))
    except TypeError:
        return
    _ROWS[key] = (ref, rows)


def _forget(key: int, dead: weakref.ref[Any]) -> None:
    found = _ROWS.get(key)
    if found is not None and found[0] is dead:
        del _ROWS[key]


def rows_of(frame: Any) -> Sequence[tuple[Any, ...]]:
    """The rows remembered for ``frame`` (the first ones, at most as many as it has), or
    none."""
    found = _ROWS.get(id(frame))
    if found is None or found[0]() is not frame:
        return ()
    return found[1]
