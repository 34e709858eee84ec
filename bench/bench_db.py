"""Benchmark of ``query_database`` against bare SQLAlchemy, pandas and ADBC, in one run, as ratios.

Every figure is a ratio against a baseline measured in the same run; nothing here
is a test. Rows:

1. Fixed cost (SQLite, and PostgreSQL for reference): the tool's ``execute`` for ``SELECT 1``
   (classification, canonical hash, worker thread, read-only transaction, DataFrame and
   preview; no audit) against bare SQLAlchemy ``exec_driver_sql`` on a reused connection.
   Target: at most 100 us added.
2. Capped read (SQLite, PostgreSQL): ``SELECT *`` of the big table (``--rows``) under the default cap
   (10,000) against the same read with ``LIMIT 10000``, both through the tool. Targets: at
   most 1.5x the time and 10 MiB more peak memory.
3. The big table into a DataFrame (row cap = its rows): the tool against ``pandas.read_sql`` on a DBAPI
   connection (SQLAlchemy) and on ADBC. Targets (for a million rows; a ``--quick`` run's
   100,000 rows give reference figures): at most 1.3x the ADBC time and 1.5x its peak memory.
4. Event-loop lag while the tool reads the big table (the kernel's loop stays responsive): the
   worst delay of a 1 ms ticker. Target: at most 20 ms; baseline: the idle loop's p99.
5. The full session path (``bench_session.py``'s measure): one ``SELECT 1`` call through an
   ``AgentSession`` with the database extension and the audit recorder writing to a real
   store (the data's engine), and the same session without the audit, against bare
   SQLAlchemy. Targets: the audited call at most 600 us on SQLite and 1.5 ms on PostgreSQL;
   without the audit at most 100 us over bare SQLAlchemy on SQLite (a reference on
   PostgreSQL, where the worker hop and the read's round trips come on top).

Ours and the baselines of a row alternate, ``--repeat`` times, and each shows its best time
(the machine is shared).

Peak memory is the growth of the process's peak resident set (``VmHWM``) during one call, in
a fresh interpreter per measurement, so memory held by C libraries (libpq, Arrow) counts, and so
does the growth of SQLite's reader process (see ``pi_notebook/sql/backend/arrow_sqlite.py``).

Run: ``PYTHONPATH=$PWD .venv/bin/python bench/bench_db.py [--pg URL] [--rows N] [--quick]``
(PostgreSQL: a scratch database is created on the server and dropped afterwards; ``--pg
none`` skips it).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import re
import sqlite3
import statistics
import subprocess
import sys
import tempfile
import time
import uuid
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import pandas as pd
import sqlalchemy as sa

PG_DEFAULT = "postgresql+psycopg://postgres@127.0.0.1:5432/test"
CAP = 10_000
TABLE = "bench_rows"
COLUMNS = "id, name, amount, day"


# -- the tool, without a session -----------------------------------------------------------
class _CapturePI:
    """Just enough of ExtensionAPI to take the tool out of the factory."""

    audit = None

    def __init__(self) -> None:
        self.tools: dict[str, Any] = {}

    def register_tool(self, definition: Any) -> None:
        self.tools[definition.name] = definition

    def on(self, _event: str, _handler: Any) -> Callable[[], None]:
        return lambda: None


class Tool:
    """``query_database`` for one URL and row cap, called the way the agent calls it."""

    def __init__(self, url: str, row_cap: int) -> None:
        from pi_notebook.ai.abort import AbortController
        from pi_notebook.database import database_extension

        self.ext = database_extension(url, row_cap=row_cap)
        pi = _CapturePI()
        self.ext(pi)
        self.tool = pi.tools["query_database"]
        self.signal = AbortController().signal

    async def __call__(self, sql: str) -> Any:
        params = self.tool.parameters(sql=sql)
        result = await self.tool.execute("bench", params, self.signal, lambda _u: None, None)
        # The extension keeps the last results for the notebook; here, as with read_sql, the
        # caller's reference is the only one (else 1M-row frames pile up between repeats).
        self.ext.results.clear()
        return result

    def close(self) -> None:
        if self.ext.backend is not None:
            self.ext.backend.dispose()


# -- data -------------------------------------------------------------------------------------
def fill_sqlite(path: Path, rows: int) -> str:
    conn = sqlite3.connect(path)
    conn.execute(
        f"CREATE TABLE {TABLE} (id INTEGER PRIMARY KEY, name VARCHAR(40), "
        "amount DOUBLE PRECISION, day VARCHAR(10))"
    )
    conn.executemany(
        f"INSERT INTO {TABLE} VALUES (?, ?, ?, ?)",
        (
            (i, f"customer {i % 977}", i * 0.37 % 1000, f"2024-{1 + i % 12:02d}-{1 + i % 28:02d}")
            for i in range(rows)
        ),
    )
    conn.commit()
    conn.close()
    return f"sqlite:///{path}"


def fill_postgres(base: str, rows: int) -> tuple[str, Callable[[], None]]:
    """A scratch database with the table; returns its URL and a function that drops it."""
    name = f"pi_bench_{uuid.uuid4().hex[:10]}"
    admin = sa.create_engine(base, isolation_level="AUTOCOMMIT")
    with admin.connect() as conn:
        conn.exec_driver_sql(f'CREATE DATABASE "{name}"')
    url = sa.make_url(base).set(database=name).render_as_string(hide_password=False)
    engine = sa.create_engine(url)
    with engine.begin() as conn:
        conn.exec_driver_sql(
            f"CREATE TABLE {TABLE} AS SELECT g AS id, ('customer ' || g %% 977)::varchar(40) AS name, "
            f"(g * 0.37)::float8 - floor(g * 0.37 / 1000) * 1000 AS amount, "
            f"to_char(DATE '2024-01-01' + g %% 365, 'YYYY-MM-DD')::varchar(10) AS day "
            f"FROM generate_series(0, {rows - 1}) g"
        )
        conn.exec_driver_sql(f"ANALYZE {TABLE}")
    engine.dispose()

    def drop() -> None:
        with admin.connect() as conn:
            conn.exec_driver_sql(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
        admin.dispose()

    return url, drop


# -- measuring ------------------------------------------------------------------------------
async def interleaved(
    fns: list[Callable[[], Awaitable[Any]]], repeat: int, number: int = 1
) -> list[float]:
    """Seconds per call of each of ``fns``, run in turn ``repeat`` times (ours and the
    baselines alternate, so load on the shared machine hits each alike): the best of each."""
    times: list[list[float]] = [[] for _ in fns]
    for _ in range(repeat):
        for fn, out in zip(fns, times, strict=True):
            start = time.perf_counter()
            for _ in range(number):
                await fn()
            out.append((time.perf_counter() - start) / number)
    return [min(t) for t in times]


def rows_label(rows: int) -> str:
    """``1M`` for a million, else the count with separators."""
    return f"{rows // 1_000_000}M" if rows % 1_000_000 == 0 else f"{rows:,}"


def _kib(field: str, pid: int | None = None) -> int:
    status = Path(f"/proc/{pid if pid is not None else 'self'}/status").read_text()
    match = re.search(rf"{field}:\s+(\d+)", status)
    return int(match.group(1)) if match else 0


def _reset_peak(pid: int | None = None) -> None:
    # VmHWM back to the current RSS
    Path(f"/proc/{pid if pid is not None else 'self'}/clear_refs").write_text("5")


def peak_mib(kind: str, url: str, sql: str, row_cap: int) -> float:
    """Peak memory growth of one call, measured in a fresh interpreter (see the docstring)."""
    out = subprocess.run(
        [sys.executable, __file__, "--child", kind, url, sql, str(row_cap)],
        check=True,
        capture_output=True,
        text=True,
    )
    return float(json.loads(out.stdout.strip().splitlines()[-1])["peak_mib"])


async def _child(kind: str, url: str, sql: str, row_cap: int) -> None:
    run = _contender(kind, url, row_cap)
    await run("SELECT 1 AS warm")  # imports, pools, the worker thread, SQLite's reader process
    helper = _reader_process(run)
    _reset_peak()
    if helper is not None:
        _reset_peak(helper)
    before = _kib("VmRSS") + (_kib("VmRSS", helper) if helper is not None else 0)
    result = await run(sql)
    peak = _kib("VmHWM") + (_kib("VmHWM", helper) if helper is not None else 0)
    del result
    print(json.dumps({"peak_mib": (peak - before) / 1024}))


def _reader_process(run: Any) -> int | None:
    """The pid of the tool's SQLite reader process, whose memory counts as ours."""
    backend = getattr(getattr(run, "ext", None), "backend", None)
    proc = getattr(getattr(backend, "_adbc", None), "_proc", None)
    return proc.pid if proc is not None else None


