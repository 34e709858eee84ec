"""Benchmark of ``query_database`` on DuckDB, which runs in a worker process under a memory
cap, against DuckDB in the benchmark's own process, as ratios in one run.

Fixed cost: ``SELECT 1`` through

- in-process: ``duckdb.connect(FILE).execute("SELECT 1").df()`` on a reused connection (the
  same statement, the same DataFrame, no process hop and no policy);
- hop: a do-nothing call through the worker's channel (the process hop alone), blocking this
  thread, and awaited on the event loop (the way a read's answer is waited for);
- governed in the kernel: the backend's ``run`` as it ran before the worker (the same code on
  an engine in this process), the baseline of the worker's own cost;
- governed: the backend's ``run`` (classify, capability check, the read-only transaction in
  the worker, the DataFrame and the model's preview sent back; no audit).

Large read: ``range, CAST(range AS VARCHAR)`` of ``range(N)`` (1M rows; ``--quick`` 200k) kept
whole (row cap N, no byte bound) against the same statement's ``.df()`` in-process.

Targets: the worker's fixed cost (governed over governed in the kernel) <= +250 us; the large
read <= 1.3x in-process. The timings
alternate ``--repeat`` times; each shows its best (the machine is shared).

    .venv/bin/python bench/bench_duckdb_worker.py [--quick] [--repeat N]
"""

from __future__ import annotations

import argparse
import asyncio
import tempfile
from pathlib import Path

import duckdb
from timing import per_call, per_call_async

from pi_notebook.sql.backend import DatabaseBackend, create_backend_engine
from pi_notebook.sql.backend.cancel import Canceller


async def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--quick", action="store_true")
    parser.add_argument("--repeat", type=int, default=7)
    args = parser.parse_args()
    calls = 100 if args.quick else 300
    rows = 200_000 if args.quick else 1_000_000
    big = f"SELECT range AS n, CAST(range AS VARCHAR) AS s FROM range({rows})"

    with tempfile.TemporaryDirectory() as tmp:
        worker_file, local_file = Path(tmp) / "w.duckdb", Path(tmp) / "l.duckdb"
        backend = DatabaseBackend(f"duckdb:///{worker_file}", row_cap=10_000)
        reader = DatabaseBackend(
            f"duckdb:///{Path(tmp) / 'r.duckdb'}", row_cap=rows, max_result_bytes=None
        )
        local = duckdb.connect(str(local_file))
        # The path before the worker: the same backend code on an engine in this process.
        kernel = DatabaseBackend(f"duckdb:///{Path(tmp) / 'k.duckdb'}", row_cap=10_000)
        kernel._process = None  # pyright: ignore[reportPrivateUsage]
        kernel.engine = create_backend_engine(f"duckdb:///{Path(tmp) / 'k.duckdb'}")
        await kernel.run("warm", "SELECT 1")
        await backend.run("warm", "SELECT 1")
        await reader.run("warm", "SELECT 1")
        process = backend._process  # pyright: ignore[reportPrivateUsage]
        assert process is not None
        ids = iter(range(10**9))

        async def governed() -> None:
            await backend.run(f"c{next(ids)}", "SELECT 1")

        async def in_kernel() -> None:
            await kernel.run(f"k{next(ids)}", "SELECT 1")

        def hop() -> None:
            process.offload(int, canceller=Canceller())  # int() in the worker: 0

        async def loop_hop() -> None:
            await process.call_async("offload", (int, ()), canceller=Canceller())

        def in_process() -> None:
            local.execute("SELECT 1").df()

        async def governed_big() -> None:
            out = await reader.run(f"b{next(ids)}", big)
            assert out.row_count == rows

        def local_big() -> None:
            assert len(local.execute(big).df()) == rows

        best: dict[str, float] = {}

        def keep(name: str, value: float) -> None:
            best[name] = min(best.get(name, float("inf")), value)

        for _ in range(args.repeat):
            keep("in-process", per_call(in_process, calls))
            keep("hop", per_call(hop, calls))
            keep("loop hop", await per_call_async(loop_hop, calls))
            keep("governed", await per_call_async(governed, calls))
            keep("in kernel", await per_call_async(in_kernel, calls))
            keep("local big", per_call(local_big, 1))
            keep("governed big", await per_call_async(governed_big, 1))
        backend.dispose()
        reader.dispose()
        kernel.dispose()
        local.close()

    us = {k: v * 1e6 for k, v in best.items()}
    print(f"SELECT 1, in-process DuckDB (.df()):  {us['in-process']:9.1f} us")
    print(f"worker hop alone (no statement):      {us['hop']:9.1f} us")
    print(f"the same hop awaited on the loop:     {us['loop hop']:9.1f} us")
    print(f"governed in the kernel (before):      {us['in kernel']:9.1f} us")
    print(
        f"governed through the worker:          {us['governed']:9.1f} us "
        f"(+{us['governed'] - us['in kernel']:.0f} us over the kernel, target <= +250 us; "
        f"+{us['governed'] - us['in-process']:.0f} us over in-process)"
    )
    ratio = best["governed big"] / best["local big"]
    print(
        f"{rows:,} rows into a DataFrame: governed {best['governed big'] * 1e3:.1f} ms, "
        f"in-process {best['local big'] * 1e3:.1f} ms, {ratio:.2f}x (target <= 1.3x)"
    )


if __name__ == "__main__":
    asyncio.run(main())
