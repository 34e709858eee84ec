"""What a warehouse reached through its own DB-API-like client (not SQLAlchemy) adds to
:class:`~pi_notebook.sql.engines.direct.DirectBackend`, whose statement path it runs on
(Snowflake, BigQuery): a read through :func:`take_arrow` (a stream of Arrow batches kept to
the row cap and the byte bound), the client's ``close``, and the warehouse's words.

A warehouse has no transaction to try a write in and roll back here, so a write is measured
with the derived ``SELECT count(*)`` of :func:`~pi_notebook.sql.backend.derive.plan_write`
(run as a read), or the preview says plainly that its rows cannot be counted; an approval's
bounds are checked with the same count before the write runs. A stopped statement's error
is left as the worker says it.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import Any

import pandas as pd

from pi_notebook.sql.backend.fetch import Fetched, ProgressSteps, RunSettings, read_limit
from pi_notebook.sql.backend.sizes import arrow_rows_within
from pi_notebook.sql.engines.direct import DirectBackend

__all__ = ["WarehouseBackend", "take_arrow"]

_HEAD_ROWS = 50


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
    return Fetched(columns=[str(c) for c in frame.columns], row_count=seen, row_count_exact=exact,
                   truncated=seen > len(frame), size_capped=sized, head=_head(frame),
                   kept=len(frame), frame=frame)  # fmt: skip


def _head(frame: pd.DataFrame) -> list[tuple[Any, ...]]:
    """The first rows as tuples of plain values, missing ones as ``None`` (for the preview)."""
    values = frame.head(_HEAD_ROWS).to_numpy(dtype=object, copy=True)
    if values.size:
        values[pd.isna(values)] = None
    return list(map(tuple, values))


class WarehouseBackend(DirectBackend):
    """``query_database``'s backend for a warehouse reached through its own client (see the
    module docstring); a subclass names its ``backend`` and ``dialect`` and gives
    :class:`DirectBackend`'s hooks and ``close``."""

    no_transaction = "the warehouse has no transaction here to try the write and roll it back"
    no_rollback = None
    count_words = "SELECT count(*)"

    def close(self) -> None:
        """Close the client (blocking)."""
        raise NotImplementedError

    def dispose(self) -> None:
        """Stop the worker and close the client."""
        self._execution.close()
        self.close()
