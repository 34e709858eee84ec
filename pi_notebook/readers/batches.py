"""Keeping a stream of Arrow record batches within a read's limits.

A reader that streams (PostgreSQL's ``COPY``, DuckDB's record batch reader, the SQLite
process's pipe) keeps the first ``row_cap`` rows within ``max_bytes`` and stops at the
read's limit: the process holds the rows kept plus one batch.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from .protocol import ProgressSteps, ReadLimits

__all__ = ["Taken", "arrow_rows_within", "take_batches"]


@dataclass
class Taken:
    """What :func:`take_batches` kept of a stream of record batches."""

    batches: list[Any]
    seen: int  # rows read (all of them when ``exact``)
    exact: bool
    sized: bool  # the rows kept stopped at the size bound


def take_batches(
    reader: Any, limits: ReadLimits, *, stop: Callable[[], None] = lambda: None
) -> Taken:
    """Read ``reader``'s record batches, keeping the first ``row_cap`` rows within
    ``max_bytes``, and stop (calling ``stop``, which ends the producer) at the read's limit,
    at the size bound, or at ``count_limit`` when counting."""
    limit = limits.read_limit
    count_limit = limits.count_limit
    batches: list[Any] = []  # the first ``row_cap`` rows: counting keeps no more
    seen, kept, steps = 0, 0, ProgressSteps(limits.progress, limits.progress_every)
    cap, budget, sized = limits.row_cap, limits.max_bytes, False
    for batch in reader:
        if cap is None or kept < cap:
            taken = batch if cap is None else batch.slice(0, cap - kept)
            if budget is not None:  # the bytes kept so far stay within the bound
                rows = arrow_rows_within(taken, budget)
                if rows < taken.num_rows:
                    taken, sized, cap = taken.slice(0, rows), True, kept + rows
                budget -= taken.nbytes
            batches.append(taken)
            kept += taken.num_rows
        seen += batch.num_rows
        steps.update(seen)
        if (limit is not None and (seen >= limit or sized)) or (
            count_limit is not None and seen >= count_limit
        ):
            stop()
            break
    if limit is not None:
        return Taken(batches, min(seen, limit), seen < limit and not sized, sized)
    return Taken(batches, seen, count_limit is None or seen < count_limit, sized)


def arrow_rows_within(data: Any, budget: int) -> int:
    """How many of the first rows of an Arrow table or batch fit in ``budget`` bytes (Arrow's
    own ``nbytes`` of the slice: the values' buffers)."""
    if data.nbytes <= budget:
        return data.num_rows
    low, high = 0, data.num_rows  # data.slice(0, low) fits; data.slice(0, high) does not
    while high - low > 1:
        mid = (low + high) // 2
        if data.slice(0, mid).nbytes <= budget:
            low = mid
        else:
            high = mid
    return low
