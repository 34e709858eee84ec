"""A result read as a stream of DataFrames (one per block or page, :func:`take`) or of Arrow
tables (:func:`take_arrow`), kept to the row cap and the byte bound of a read, for the
backends with their own client."""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable
from typing import Any

import pandas as pd

from pi_notebook.sql.backend.fetch import Fetched, ProgressSteps, RunSettings, read_limit
from pi_notebook.sql.backend.sizes import arrow_rows_within

__all__ = ["Stream", "Whole", "take", "take_arrow"]

_HEAD_ROWS = 50


class Whole:
    """A result read at once, as a stream of one chunk."""

    def __init__(self, frame: pd.DataFrame) -> None:
        self.frame = frame

    def __iter__(self) -> Any:
        return iter([self.frame] if len(self.frame.columns) else [])

    def close(self) -> None:
        pass


class Stream:
    """DataFrames from ``chunks`` with ``close`` calling ``on_close`` (the client's own)."""

    def __init__(self, chunks: Iterable[pd.DataFrame], on_close: Callable[[], None]) -> None:
        self.chunks, self.on_close = chunks, on_close

    def __iter__(self) -> Any:
        return iter(self.chunks)

    def close(self) -> None:
        self.on_close()


def take(stream: Any, settings: RunSettings, progress: Callable[[int], None] | None) -> Fetched:
    """Keep the stream's first ``row_cap`` rows within ``max_result_bytes``; stop the stream at
    the read's limit or the size bound (``stream``: DataFrames, and ``close()``)."""
    limit = read_limit(settings)
    cap, budget = settings.row_cap, settings.max_result_bytes
    kept_frames: list[pd.DataFrame] = []
    seen = kept = 0
    sized = False
    columns: list[str] | None = None
    steps = ProgressSteps(progress, settings.progress_every)
    try:
        for chunk in stream:
            if columns is None:
                columns = [str(c) for c in chunk.columns]
            if kept < cap and not sized:
                taken = chunk if len(chunk) <= cap - kept else chunk.iloc[: cap - kept]
                if budget is not None:
                    taken, sized, used = _within(taken, budget)
                    budget -= used
                if sized:
                    cap = kept + len(taken)
                kept_frames.append(taken)
                kept += len(taken)
            seen += len(chunk)
            steps.update(seen)
            if (limit is not None and (seen >= limit or sized)) or seen >= settings.count_limit:
                break
    finally:
        stream.close()
    exact = (seen < limit and not sized) if limit is not None else seen < settings.count_limit
    seen = min(seen, limit) if limit is not None else seen
    frame = (
        pd.concat(kept_frames, ignore_index=True)
        if len(kept_frames) > 1
        else kept_frames[0]
        if kept_frames
        else pd.DataFrame(columns=columns or [])
    )
    index = frame.index
    if not (isinstance(index, pd.RangeIndex) and index.start == 0 and index.step == 1):
        frame = frame.reset_index(drop=True)
    return Fetched(
        columns=columns or [str(c) for c in frame.columns],
        row_count=seen,
        row_count_exact=exact,
        truncated=seen > len(frame),
        size_capped=sized,
        head=_head(frame),
        kept=len(frame),
        frame=frame,
    )


def take_arrow(
    batches: Iterable[Any],
    columns: Callable[[], list[str]],
    settings: RunSettings,
    progress: Callable[[int], None] | None,
) -> Fetched:
    """Keep the first ``row_cap`` rows of a stream of Arrow tables (or record batches) within
    ``max_result_bytes``, and stop reading the stream at the read's limit or the size bound.
    The DataFrame is built once, from the kept Arrow data; ``columns`` names the columns
    of an empty result (asked once the stream is read: a client may learn them only then)."""
    import pyarrow as pa

    limit = read_limit(settings)
    cap, budget = settings.row_cap, settings.max_result_bytes
    kept: list[Any] = []
    seen = kept_rows = 0
    sized = False
    steps = ProgressSteps(progress, settings.progress_every)
    for batch in batches:
        rows = batch.num_rows
        if kept_rows < cap and not sized:
            piece = batch.slice(0, min(rows, cap - kept_rows))
            if budget is not None:
                fits = arrow_rows_within(piece, budget)
                if fits < piece.num_rows:
                    sized, piece = True, piece.slice(0, fits)
                budget -= piece.nbytes
            kept.append(piece if isinstance(piece, pa.Table) else pa.Table.from_batches([piece]))
            kept_rows += piece.num_rows
        seen += rows
        steps.update(seen)
        if (limit is not None and (seen >= limit or sized)) or seen >= settings.count_limit:
            break
    exact = (seen < limit and not sized) if limit is not None else seen < settings.count_limit
    seen = min(seen, limit) if limit is not None else seen
    frame = pa.concat_tables(kept).to_pandas() if kept else pd.DataFrame(columns=columns())
    return Fetched(
        columns=[str(c) for c in frame.columns],
        row_count=seen,
        row_count_exact=exact,
        truncated=seen > len(frame),
        size_capped=sized,
        head=_head(frame),
        kept=len(frame),
        frame=frame,
    )


def _head(frame: pd.DataFrame) -> list[tuple[Any, ...]]:
    """The first rows as tuples of plain values, missing ones as ``None`` (for the preview)."""
    values = frame.head(_HEAD_ROWS).to_numpy(dtype=object, copy=True)
    if values.size:
        values[pd.isna(values)] = None
    return list(map(tuple, values))


def _within(frame: pd.DataFrame, budget: int) -> tuple[pd.DataFrame, bool, int]:
    """The leading rows of ``frame`` whose values fit in ``budget`` bytes, whether any were
    left out, and the bytes they hold."""
    total = int(frame.memory_usage(index=False, deep=True).sum())
    if total <= budget:
        return frame, False, total
    per_row = total / max(1, len(frame))
    rows = max(0, math.floor(budget / per_row) if per_row else len(frame))
    return frame.iloc[:rows], True, int(per_row * rows)
