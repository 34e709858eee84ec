"""Benchmark of ``query_database`` on Spark Connect against pyspark's own client, as ratios
in one run.

Large read: ``id, cast(id AS string)`` of ``range(N)`` (1M rows; ``--quick`` 200k) kept
whole (row cap N, no byte bound), through the governed backend's ``run`` (classify,
capability check, the tagged job under ``limit(cap + 1)``, Arrow into the DataFrame, the
model's preview; no audit) against the client's own ``spark.sql(sql).toArrow()`` on the same
statement (and that, plus its Arrow table's ``to_pandas``, since the tool's result is a
DataFrame). Fixed cost: ``SELECT 1`` the same two ways. ``--table`` adds the same columns
read from a parquet table, where the limit is a ``CollectLimit`` on the server (over
``range`` the optimizer drops a limit the statement cannot reach).

Target: the large read <= 1.2x the client's ``toArrow()``. The machine is shared, so each
side is timed fairly: both warm up first (the server's JIT), then ``--repeat`` rounds
alternate which side goes first (the server's garbage from one read lands on the next), each
after a garbage collection (``timing.py``). Every round's ratio is shown, with the median of
the rounds and the best against the best, for the wall time and for the CPU time both
processes spent (this one and the local server's JVM: the CPU a side costs, which the
machine's other load barely moves; with ``--url`` this process's only). The round trips of
each side (gRPC calls to the server) are counted once, the ``EXPLAIN COST`` estimate's too;
the load average is shown.

Without ``--url`` a local Spark Connect server (``local[2]``, pyspark's own, Java 17) is
started for the run on a free port and stopped afterwards.

    .venv/bin/python bench/bench_spark.py [--quick] [--table] [--repeat N] [--url sc://HOST:PORT]
"""

from __future__ import annotations

import argparse
import asyncio
import collections
import os
import socket
import statistics
import subprocess
import sys
import tempfile
import time
import warnings
from collections.abc import Awaitable, Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from timing import per_call, per_call_async

from pi_notebook.sql.engines import SparkBackend, create_backend, estimate_read


@contextmanager
def local_server() -> Iterator[tuple[str, int]]:
    """A local Spark Connect server for the run: its ``sc://127.0.0.1:PORT`` and process id
    (``spark-submit`` execs the JVM)."""
    import pyspark

    home = Path(pyspark.__file__).parent
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = int(sock.getsockname()[1])
    with tempfile.TemporaryDirectory() as root:
        log = Path(root) / "server.log"
        env = dict(
            os.environ,
            SPARK_HOME=str(home),
            PATH=f"{Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}",
        )
        command = [
            str(home / "bin" / "spark-submit"),
            "--class",
            "org.apache.spark.sql.connect.service.SparkConnectServer",
            "--master",
            "local[2]",
            "--driver-memory",
            "2g",
            "--conf",
            f"spark.connect.grpc.binding.port={port}",
            "--conf",
            "spark.connect.grpc.binding.address=127.0.0.1",
            "--conf",
            "spark.ui.enabled=false",
            "--conf",
            f"spark.sql.warehouse.dir={root}/warehouse",
        ]
        with log.open("wb") as out:
            server = subprocess.Popen(
                command, cwd=root, env=env, stdout=out, stderr=subprocess.STDOUT
            )
        try:
            while "Spark Connect server started at" not in log.read_text(errors="replace"):
                if server.poll() is not None:
                    raise RuntimeError(log.read_text(errors="replace")[-2000:])
                time.sleep(0.5)
            yield f"sc://127.0.0.1:{port}", server.pid
        finally:
            server.terminate()
            server.wait(30)


