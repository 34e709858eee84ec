"""What one statement's run is given and gives back: its limits (:class:`RunSettings`), its
output before it becomes an outcome (:class:`Fetched`), and the limits a reader of
:mod:`pi_notebook.readers` is given for it (:func:`read_limits`). Every read path (the
driver's rows in :mod:`.fetch`, Arrow in :mod:`.arrow`, the engines' own clients) builds on
these, so they sit below all of them."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import pandas as pd

from pi_notebook.readers.protocol import QUERY_TEXT, ProgressSteps, ReadLimits
from pi_notebook.sql.backend.frames import FrameBuilder
from pi_notebook.sql.backend.sizes import DEFAULT_MAX_RESULT_BYTES

__all__ = [
    "CURSOR_TEXT",
    "Fetched",
    "ProgressSteps",
    "RunSettings",
    "read_limit",
    "read_limits",
]

CURSOR_TEXT = QUERY_TEXT
"""Statement texts PostgreSQL can run as a cursor (``DECLARE``) or ``COPY``: a query."""


@dataclass(frozen=True, kw_only=True)
class RunSettings:
    """Limits for one run.

    Attributes:
        row_cap: most rows kept in the DataFrame.
        count_limit: most rows counted when the exact count is requested.
        statement_timeout_s: the statement timeout.
        progress_every: rows between two progress reports.
        count_rows: count every row (up to ``count_limit``) instead of stopping at the cap.
        arrow: reads may take the Arrow path (see :mod:`.arrow`).
        max_result_bytes: most bytes of values kept (see :mod:`.sizes`); ``None``: no bound.
        role: PostgreSQL: the role the run's transaction sets (see :mod:`.roles`).
    """

    row_cap: int
    count_limit: int
    statement_timeout_s: float
    progress_every: int
    count_rows: bool = False
    arrow: bool = False
    max_result_bytes: int | None = DEFAULT_MAX_RESULT_BYTES
    role: str | None = None


def read_limit(settings: RunSettings) -> int | None:
    """Rows a read fetches at most: ``row_cap + 1``, or ``None`` when counting them all."""
    return None if settings.count_rows else settings.row_cap + 1


def read_limits(settings: RunSettings, progress: Callable[[int], None] | None) -> ReadLimits:
    """The :class:`~pi_notebook.readers.protocol.ReadLimits` of a run under ``settings``."""
    return ReadLimits(
        row_cap=settings.row_cap,
        count_rows=settings.count_rows,
        count_limit=settings.count_limit,
        max_bytes=settings.max_result_bytes,
        timeout_s=settings.statement_timeout_s,
        progress=progress,
        progress_every=settings.progress_every,
    )


@dataclass(kw_only=True)
class Fetched:
    """Output of one statement, before it becomes a :class:`~.results.QueryOutcome`.

    Attributes:
        columns: column names (empty without a result set).
        row_count: rows seen (a lower bound when ``row_count_exact`` is false), or the rows
            a statement without a result set affected.
        row_count_exact: False when fetching stopped before the end of the result.
        truncated: the DataFrame holds fewer rows than the statement returned.
        size_capped: the read stopped keeping rows at ``max_result_bytes``, not the row cap.
        has_rows: the statement returned a result set.
        head: the first rows as tuples (what the model's preview is rendered from).
        kept: the rows the DataFrame keeps, when known before it is built.
        frame: the DataFrame, once :meth:`build` ran (in the worker, after the transaction).
        preview: the model's text, once rendered (in the worker too).
    """

    columns: list[str]
    row_count: int
    row_count_exact: bool = True
    truncated: bool = False
    size_capped: bool = False
    has_rows: bool = True
    head: list[tuple[Any, ...]] = field(default_factory=list[tuple[Any, ...]])
    kept: int | None = None
    builder: FrameBuilder | None = None
    frame: pd.DataFrame | None = None
    preview: str | None = None

    def rows_kept(self) -> int:
        """The rows the DataFrame keeps, without building it."""
        if self.kept is not None:
            return self.kept
        if self.frame is not None:
            return len(self.frame)
        return self.builder.count if self.builder is not None else 0

    def build(self) -> pd.DataFrame:
        """Build (once) and return the DataFrame."""
        if self.frame is None:
            builder, self.builder = self.builder, None
            self.frame = builder.build() if builder is not None else pd.DataFrame()
        return self.frame