def _contender(kind: str, url: str, row_cap: int) -> Callable[[str], Awaitable[Any]]:
    if kind == "tool":
        tool = Tool(url, row_cap)
        return tool
    if kind == "read_sql":
        engine = sa.create_engine(url)

        async def read_sql(sql: str) -> Any:
            return pd.read_sql(sql, engine)

        return read_sql
    if kind == "read_sql_adbc":
        conn = adbc_connect(url)

        async def read_adbc(sql: str) -> Any:
            return pd.read_sql(sql, conn)

        return read_adbc
    raise ValueError(kind)


def adbc_connect(url: str) -> Any:
    u = sa.make_url(url)
    if u.get_backend_name() == "sqlite":
        import adbc_driver_sqlite.dbapi as adbc_sqlite

        return adbc_sqlite.connect(u.database)
    import adbc_driver_postgresql.dbapi as adbc_pg

    return adbc_pg.connect(u.set(drivername="postgresql").render_as_string(hide_password=False))


async def loop_lag(work: Callable[[], Awaitable[Any]] | None, idle_s: float = 1.0) -> list[float]:
    """Delays of a 1 ms ticker while ``work`` runs (or for ``idle_s`` with no work), in s."""
    loop = asyncio.get_running_loop()
    lags: list[float] = []
    done = asyncio.Event()

    async def ticker() -> None:
        while not done.is_set():
            start = loop.time()
            await asyncio.sleep(0.001)
            lags.append(max(0.0, loop.time() - start - 0.001))

    task = asyncio.create_task(ticker())
    if work is None:
        await asyncio.sleep(idle_s)
    else:
        await work()
    done.set()
    await task
    return lags


