"""The result DataFrames a call's ``details`` carry, and their release.

A tool result's ``details["dataframe"]`` is its result table; releasing it (to bound memory)
replaces each DataFrame by the session retention's note and sets
``details["dataframe_dropped"]``, as the session itself does.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

__all__ = ["drop_all_but_latest", "drop_result_frames", "result_dataframe"]


def result_dataframe(details: Any) -> Any:
    """The result DataFrame in a tool result's ``details`` (``details["dataframe"]``), if any."""
    import pandas as pd  # here, not at import time: importing the notebook layer stays light

    frame = details.get("dataframe") if isinstance(details, dict) else None
    return frame if isinstance(frame, pd.DataFrame) else None


def drop_result_frames(details: Any) -> None:
    """Release the DataFrames in a result's ``details`` (in place), as the session's retention
    does: each becomes its note and ``details["dataframe_dropped"]`` is set."""
    import pandas as pd

    from ..session.retention import DROPPED_NOTE

    if not isinstance(details, dict):
        return
    for key, value in list(details.items()):  # pyright: ignore[reportUnknownVariableType]
        if isinstance(value, pd.DataFrame):
            details[key] = DROPPED_NOTE
    details["dataframe_dropped"] = True


def drop_all_but_latest(details_newest_first: Iterable[Any], keep: int) -> int:
    """Keep the result DataFrames of the latest ``keep`` calls (``details`` of each call,
    newest first) and drop the others' (:func:`drop_result_frames`); returns how many calls'
    were dropped."""
    kept = dropped = 0
    for details in details_newest_first:
        if result_dataframe(details) is None:
            continue
        if kept < keep:
            kept += 1
        else:
            drop_result_frames(details)
            dropped += 1
    return dropped
