"""Benchmark of ``query_database`` on chDB against chDB's own client, as ratios in one run.

Fixed cost: ``SELECT 1`` through

- client: a reused ``chdb.session.Session``, ``query("SELECT 1", "DataFrame")``, in the
  benchmark's own process;
- stream: the same through ``send_query`` (the stream a read of a table takes; a
  ``SELECT`` of no table runs as one query);
- hop: a do-nothing call to the backend's worker process and back (chDB runs there);
- backend: the governed backend's ``run`` (classify, capability check, readonly=1 and the
  read's bounds, the DataFrame and the model's preview; no audit);
- session: an ``AgentSession`` with the database extension and ``audit=False``.

Large read: ``number, toString(number)`` of ``numbers(N)`` (1M rows; ``--quick`` 200k) kept
whole (row cap N, no byte bound) against the client's Arrow read (``ArrowTable`` then
``to_pandas``) and its native DataFrame.

Targets: fixed cost <= +300 us over the reused session; the large read <= 1.2x the
client's Arrow read. The timings alternate ``--repeat`` times; each shows its min and median
(the machine is shared).

    .venv/bin/python bench/bench_chdb.py [--quick] [--repeat N]
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
from typing import Any

from chdb import session as chdb_session
from timing import per_call, per_call_async

from pi_notebook import create_agent_session
from pi_notebook.database import database_extension
from pi_notebook.sql.engines import create_backend
from pi_notebook.testing import ScriptedModel, text, tool_call


async def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--quick", action="store_true")
    parser.add_argument("--repeat", type=int, default=7)
    args = parser.parse_args()
    calls = 100 if args.quick else 300
    rows = 200_000 if args.quick else 1_000_000

    backend = create_backend("chdb://", row_cap=10_000)
    await backend.run("warm", "SELECT 1")
    client = chdb_session.Session()  # the same in-process database as the backend's
    ids = iter(range(10**9))

    async def governed() -> None:
        await backend.run(f"c{next(ids)}", "SELECT 1")

    steps: list[Any] = []
    for n in range(args.repeat * calls + 1):
        steps += [[tool_call("query_database", {"sql": "SELECT 1"}, id=f"s{n}")], text("ok")]
    model = ScriptedModel(steps)
    session = create_agent_session(
        model=model, audit=False, extensions=[database_extension("chdb://")]
    )
    await session.prompt("warm")

    async def through_session() -> None:
        await session.prompt("go")

    def streamed() -> None:
        stream = client.send_query("SELECT 1", "DataFrame")
        list(stream)
        stream.close()

    from pi_notebook.sql.backend.cancel import Canceller

    process = backend._process  # pyright: ignore[reportPrivateUsage]
    assert process is not None

    async def hop() -> None:  # a do-nothing call to the worker process and back
        await process.call_async("offload", (int, ()), canceller=Canceller())

    fixed: dict[str, list[float]] = {
        "client": [],
        "stream": [],
        "hop": [],
        "backend": [],
        "session": [],
    }
    for _ in range(args.repeat):
        fixed["client"].append(per_call(lambda: client.query("SELECT 1", "DataFrame"), calls))
        fixed["stream"].append(per_call(streamed, calls))
        fixed["hop"].append(await per_call_async(hop, calls))
        fixed["backend"].append(await per_call_async(governed, calls))
        fixed["session"].append(await per_call_async(through_session, calls // 10))
    print(f"SELECT 1 ({args.repeat} alternating runs x {calls} calls; min / median):")
    for name, values in fixed.items():
        low, mid = min(values), statistics.median(values)
        base_low, base_mid = min(fixed["client"]), statistics.median(fixed["client"])
        print(
            f"  {name:8} {low * 1e6:8.0f} / {mid * 1e6:6.0f} us  "
            f"({(low - base_low) * 1e6:+.0f} / {(mid - base_mid) * 1e6:+.0f} us over the client)"
        )
    await session.close()
    backend.dispose()

    big = create_backend("chdb://", row_cap=rows, max_result_bytes=None)
    sql = f"SELECT number, toString(number) AS s FROM numbers({rows})"
    await big.run("warm", sql)
    large: dict[str, list[float]] = {"arrow": [], "dataframe": [], "governed": []}
    for _ in range(max(3, args.repeat // 2)):
        large["arrow"].append(per_call(lambda: client.query(sql, "ArrowTable").to_pandas(), 1))
        large["dataframe"].append(per_call(lambda: client.query(sql, "DataFrame"), 1))
        large["governed"].append(await per_call_async(lambda: big.run(f"b{next(ids)}", sql), 1))
    print(f"{rows:,}-row read (min / median):")
    arrow, arrow_mid = min(large["arrow"]), statistics.median(large["arrow"])
    for name, values in large.items():
        low, mid = min(values), statistics.median(values)
        print(
            f"  {name:9} {low * 1e3:8.1f} / {mid * 1e3:6.1f} ms  "
            f"({low / arrow:.2f}x / {mid / arrow_mid:.2f}x the Arrow read)"
        )
    client.close()
    big.dispose()


if __name__ == "__main__":
    asyncio.run(main())
