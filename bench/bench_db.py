"""Benchmark of ``query_database`` against bare SQLAlchemy and pandas, in one run, as ratios.

1. Fixed overhead: the tool's ``execute`` for ``SELECT 1`` (classification, canonical hash,
   worker thread, read-only transaction, result shaping included) against a bare SQLAlchemy
   ``exec_driver_sql`` on a reused connection. Target: under 1 ms added.
2. A 100,000-row read into a DataFrame against ``pandas.read_sql`` on the same engine, with peak
   memory (tracemalloc) for both. Target: at most 1.2x the time.

Run: ``.venv/bin/python bench/bench_db.py [--url URL]`` (default: a temporary SQLite file).
"""

from __future__ import annotations

import argparse
import asyncio
import importlib.util
import statistics
import tempfile
import time
import tracemalloc
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import pandas as pd
import sqlalchemy as sa

from pi_notebook.ai.abort import AbortController

ROWS = 100_000
EXTENSION = Path(__file__).resolve().parents[1] / "extensions" / "database.py"


class _CapturePI:
    """Just enough of ExtensionAPI to take the tool out of the factory."""

    audit = None

    def __init__(self) -> None:
        self.tool: Any = None

    def register_tool(self, definition: Any) -> None:
        self.tool = definition

    def on(self, _event: str, _handler: Any) -> Callable[[], None]:
        return lambda: None


def _load_tool(url: str, row_cap: int) -> tuple[Any, Any]:
    spec = importlib.util.spec_from_file_location("bench_database_ext", EXTENSION)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    ext = module.database_extension(url, row_cap=row_cap)
    pi = _CapturePI()
    ext(pi)
    return pi.tool, ext


def _fill(url: str) -> None:
    engine = sa.create_engine(url)
    with engine.begin() as conn:
        conn.exec_driver_sql("DROP TABLE IF EXISTS bench_rows")
        conn.exec_driver_sql(
            "CREATE TABLE bench_rows (id INTEGER PRIMARY KEY, name VARCHAR(40), "
            "amount DOUBLE PRECISION, day VARCHAR(10))"
        )
        conn.execute(
            sa.text("INSERT INTO bench_rows VALUES (:id, :name, :amount, :day)"),
            [{"id": i, "name": f"customer {i % 977}", "amount": i * 0.37 % 1000,
              "day": f"2024-{1 + i % 12:02d}-{1 + i % 28:02d}"} for i in range(ROWS)],
        )  # fmt: skip
    engine.dispose()


async def _timeit(fn: Callable[[], Awaitable[Any]], n: int) -> float:
    times = []
    for _ in range(n):
        start = time.perf_counter()
        await fn()
        times.append(time.perf_counter() - start)
    return statistics.median(times)


async def _peak(fn: Callable[[], Awaitable[Any]]) -> float:
    tracemalloc.start()
    try:
        await fn()
        return tracemalloc.get_traced_memory()[1] / 2**20
    finally:
        tracemalloc.stop()


async def main(url: str, n_small: int) -> None:
    _fill(url)
    engine = sa.create_engine(url)
    tool, ext = _load_tool(url, row_cap=ROWS)
    params = tool.parameters
    signal = AbortController().signal

    async def tool_call(sql: str) -> Any:
        return await tool.execute("bench", params(sql=sql), signal, lambda _u: None, None)

    with engine.connect() as conn:

        async def bare_select1() -> Any:
            return conn.exec_driver_sql("SELECT 1").fetchall()

        for _ in range(50):  # warm both paths (pools, imports, parser caches)
            await bare_select1()
            await tool_call("SELECT 1")
        bare = await _timeit(bare_select1, n_small)
    ours = await _timeit(lambda: tool_call("SELECT 1"), n_small)

    big_sql = "SELECT id, name, amount, day FROM bench_rows"

    async def pandas_read() -> Any:
        return pd.read_sql(big_sql, engine)

    async def ours_read() -> Any:
        result = await tool_call(big_sql)
        assert len(result.details["dataframe"]) == ROWS
        return result

    await pandas_read()
    await ours_read()
    t_pandas = await _timeit(pandas_read, 5)
    t_ours = await _timeit(ours_read, 5)
    m_pandas = await _peak(pandas_read)
    m_ours = await _peak(ours_read)
    engine.dispose()
    if ext.backend is not None:
        ext.backend.dispose()

    print(
        f"engine: {sa.make_url(url).get_backend_name()}   (medians; SELECT 1 x{n_small}, 100k-row read x5)"
    )
    print(f"SELECT 1   bare SQLAlchemy: {bare * 1e6:8.1f} us   query_database: {ours * 1e6:8.1f} us   "
          f"added: {(ours - bare) * 1e6:8.1f} us   ratio: {ours / bare:6.1f}x")  # fmt: skip
    print(f"100k rows  pandas.read_sql: {t_pandas:8.3f} s    query_database: {t_ours:8.3f} s    "
          f"ratio: {t_ours / t_pandas:4.2f}x")  # fmt: skip
    print(f"peak mem   pandas.read_sql: {m_pandas:8.1f} MiB  query_database: {m_ours:8.1f} MiB  "
          f"ratio: {m_ours / m_pandas:4.2f}x")  # fmt: skip


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--url", help="SQLAlchemy URL (default: a temporary SQLite file)")
    parser.add_argument("-n", type=int, default=2000, help="SELECT 1 repetitions")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        asyncio.run(main(args.url or f"sqlite:///{Path(tmp) / 'bench.sqlite'}", args.n))
