"""How many result DataFrames a session keeps in memory.

Every tool result's ``details`` stays in ``session.messages`` for the whole session, and a
query's ``details["dataframe"]`` can be large: 60 turns of large results held 160 MB.
:class:`ResultRetention` keeps the DataFrames of the ``keep`` most recent tool results
(default :data:`DEFAULT_KEEP`); in older results each DataFrame in ``details`` is replaced by
:data:`DROPPED_NOTE` (and ``details["dataframe_dropped"]`` is ``True``). The ``details`` dict
is changed in place, so the DataFrame is released wherever that dict is referenced (the
``tool_execution_end`` event, a notebook card's details). What the model saw is untouched:
DataFrames never reach it.

Set ``session.result_retention.keep`` to change the bound (``None``: keep every DataFrame);
a lower bound applies at once. The environment variable ``PI_NOTEBOOK_KEEP_RESULTS`` sets
the default.
"""

from __future__ import annotations

import logging
import os
import sys
from collections import deque
from typing import Any

__all__ = ["DEFAULT_KEEP", "DROPPED_NOTE", "ENV_KEEP", "ResultRetention"]

DEFAULT_KEEP = 20
ENV_KEEP = "PI_NOTEBOOK_KEEP_RESULTS"
DROPPED_NOTE = (
    "DataFrame dropped to bound memory; re-run the call, or use %pi_result on one of the "
    "recent results."
)

log = logging.getLogger(__name__)


def _default_keep() -> int | None:
    raw = os.environ.get(ENV_KEEP)
    if raw is None or not raw.strip():
        return DEFAULT_KEEP
    if raw.strip().lower() in ("all", "none", "unlimited"):
        return None
    try:
        return max(0, int(raw))
    except ValueError:
        log.warning(
            "%s=%r is not a number; keeping %d result DataFrames", ENV_KEEP, raw, DEFAULT_KEEP
        )
        return DEFAULT_KEEP


class ResultRetention:
    """Bounds the result DataFrames held in a session's tool-result messages.

    Args:
        keep: how many of the most recent results keep their DataFrames (``None``: all);
            default ``PI_NOTEBOOK_KEEP_RESULTS``, else :data:`DEFAULT_KEEP`.
    """

    def __init__(self, keep: int | str | None = "env") -> None:
        self._keep: int | None = _default_keep() if keep == "env" else _checked(keep)
        self._holding: deque[Any] = deque()

    @property
    def keep(self) -> int | None:
        return self._keep

    @keep.setter
    def keep(self, value: int | None) -> None:
        self._keep = _checked(value)
        self._trim()

    @property
    def holding(self) -> int:
        """How many results currently keep their DataFrames."""
        return len(self._holding)

    def on_event(self, event: Any) -> None:
        """Agent listener: track each tool-result message that carries a DataFrame."""
        if getattr(event, "type", None) != "message_end":
            return
        message = getattr(event, "message", None)
        if getattr(message, "role", None) != "toolResult" or not _frames(message):
            return
        self._holding.append(message)
        self._trim()

    def _trim(self) -> None:
        if self._keep is None:
            return
        while len(self._holding) > self._keep:
            _drop(self._holding.popleft())


def _checked(value: Any) -> int | None:
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        raise ValueError(f"keep must be a non-negative integer or None, not {value!r}")
    return value


def _frames(message: Any) -> list[str]:
    details = getattr(message, "details", None)
    pd = sys.modules.get("pandas")  # not imported: no DataFrame anywhere (and none imported)
    if pd is None or not isinstance(details, dict) or not details:
        return []
    frame = pd.DataFrame
    return [k for k, v in details.items() if isinstance(v, frame)]  # pyright: ignore[reportUnknownVariableType]


def _drop(message: Any) -> None:
    details = message.details
    for key in _frames(message):
        details[key] = DROPPED_NOTE
    details["dataframe_dropped"] = True
