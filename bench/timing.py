"""Mean seconds per call of a function, for the engine benchmarks (``bench_chdb.py``,
``bench_duckdb_worker.py``, ``bench_spark.py``): each side of a ratio is timed the same way,
after a garbage collection, over the same number of calls."""

from __future__ import annotations

import gc
import time
from collections.abc import Awaitable, Callable
from typing import Any

__all__ = ["per_call", "per_call_async"]


def per_call(fn: Callable[[], Any], calls: int) -> float:
    """Mean seconds per call of ``fn()`` over ``calls`` calls."""
    gc.collect()
    started = time.perf_counter()
    for _ in range(calls):
        fn()
    return (time.perf_counter() - started) / calls


async def per_call_async(fn: Callable[[], Awaitable[Any]], calls: int) -> float:
    """Mean seconds per call of ``await fn()`` over ``calls`` calls."""
    gc.collect()
    started = time.perf_counter()
    for _ in range(calls):
        await fn()
    return (time.perf_counter() - started) / calls
