"""Benchmark MCP both ways against the bare SDK on the same work, in one run.

1. Server: a governed ``query_database`` read through ``python -m pi_notebook.mcp serve``
   (classification, the gate, the backend's read-only transaction, the audit, result shaping)
   against an ungoverned SDK ``MCPServer`` tool that runs the same query with SQLAlchemy, both
   over stdio with the SDK's client. Reported: mean milliseconds per call and the ratio.
2. Client: a governed call of an MCP tool through ``AgentSession.call_tool`` (validation by the
   server's schema, handlers, events, the audit, result mapping) against the SDK ``Client``
   calling the same server directly.

    PYTHONPATH=$PWD .venv/bin/python bench/bench_mcp.py            # 300 calls each
    PYTHONPATH=$PWD .venv/bin/python bench/bench_mcp.py --calls 50
"""

from __future__ import annotations

import argparse
import asyncio
import os
import sqlite3
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from mcp import Client, StdioServerParameters
from mcp.client.stdio import stdio_client

from pi_notebook import create_agent_session
from pi_notebook.mcp import mcp_extension

TOY = Path(__file__).resolve().parents[1] / "tests" / "mcp" / "toy_server.py"
SQL = "SELECT id, name, price FROM items WHERE id <= 20 ORDER BY id"

BARE_SERVER = '''
import sys
import sqlalchemy as sa
from mcp.server import MCPServer

engine = sa.create_engine(sys.argv[1])
server = MCPServer("bare")


@server.tool()
def query_database(sql: str) -> str:
    """Run SQL (no governance)."""
    with engine.connect() as conn:
        result = conn.exec_driver_sql(sql)
        rows = result.fetchall()
        return "\\n".join(" | ".join(map(str, row)) for row in rows)


server.run("stdio")
'''


def _database(folder: Path) -> str:
    path = folder / "bench.sqlite"
    with sqlite3.connect(path) as conn:
        conn.execute("CREATE TABLE items (id INTEGER PRIMARY KEY, name TEXT, price REAL)")
        conn.executemany(
            "INSERT INTO items VALUES (?, ?, ?)",
            [(i, f"item {i}", i * 1.5) for i in range(1, 1001)],
        )
    return f"sqlite:///{path}"


async def _time_calls(client: Client, tool: str, args: dict[str, Any], n: int) -> float:
    await client.call_tool(tool, args)  # warm up
    start = time.perf_counter()
    for _ in range(n):
        result = await client.call_tool(tool, args)
        assert not result.is_error, result.content
    return (time.perf_counter() - start) / n * 1000


def _env(folder: Path) -> dict[str, str]:
    return {
        "PYTHONPATH": os.environ.get("PYTHONPATH", os.getcwd()),
        "PI_NOTEBOOK_DATA_DIR": str(folder),
    }


async def bench_server(folder: Path, url: str, n: int) -> tuple[float, float]:
    ours = StdioServerParameters(
        command=sys.executable,
        args=[
            "-m",
            "pi_notebook.mcp",
            "serve",
            "--database-url",
            url,
            "--audit-url",
            f"sqlite:///{folder / 'audit.sqlite'}",
        ],
        env=_env(folder),
    )
    script = folder / "bare_server.py"
    await asyncio.to_thread(script.write_text, BARE_SERVER)
    bare = StdioServerParameters(command=sys.executable, args=[str(script), url], env=_env(folder))
    with (folder / "server.err").open("w") as errlog:
        async with Client(stdio_client(ours, errlog=errlog)) as client:
            governed = await _time_calls(client, "query_database", {"sql": SQL}, n)
        async with Client(stdio_client(bare, errlog=errlog)) as client:
            baseline = await _time_calls(client, "query_database", {"sql": SQL}, n)
    return governed, baseline


async def bench_client(folder: Path, n: int) -> tuple[float, float]:
    spec = {"command": sys.executable, "args": [str(TOY)]}
    ext = mcp_extension({"toy": spec}, log_dir=folder)
    from pi_notebook.testing import ScriptedModel

    session = create_agent_session(
        model=ScriptedModel([]),
        extensions=[ext],
        audit=f"sqlite:///{folder / 'client-audit.sqlite'}",
        builtin_tools=False,
    )
    await session.start()
    try:
        await session.call_tool("mcp__toy__lookup", {"key": "warm"})
        start = time.perf_counter()
        for i in range(n):
            result = await session.call_tool("mcp__toy__lookup", {"key": f"k{i}"})
            assert not result.is_error
        governed = (time.perf_counter() - start) / n * 1000
    finally:
        await session.close()
    with (folder / "toy.err").open("w") as errlog:
        async with Client(stdio_client(StdioServerParameters(**spec), errlog=errlog)) as client:
            baseline = await _time_calls(client, "lookup", {"key": "k"}, n)
    return governed, baseline


async def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0] if __doc__ else None)
    parser.add_argument("--calls", type=int, default=300)
    parser.add_argument("--quick", action="store_true", help="100 calls")
    args = parser.parse_args()
    n = min(args.calls, 100) if args.quick else args.calls
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp)
        url = _database(folder)
        governed, baseline = await bench_server(folder, url, n)
        print(
            f"server: governed query_database {governed:.2f} ms/call, bare SDK tool "
            f"{baseline:.2f} ms/call, ratio {governed / baseline:.2f}x ({n} calls, stdio)"
        )
        governed, baseline = await bench_client(folder, n)
        print(
            f"client: governed MCP tool call {governed:.2f} ms/call, bare SDK client "
            f"{baseline:.2f} ms/call, ratio {governed / baseline:.2f}x ({n} calls, stdio)"
        )


if __name__ == "__main__":
    asyncio.run(main())
