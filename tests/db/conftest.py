"""A local Spark Connect server for the Spark tests, started once per test run.

``spark-submit`` runs pyspark's own ``SparkConnectServer`` (``local[2]``, its warehouse in a
temporary directory) on a free port of 127.0.0.1; the tests reach it as
``sc://127.0.0.1:PORT``, the URL a user gives. It holds ``events`` (100 rows) made once. No
pyspark or no Java skips the Spark tests, unless ``PI_NOTEBOOK_REQUIRE_SERVICES=1``; with
both present, a server that does not start fails them.
"""

from __future__ import annotations

import asyncio
import importlib.util
import os
import shutil
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

_START_TIMEOUT_S = 240
_READY = "Spark Connect server started at"

EVENTS = (
    "CREATE TABLE events USING parquet AS SELECT id, id % 10 AS user_id, "
    "CASE WHEN id % 4 = 0 THEN 'buy' ELSE 'view' END AS kind, "
    "timestamp_seconds(1704067200 + id * 60) AS ts FROM range(100)"
)


def _missing(reason: str) -> None:
    if os.environ.get("PI_NOTEBOOK_REQUIRE_SERVICES") == "1":
        pytest.fail(f"{reason}; PI_NOTEBOOK_REQUIRE_SERVICES=1 requires it", pytrace=False)
    pytest.skip(reason)


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


@pytest.fixture(scope="session")
def spark_url(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """``sc://127.0.0.1:PORT`` of a Spark Connect server holding ``events``."""
    spec = importlib.util.find_spec("pyspark")
    if spec is None or importlib.util.find_spec("grpc") is None:
        _missing("pyspark[connect] is not installed (the 'spark' extra)")
    if shutil.which("java") is None:
        _missing("no Java on PATH for the Spark Connect server")
    assert spec is not None and spec.origin is not None
    home = Path(spec.origin).parent
    root = tmp_path_factory.mktemp("spark")
    port = _free_port()
    log = root / "server.log"
    env = dict(
        os.environ,
        SPARK_HOME=str(home),
        PATH=f"{Path(sys.executable).parent}{os.pathsep}{os.environ.get('PATH', '')}",
    )
    command = [
        str(home / "bin" / "spark-submit"),
        "--class",
        "org.apache.spark.sql.connect.service.SparkConnectServer",
        "--master",
        "local[2]",
        "--driver-memory",
        "1g",
        "--conf",
        f"spark.connect.grpc.binding.port={port}",
        "--conf",
        "spark.connect.grpc.binding.address=127.0.0.1",
        "--conf",
        "spark.ui.enabled=false",
        "--conf",
        "spark.sql.shuffle.partitions=2",
        "--conf",
        f"spark.sql.warehouse.dir={root / 'warehouse'}",
    ]
    with log.open("wb") as out:
        server = subprocess.Popen(command, cwd=root, env=env, stdout=out, stderr=subprocess.STDOUT)
    try:
        deadline = time.monotonic() + _START_TIMEOUT_S
        while _READY not in log.read_text(errors="replace"):
            if server.poll() is not None or time.monotonic() > deadline:
                tail = log.read_text(errors="replace")[-2000:]
                pytest.fail(f"the Spark Connect server did not start:\n{tail}", pytrace=False)
            time.sleep(0.5)
        url = f"sc://127.0.0.1:{port}"
        _setup(url)
        yield url
    finally:
        server.terminate()
        try:
            server.wait(30)
        except subprocess.TimeoutExpired:
            server.kill()
            server.wait()


def _setup(url: str) -> None:
    from pi_notebook.sql.engines import create_backend

    backend = create_backend(url, statement_timeout_s=120)
    try:
        asyncio.run(backend._run_as("write", EVENTS))
    finally:
        backend.dispose()
