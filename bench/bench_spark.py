"""Benchmark of ``query_database`` on Spark Connect against pyspark's own client, as ratios
in one run.

Large read: ``id, cast(id AS string)`` of ``range(N)`` (1M rows; ``--quick`` 200k) kept
whole (row cap N, no byte bound), through the governed backend's ``run`` (classify,
capability check, the tagged job under ``limit(cap + 1)``, Arrow into the DataFrame, the
model's preview; no audit) against the client's own ``spark.sql(sql).toArrow()`` on the same
statement (and that Arrow table's ``to_pandas``, since the tool's result is a DataFrame).
Fixed cost: ``SELECT 1`` the same two ways.

Target: the large read <= 1.2x the client's ``toArrow()``. The timings alternate
``--repeat`` times; each shows its best (the machine is shared).

Without ``--url`` a local Spark Connect server (``local[2]``, pyspark's own, Java 17) is
started for the run on a free port and stopped afterwards.

    .venv/bin/python bench/bench_spark.py [--quick] [--repeat N] [--url sc://HOST:PORT]
"""

from __future__ import annotations

import argparse
import asyncio
import os
import socket
import subprocess
import sys
import tempfile
import time
import warnings
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from timing import per_call, per_call_async

from pi_notebook.sql.engines import create_backend


@contextmanager
def local_server() -> Iterator[str]:
    """A local Spark Connect server for the run: its ``sc://127.0.0.1:PORT``."""
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
            yield f"sc://127.0.0.1:{port}"
        finally:
            server.terminate()
            server.wait(30)


async def run(url: str, rows: int, repeat: int, calls: int) -> None:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        from pyspark.sql.connect.session import SparkSession

        client = SparkSession.builder.remote(url).create()
    ids = iter(range(10**9))

    small = create_backend(url, row_cap=10_000)
    await small.run("warm", "SELECT 1")
    client.sql("SELECT 1").toArrow()
    fixed: dict[str, list[float]] = {"client": [], "governed": []}
    for _ in range(repeat):
        fixed["client"].append(per_call(lambda: client.sql("SELECT 1").toArrow(), calls))
        fixed["governed"].append(
            await per_call_async(lambda: small.run(f"s{next(ids)}", "SELECT 1"), calls)
        )
    base = min(fixed["client"])
    print(f"SELECT 1 (best of {repeat} x {calls}):")
    for name, values in fixed.items():
        print(f"  {name:9} {min(values) * 1e3:8.1f} ms  ({min(values) / base:.2f}x the client)")
    small.dispose()

    big = create_backend(url, row_cap=rows, max_result_bytes=None, statement_timeout_s=600)
    sql = f"SELECT id, cast(id AS string) AS s FROM range({rows})"
    warm = await big.run("warm", sql)
    assert len(warm.dataframe) == rows and warm.row_count_exact  # the whole result, kept
    assert client.sql(sql).toArrow().num_rows == rows
    large: dict[str, list[float]] = {"toArrow": [], "to_pandas": [], "governed": []}
    for _ in range(repeat):
        large["toArrow"].append(per_call(lambda: client.sql(sql).toArrow(), 1))
        large["to_pandas"].append(per_call(lambda: client.sql(sql).toArrow().to_pandas(), 1))
        large["governed"].append(await per_call_async(lambda: big.run(f"b{next(ids)}", sql), 1))
    print(f"{rows:,}-row read (best of {repeat}):")
    arrow = min(large["toArrow"])
    for name, values in large.items():
        print(f"  {name:9} {min(values) * 1e3:8.1f} ms  ({min(values) / arrow:.2f}x toArrow())")
    big.dispose()
    client.stop()


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--quick", action="store_true")
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--url", default=None)
    args = parser.parse_args()
    rows = 200_000 if args.quick else 1_000_000
    calls = 10 if args.quick else 30
    if args.url is not None:
        asyncio.run(run(args.url, rows, args.repeat, calls))
        return
    with local_server() as url:
        asyncio.run(run(url, rows, args.repeat, calls))


if __name__ == "__main__":
    main()