class RoundTrips:
    """Counts the gRPC calls a Spark Connect client makes (``ExecutePlan``, ``AnalyzePlan``,
    ``Config``; ``ReleaseExecute`` is left out: it is sent in the background as results are
    read, by both sides alike)."""

    def __init__(self, client: Any) -> None:
        self.calls: collections.Counter[str] = collections.Counter()
        stub, calls = client._stub, self.calls

        class Counting:
            def __getattr__(self, name: str) -> Any:
                method = getattr(stub, name)

                def counted(*args: Any, **kwargs: Any) -> Any:
                    if name != "ReleaseExecute":
                        calls[name] += 1
                    return method(*args, **kwargs)

                return counted

        client._stub = Counting()

    def of(self, fn: Callable[[], Any]) -> str:
        self.calls.clear()
        fn()
        return ", ".join(f"{n} {name}" for name, n in sorted(self.calls.items())) or "none"

    async def of_async(self, fn: Callable[[], Awaitable[Any]]) -> str:
        self.calls.clear()
        await fn()
        return ", ".join(f"{n} {name}" for name, n in sorted(self.calls.items())) or "none"


def load() -> str:
    return "load average " + ", ".join(f"{x:.2f}" for x in os.getloadavg())


class Clock:
    """Wall time and CPU time of a call: the CPU of this process (the client, every thread)
    and of the local server's JVM. The CPU is what each side costs whatever else runs on the
    machine; the wall time is what a person waits."""

    def __init__(self, server_pid: int | None) -> None:
        self._stat = Path(f"/proc/{server_pid}/stat") if server_pid is not None else None
        self._tick = os.sysconf("SC_CLK_TCK")
        self.counts_server = self._stat is not None

    def cpu(self) -> float:
        used = time.process_time()
        if self._stat is not None and self._stat.exists():
            fields = self._stat.read_text().rsplit(")", 1)[1].split()
            used += (int(fields[11]) + int(fields[12])) / self._tick  # utime + stime
        return used

    def time(self, fn: Callable[[], Any], calls: int) -> tuple[float, float]:
        started = self.cpu()
        wall = per_call(fn, calls)
        return wall, (self.cpu() - started) / calls

    async def time_async(self, fn: Callable[[], Awaitable[Any]], calls: int) -> tuple[float, float]:
        started = self.cpu()
        wall = await per_call_async(fn, calls)
        return wall, (self.cpu() - started) / calls


Timed = tuple[list[tuple[float, float]], list[tuple[float, float]]]


async def alternate(
    clock: Clock,
    client: Callable[[], Any],
    governed: Callable[[], Awaitable[Any]],
    repeat: int,
    calls: int,
) -> Timed:
    """``repeat`` rounds of both sides, the first side alternating: (wall, CPU) seconds per
    call of each."""
    timed: Timed = ([], [])
    for index in range(repeat):
        if index % 2 == 0:
            timed[0].append(clock.time(client, calls))
            timed[1].append(await clock.time_async(governed, calls))
        else:
            timed[1].append(await clock.time_async(governed, calls))
            timed[0].append(clock.time(client, calls))
    return timed


def report(title: str, timed: Timed, server_cpu: bool) -> None:
    print(f"{title}:")
    for name, values in zip(("client toArrow()", "governed"), timed, strict=True):
        walls = [w for w, _ in values]
        print(
            f"  {name:17} wall median {statistics.median(walls) * 1e3:8.1f} ms, best "
            f"{min(walls) * 1e3:8.1f} ms; CPU median "
            f"{statistics.median(c for _, c in values) * 1e3:8.1f} ms"
        )
    for i, what in ((0, "wall"), (1, "CPU" + (" (client + server)" if server_cpu else ""))):
        ratios = [g[i] / c[i] for c, g in zip(*timed, strict=True)]
        best = min(g[i] for g in timed[1]) / min(c[i] for c in timed[0])
        print(
            f"  {what} ratio per round: {' '.join(f'{r:.2f}' for r in ratios)}; median "
            f"{statistics.median(ratios):.2f}x, best/best {best:.2f}x"
        )