# -- reporting ------------------------------------------------------------------------------
ROWS_OUT: list[tuple[str, str, str, str, str]] = []


def report(
    what: str, baseline: str, ours: str, measured: float, target: float | None, unit: str = "x"
) -> None:
    """One row; ``target=None`` prints it as a reference, outside the count of targets."""
    if target is None:
        print(f"{what:<44} {baseline:<26} {ours:<18} {measured:8.2f}{unit} (reference)", flush=True)
        return
    ok = "ok" if measured <= target else "MISS"
    ROWS_OUT.append(
        (what, baseline, ours, f"{measured:.2f}{unit} (target <= {target:g}{unit})", ok)
    )
    print(
        f"{what:<44} {baseline:<26} {ours:<18} {measured:8.2f}{unit} <= {target:g}{unit}  {ok}",
        flush=True,
    )


# -- the rows -------------------------------------------------------------------------------
async def session_path(url: str, label: str, audit_url: str, calls: int, repeat: int) -> None:
    from bench_session import measure  # this directory is on sys.path when the script runs

    from pi_notebook.audit.schema import metadata

    engine = sa.create_engine(audit_url)
    metadata.drop_all(engine)  # each run's records in a store of their own
    engine.dispose()
    bare, plain, audited, _ = await measure(url, audit_url, calls, repeat)
    target_us = 600 if label == "SQLite" else 1500
    bare_text = f"bare {bare * 1e6:.1f} us"
    report(
        f"audited call through a session ({label})",
        bare_text,
        f"ours {audited * 1e6:.1f} us",
        audited * 1e6,
        target_us,
        " us",
    )
    line = f"  the session without audit, added ({label})"
    added = (plain - bare) * 1e6
    report(
        line,
        bare_text,
        f"ours {plain * 1e6:.1f} us",
        added,
        100 if label == "SQLite" else None,
        " us",
    )


