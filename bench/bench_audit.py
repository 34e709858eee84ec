"""Benchmark the audit log against bare SQLAlchemy and pandas on the same store, in one run.

1. Writes: records/second through ``AuditLog.record`` (queued, then ``flush``), including
   encoding, redaction, hashing and the head update, against the driver's own
   ``executemany`` of the very same rows (the floor) and, on SQLite, multi-row INSERTs
   as the log writes them (faster); each side writes into an empty store. Target (ours): at
   least 0.5x the faster.
2. Reads: ``AuditLog.to_dataframe(decode=False)`` (payloads as JSON text: Arrow through ADBC
   on PostgreSQL, the ``sqlite3`` cursor on SQLite) and ``to_dataframe()`` (payloads decoded)
   over N records (default 1,000,000) against ``pandas.read_sql`` of the same table
   (target: at most 0.3x for the first).

    .venv/bin/python bench/bench_audit.py                      # SQLite file in a temp dir
    .venv/bin/python bench/bench_audit.py --records 100000     # a quicker run
    .venv/bin/python bench/bench_audit.py --url postgresql+psycopg://postgres@127.0.0.1/bench

A ``--url`` store must be empty or disposable: the benchmark drops the audit tables first.
"""

from __future__ import annotations

import argparse
import datetime as dt
import gc
import tempfile
import time
import uuid
from pathlib import Path
from typing import Any

import pandas as pd
import sqlalchemy as sa

from pi_notebook.audit import AuditLog
from pi_notebook.audit.chain import GENESIS, format_ts, record_hash
from pi_notebook.audit.schema import heads, metadata, records


def payload(i: int) -> dict[str, Any]:
    """A typical record: a query_database call's arguments and a decision."""
    return {
        "input": {
            "sql": f"SELECT id, name, total FROM orders WHERE id = {i} LIMIT 100",
            "limit": 100,
        },
        "decision": "seen",
        "attempt": 1,
    }


MULTI_ROWS = 1024  # rows per multi-row INSERT in the bare SQLite baseline (as the log's)


def _empty_store(url: str) -> None:
    """Drop and recreate the audit tables: every side of a round writes into an empty store.

    (Writing the bare rows after ours into the same tables made the baseline pay for tables
    two and three times larger, whose indexes no longer fit the cache: on SQLite that slowed
    it by half and flattered the ratio.)
    """
    engine = sa.create_engine(url)
    metadata.drop_all(engine)
    metadata.create_all(engine)
    engine.dispose()


def bench_writes(url: str, n: int) -> tuple[float, float, float | None]:
    """One round: ``n`` records through AuditLog, then the same rows bare; records/second of
    each: ours, the driver's ``executemany`` and (SQLite) multi-row INSERTs as the log writes
    them. Each side starts from an empty store."""
    _empty_store(url)
    log = AuditLog(url, session_id="bench-" + uuid.uuid4().hex)
    # Warm up the writer, the pool and the schema before timing.
    log.record("warmup", {}, durable=True)
    payloads = [payload(i) for i in range(n)]
    gc.collect()
    t0 = time.perf_counter()
    for i, body in enumerate(payloads):
        log.record("tool_call", body, tool_call_id=f"call_{i}", tool_name="query_database")
    log.flush()
    ours = time.perf_counter() - t0
    with log.engine.connect() as conn:
        rows = [
            dict(r._mapping)
            for r in conn.execute(
                sa.select(records).where(
                    records.c.session_id == log.session_id, records.c.kind == "tool_call"
                )
            )
        ]
    log.close()
    engine = sa.create_engine(url)
    names = [c.name for c in records.columns if c.name != "id"]
    mark = "?" if engine.dialect.paramstyle == "qmark" else "%s"
    one = f"({', '.join([mark] * len(names))})"
    head = (
        f"INSERT INTO pi_audit_records ({', '.join(chr(34) + n + chr(34) for n in names)}) VALUES "
    )
    tuples = [tuple(row[n] for n in names) for row in rows]
    if engine.dialect.name == "sqlite":  # the text form the log writes
        tuples = [
            tuple(
                format_ts(v)[:-1].replace("T", " ") if isinstance(v, dt.datetime) else v for v in t
            )
            for t in tuples
        ]
    engine.dispose()

    def bare(multi: bool) -> float:
        _empty_store(url)
        engine = sa.create_engine(url)
        raw = engine.raw_connection()
        try:
            driver: Any = raw.driver_connection
            cursor = driver.cursor()
            gc.collect()
            t0 = time.perf_counter()
            if multi:  # as the log writes a batch on SQLite
                for start in range(0, len(tuples), MULTI_ROWS):
                    chunk = tuples[start : start + MULTI_ROWS]
                    flat = [v for row in chunk for v in row]
                    cursor.execute(head + ", ".join([one] * len(chunk)), flat)
            else:  # the driver's own executemany
                cursor.executemany(head + one, tuples)
            driver.commit()
            seconds = time.perf_counter() - t0
            cursor.close()
        finally:
            raw.close()
            engine.dispose()
        return seconds

    many = bare(multi=False)
    multi = bare(multi=True) if sa.make_url(url).get_backend_name() == "sqlite" else None
    return n / ours, n / many, None if multi is None else n / multi