async def large_read(
    clock: Clock, client: Any, big: Any, sql: str, title: str, rows: int, repeat: int
) -> None:
    ids = iter(range(10**9))
    warm = await big.run("warm", sql)
    assert len(warm.dataframe) == rows and warm.row_count_exact  # the whole result, kept
    assert client.sql(sql).toArrow().num_rows == rows
    for _ in range(2):  # both sides warm
        per_call(lambda: client.sql(sql).toArrow(), 1)
        await per_call_async(lambda: big.run(f"b{next(ids)}", sql), 1)
    large = await alternate(
        clock, lambda: client.sql(sql).toArrow(), lambda: big.run(f"b{next(ids)}", sql), repeat, 1
    )
    report(f"{title} ({repeat} rounds)", large, clock.counts_server)
    arrow = client.sql(sql).toArrow()
    convert = min(per_call(arrow.to_pandas, 1) for _ in range(repeat))
    print(f"  the client's to_pandas of that Arrow table: {convert * 1e3:.1f} ms")


async def run(
    url: str, server_pid: int | None, rows: int, repeat: int, calls: int, table: bool
) -> None:
    print(load())
    clock = Clock(server_pid)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        from pyspark.sql.connect.session import SparkSession

        client = SparkSession.builder.remote(url).create()
    client_trips = RoundTrips(client.client)
    ids = iter(range(10**9))

    small = create_backend(url, row_cap=10_000)
    await small.run("warm", "SELECT 1")
    assert isinstance(small, SparkBackend)
    governed_trips = RoundTrips(small._cluster.session().client)
    one = "SELECT 1"
    for _ in range(3):  # both sides warm
        per_call(lambda: client.sql(one).toArrow(), calls)
        await per_call_async(lambda: small.run(f"s{next(ids)}", one), calls)
    print("Round trips (gRPC calls) of SELECT 1:")
    print(f"  client toArrow()       {client_trips.of(lambda: client.sql(one).toArrow())}")
    print(
        "  governed               "
        + await governed_trips.of_async(lambda: small.run(f"s{next(ids)}", one))
    )
    print(
        "  its EXPLAIN COST       "
        + await governed_trips.of_async(lambda: estimate_read(small, one))
    )
    fixed = await alternate(
        clock,
        lambda: client.sql(one).toArrow(),
        lambda: small.run(f"s{next(ids)}", one),
        repeat,
        calls,
    )
    report(f"SELECT 1 ({repeat} rounds x {calls} calls)", fixed, clock.counts_server)
    small.dispose()

    big = create_backend(url, row_cap=rows, max_result_bytes=None, statement_timeout_s=600)
    statements = [("range", f"SELECT id, cast(id AS string) AS s FROM range({rows})")]
    if table:
        client.sql("DROP TABLE IF EXISTS bench_rows")
        client.sql(
            "CREATE TABLE bench_rows USING parquet AS "
            f"SELECT id, cast(id AS string) AS s FROM range({rows})"
        )
        statements.append(("parquet table", "SELECT id, s FROM bench_rows"))
    for name, sql in statements:
        await large_read(clock, client, big, sql, f"{rows:,}-row read of {name}", rows, repeat)
    if table:
        client.sql("DROP TABLE IF EXISTS bench_rows")
    big.dispose()
    client.stop()
    print(load())


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--quick", action="store_true", help="200k rows, fewer calls")
    parser.add_argument("--table", action="store_true", help="also read a parquet table")
    parser.add_argument("--repeat", type=int, default=5, help="rounds of both sides")
    parser.add_argument("--url", default=None, help="an existing server (default: start one)")
    args = parser.parse_args()
    rows = 200_000 if args.quick else 1_000_000
    calls = 10 if args.quick else 30
    if args.url is not None:
        asyncio.run(run(args.url, None, rows, args.repeat, calls, args.table))
        return
    with local_server() as (url, pid):
        asyncio.run(run(url, pid, rows, args.repeat, calls, args.table))


if __name__ == "__main__":
    main()