async def fixed_cost(url: str, label: str, number: int, target_us: float | None) -> None:
    tool = Tool(url, CAP)
    engine = sa.create_engine(url)
    try:
        with engine.connect() as conn:

            async def bare() -> Any:
                return conn.exec_driver_sql("SELECT 1").fetchall()

            for _ in range(200):  # warm both paths (pools, imports, caches, the worker)
                await bare()
                await tool("SELECT 1")
            # More, shorter rounds than the other rows, same total: on a shared machine the
            # best round is the one that caught a quiet moment, for both sides alike.
            rounds = 9
            t_bare, t_ours = await interleaved(
                [bare, lambda: tool("SELECT 1")], rounds, max(1, number * 5 // rounds)
            )
    finally:
        engine.dispose()
        tool.close()
    added = (t_ours - t_bare) * 1e6
    line = f"fixed cost SELECT 1 ({label})"
    if target_us is None:
        print(
            f"{line:<44} bare {t_bare * 1e6:7.1f} us        ours {t_ours * 1e6:7.1f} us  added {added:7.1f} us (reference)"
        )
        return
    report(
        line, f"bare {t_bare * 1e6:.1f} us", f"ours {t_ours * 1e6:.1f} us", added, target_us, " us"
    )


async def capped(url: str, label: str, rows: int, repeat: int) -> None:
    tool = Tool(url, CAP)
    full, limited = f"SELECT {COLUMNS} FROM {TABLE}", f"SELECT {COLUMNS} FROM {TABLE} LIMIT {CAP}"
    try:
        out = await tool(full)
        assert len(out.details["dataframe"]) == CAP and not out.details["row_count_exact"]
        await tool(limited)
        t_limit, t_full = await interleaved([lambda: tool(limited), lambda: tool(full)], repeat)
    finally:
        tool.close()
    m_limit = peak_mib("tool", url, limited, CAP)
    m_full = peak_mib("tool", url, full, CAP)
    report(
        f"capped read, {rows_label(rows)} rows, cap {CAP:,} ({label})",
        f"LIMIT {t_limit * 1e3:.1f} ms",
        f"ours {t_full * 1e3:.1f} ms",
        t_full / t_limit,
        1.5,
    )
    report(
        f"  its peak memory over LIMIT ({label})",
        f"LIMIT {m_limit:.1f} MiB",
        f"ours {m_full:.1f} MiB",
        m_full - m_limit,
        10,
        " MiB",
    )


async def dataframe(url: str, label: str, rows: int, repeat: int) -> None:
    sql = f"SELECT {COLUMNS} FROM {TABLE}"
    tool = Tool(url, rows)
    engine = sa.create_engine(url)
    adbc = adbc_connect(url)
    try:
        out = await tool(sql)
        assert len(out.details["dataframe"]) == rows

        async def ours() -> Any:
            return await tool(sql)

        async def read_sql() -> Any:
            return pd.read_sql(sql, engine)

        async def read_adbc() -> Any:
            return pd.read_sql(sql, adbc)

        t_ours, t_dbapi, t_adbc = await interleaved([ours, read_sql, read_adbc], repeat)
        lags = await loop_lag(ours)
    finally:
        tool.close()
        engine.dispose()
        adbc.close()
    m_ours = peak_mib("tool", url, sql, rows)
    m_dbapi = peak_mib("read_sql", url, sql, rows)
    m_adbc = peak_mib("read_sql_adbc", url, sql, rows)
    n = rows_label(rows)
    print(
        f"  read_sql on DBAPI ({label}): {t_dbapi:.3f} s, {m_dbapi:.0f} MiB peak "
        f"(ours {t_ours / t_dbapi:.2f}x the time, {m_ours / max(m_dbapi, 1e-9):.2f}x the memory)"
    )
    # The issue sets these two targets for a million rows; below that the reader process's
    # fixed few MiB weigh on the ratio (a quick run's 100,000 rows: reference figures).
    full = rows >= 1_000_000
    report(
        f"{n} rows into a DataFrame ({label})",
        f"ADBC {t_adbc:.3f} s",
        f"ours {t_ours:.3f} s",
        t_ours / t_adbc,
        1.3 if full else None,
    )
    report(
        f"  its peak memory ({label})",
        f"ADBC {m_adbc:.0f} MiB",
        f"ours {m_ours:.0f} MiB",
        m_ours / max(m_adbc, 1e-9),
        1.5 if full else None,
    )
    report(
        f"  event-loop lag during it ({label})",
        "",
        f"max {max(lags) * 1e3:.1f} ms",
        max(lags) * 1e3,
        20,
        " ms",
    )


async def main(args: argparse.Namespace) -> None:
    repeat = 3 if args.quick else 5
    idle = await loop_lag(None)
    print(f"idle event loop: p99 lag {statistics.quantiles(idle, n=100)[98] * 1e3:.2f} ms")
    with tempfile.TemporaryDirectory() as tmp:
        print(f"filling SQLite with {args.rows:,} rows...", flush=True)
        sqlite_url = fill_sqlite(Path(tmp) / "bench.sqlite", args.rows)
        await fixed_cost(sqlite_url, "SQLite", 500 if args.quick else 2000, 100)
        await capped(sqlite_url, "SQLite", args.rows, repeat * 2)
        await dataframe(sqlite_url, "SQLite", args.rows, repeat)
        calls = 200 if args.quick else 400
        audit_url = f"sqlite:///{Path(tmp) / 'audit.sqlite'}"
        await session_path(sqlite_url, "SQLite", audit_url, calls, repeat)
        if args.pg != "none":
            print(f"filling PostgreSQL with {args.rows:,} rows...", flush=True)
            pg_url, drop = fill_postgres(args.pg, args.rows)
            try:
                await fixed_cost(pg_url, "PostgreSQL", 300 if args.quick else 1000, None)
                await capped(pg_url, "PostgreSQL", args.rows, repeat * 2)
                await dataframe(pg_url, "PostgreSQL", args.rows, repeat)
                await session_path(pg_url, "PostgreSQL", pg_url, calls, repeat)
            finally:
                drop()
    misses = [r for r in ROWS_OUT if r[4] != "ok"]
    print(
        f"\n{len(ROWS_OUT) - len(misses)} of {len(ROWS_OUT)} targets met"
        + ("; missed: " + "; ".join(r[0].strip() for r in misses) if misses else "")
    )


if __name__ == "__main__":
    if len(sys.argv) > 1 and sys.argv[1] == "--child":
        _, _, kind, url, sql, cap = sys.argv
        asyncio.run(_child(kind, url, sql, int(cap)))
        sys.exit(0)
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--pg", default=PG_DEFAULT, help="PostgreSQL server URL, or 'none'")
    parser.add_argument("--rows", type=int, help="rows in the big table (default 1,000,000)")
    parser.add_argument("--quick", action="store_true", help="fewer repetitions, 100,000 rows")
    parsed = parser.parse_args()
    if parsed.rows is None:
        parsed.rows = 100_000 if parsed.quick else 1_000_000
    asyncio.run(main(parsed))