def populate(url: str, n: int) -> None:
    """Fill the store with ``n`` valid, chained records quickly (bare inserts)."""
    engine = sa.create_engine(url)
    base = dt.datetime(2025, 1, 1, tzinfo=dt.UTC)
    chunk = 50_000
    sessions = max(1, n // 10_000)
    per = -(-n // sessions)
    done = 0
    with engine.begin() as conn:
        for s in range(sessions):
            sid, prev, rows = f"s{s:05d}", GENESIS, []
            count = min(per, n - done)
            for seq in range(1, count + 1):
                ts = base + dt.timedelta(milliseconds=done + seq)
                text = (
                    '{"decision":"seen","input":{"limit":100,"sql":"SELECT id FROM orders '
                    f'WHERE id = {seq}"}}}}'
                )
                fields = {
                    "session_id": sid,
                    "seq": seq,
                    "kind": "tool_call",
                    "tool_call_id": f"call_{s}_{seq}",
                    "tool_name": "query_database",
                    "user": "bench",
                    "policy_version": "v1",
                    "payload": text,
                    "prev_hash": prev,
                }
                prev = record_hash(ts=format_ts(ts), **fields)
                rows.append({**fields, "ts": ts, "hash": prev})
                if len(rows) >= chunk:
                    conn.execute(sa.insert(records), rows)
                    rows = []
            if rows:
                conn.execute(sa.insert(records), rows)
            conn.execute(sa.insert(heads).values(session_id=sid, count=count, last_hash=prev))
            done += count
    engine.dispose()


def bench_reads(url: str, repeat: int) -> tuple[float, float, float, int]:
    log = AuditLog(url)
    engine = sa.create_engine(url)
    text, decoded, bare = float("inf"), float("inf"), float("inf")
    rows = 0
    for _ in range(repeat):
        gc.collect()
        t0 = time.perf_counter()
        frame = log.to_dataframe(decode=False)
        text = min(text, time.perf_counter() - t0)
        rows = len(frame)
        del frame
        gc.collect()
        t0 = time.perf_counter()
        frame = log.to_dataframe()
        decoded = min(decoded, time.perf_counter() - t0)
        del frame
        gc.collect()
        t0 = time.perf_counter()
        frame = pd.read_sql("SELECT * FROM pi_audit_records ORDER BY session_id, seq", engine)
        bare = min(bare, time.perf_counter() - t0)
        del frame
    log.close()
    engine.dispose()
    return text, decoded, bare, rows


def main() -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--url", help="SQLAlchemy URL of a disposable store (default: SQLite)")
    parser.add_argument("--records", type=int, default=1_000_000, help="records for the read test")
    parser.add_argument("--writes", type=int, default=50_000, help="records for the write test")
    parser.add_argument("--repeat", type=int, default=3, help="timings: best of N")
    parser.add_argument("--quick", action="store_true", help="200,000 / 20,000 records")
    parser.add_argument("--writes-only", action="store_true", help="skip the read test")
    args = parser.parse_args()
    if args.quick:
        args.records, args.writes = min(args.records, 200_000), min(args.writes, 20_000)
    with tempfile.TemporaryDirectory() as tmp:
        url = args.url or f"sqlite:///{Path(tmp) / 'bench_audit.sqlite'}"
        engine = sa.create_engine(url)
        metadata.drop_all(engine)
        engine.dispose()
        print(f"store: {sa.make_url(url).render_as_string(hide_password=True)}")

        # Each round writes ours and then the bare sides, each into an empty store; each
        # round's own ratios are shown too (their range says how much the load moved them).
        runs = [bench_writes(url, args.writes) for _ in range(args.repeat)]
        floors = [max(r[1], r[2] or 0.0) for r in runs]  # the faster bare path of each round
        ours, bare = max(r[0] for r in runs), max(floors)
        ratios = sorted(r[0] / f for r, f in zip(runs, floors, strict=True))
        many = max(r[1] for r in runs)
        print(
            f"writes ({args.writes:,} records, each side into an empty store): AuditLog "
            f"{ours:,.0f} rec/s; bare driver {bare:,.0f} rec/s (executemany {many:,.0f}"
            + (
                ""
                if runs[0][2] is None
                else f", multi-row INSERTs {max(r[2] or 0 for r in runs):,.0f}"
            )
            + f"); ratio {ours / bare:.2f}x the faster (rounds {ratios[0]:.2f}-{ratios[-1]:.2f}x),"
            f" {ours / many:.2f}x executemany"
        )
        if args.writes_only:
            return

        engine = sa.create_engine(url)
        metadata.drop_all(engine)
        engine.dispose()
        AuditLog(url).close()  # create the schema
        t0 = time.perf_counter()
        populate(url, args.records)
        print(f"populated {args.records:,} records in {time.perf_counter() - t0:.1f} s")
        text_s, decoded_s, bare_s, n = bench_reads(url, args.repeat)
        print(
            f"reads ({n:,} records): pandas.read_sql {bare_s:.2f} s; "
            f"to_dataframe(decode=False) {text_s:.2f} s, ratio {text_s / bare_s:.2f}x "
            f"(target <= 0.3x); to_dataframe() {decoded_s:.2f} s, ratio "
            f"{decoded_s / bare_s:.2f}x"
        )


if __name__ == "__main__":
    main()
