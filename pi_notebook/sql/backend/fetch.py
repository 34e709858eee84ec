"""Executing one statement on an open transaction and fetching its rows within the row cap.

Runs in the worker thread. A read stops at ``row_cap + 1`` rows: the extra row says "more
than N rows" without reading the rest, unless the caller asked for the exact count
(``count_rows``; counting stops at ``count_limit``). No engine buffers the whole result:

* SQLite: the stdlib cursor steps the statement as rows are fetched;
* PostgreSQL: a query runs as a server-side cursor inside the read-only transaction
  (``DECLARE ... CURSOR FOR <query>`` and the first ``FETCH`` in one round trip; the text is
  only prefixed, and ``statement_timeout`` applies), so libpq never holds more than a batch
  and stopping at the cap costs nothing; other reads (SHOW, EXPLAIN) stream. Under a size
  bound the first batch is 128 rows (nothing is known yet of their width) and each later one
  about 4 MiB of rows as wide as those seen (:func:`_pg_batches`): the size of a ``FETCH``
  bounds the server's work too, since PostgreSQL computes a ``FETCH``'s rows whole (into a
  tuplestore, spilling to disk) before it sends the first, so one ``FETCH`` of the cap read
  in libpq's chunks would bound only what the client holds, and could not be cancelled
  until it was all sent;
* MySQL/MariaDB: ``sql_select_limit`` makes the server stop at the cap (set by
  :mod:`.readonly`), and an unbuffered ``SSCursor`` streams what comes; a result longer than
  that (an explicit larger ``LIMIT``) is stopped with ``KILL QUERY`` before the cursor is
  drained, so the connection is clean before it goes back to the pool;
* DuckDB: the relation gets a ``LIMIT`` (DuckDB's own relational API, not text pasted
  around the statement), so a sort becomes a top-N, and its result streams ``CHUNK`` rows at
  a time (:func:`~.duckdb_days.duckdb_chunks`).

A read also stops keeping rows once their values pass ``max_result_bytes`` (:mod:`.sizes`):
the rows that fit are kept, and the read ends there as at the cap (a count goes on). So what
the process holds while reading is the rows kept plus one batch, on every engine.

Writes run to completion (a write's RETURNING rows are counted, the first ``row_cap``
kept). What does not belong here: the transaction, the cancel window, the policy decision.
"""

from __future__ import annotations

import itertools
from collections.abc import Callable, Iterator
from typing import Any

from pi_notebook.sql.backend.duckdb_days import DuckdbEdgeDays, duckdb_chunks, duckdb_fixed_chunks
from pi_notebook.sql.backend.fetched import (
    CURSOR_TEXT,
    Fetched,
    ProgressSteps,
    RunSettings,
    read_limit,
)
from pi_notebook.sql.backend.frames import FrameBuilder
from pi_notebook.sql.backend.readonly import RunKind, take_pending_begin
from pi_notebook.sql.backend.sizes import chunk_bytes, rows_within

__all__ = [
    "CHUNK",
    "CURSOR_TEXT",
    "Fetched",
    "ProgressSteps",
    "RunSettings",
    "execute_and_fetch",
    "read_limit",
]

CHUNK = 512
"""Rows fetched per driver call: small enough that a chunk's tuples die young (the
collector's first generation), so reading a large result never triggers full collections
that stall the event loop and double the time."""

_PG_CURSOR = "pi_read"
_PG_BATCH = 10_001
"""Most rows one ``FETCH`` brings: what narrow rows are fetched by, and every ``FETCH`` of a
read without a size bound."""
_PG_FIRST = 128
"""Rows of a size-bounded read's first ``FETCH``, while nothing is known of how wide its rows
are: a first batch of the row cap plus one could be gigabytes of documents. A read whose
limit is no more (a row cap under 128) still takes it all, ``ROLLBACK`` included, in one
round trip."""
_PG_BATCH_BYTES = 4 << 20
"""Bytes of values a later ``FETCH`` brings at most, by the widest rows seen so far: large
enough that round trips cost nothing next to the transfer, small next to the size bound."""
_PG_SAMPLE = 32
"""Rows of a batch measured to estimate its bytes per row (spread over the batch)."""
_PG_GROWTH = 4
"""A size-bounded read's ``FETCH`` takes at most this many times the rows of the one before:
rows that grow wider as the read goes on (``ORDER BY length(body)``) are met in batches that
grow slowly, not in one ``FETCH`` sized by the narrow rows of the first."""


def execute_and_fetch(
    raw: Any,
    backend: str,
    kind: RunKind,
    sql: str,
    settings: RunSettings,
    progress: Callable[[int], None] | None,
    interrupt: Callable[[], None] | None = None,
) -> Fetched:
    """Execute ``sql`` on ``raw`` and fetch within the caps (see the module docstring).

    ``interrupt`` cancels the running statement at the driver (MySQL stops an unbuffered
    result with it).
    """
    limit = read_limit(settings) if kind == "read" else None
    if backend == "duckdb":
        return _duckdb(raw.driver_connection, kind, sql, settings, progress, limit)
    if backend == "postgresql" and kind == "read":
        return _postgres_read(
            raw.driver_connection, sql, settings, progress, limit, begin=take_pending_begin(raw)
        )
    if backend == "mysql" and kind == "read":
        import pymysql.cursors

        cur = raw.cursor(pymysql.cursors.SSCursor)
        try:
            cur.execute(sql)
            return _collect(
                cur,
                _chunks(cur),
                settings,
                progress,
                limit,
                on_early_stop=lambda: _stop_unbuffered(cur, interrupt),
            )
        finally:
            cur.close()
    cur = raw.cursor()
    try:
        cur.execute(sql)
        return _collect(
            cur, _chunks(cur, short_ends=backend == "sqlite"), settings, progress, limit
        )
    finally:
        cur.close()


def _chunks(cur: Any, *, short_ends: bool = False) -> Iterator[list[tuple[Any, ...]]]:
    """The rows of ``cur``, ``CHUNK`` at a time; with ``short_ends`` (a driver whose
    ``fetchmany`` returns fewer rows only at the end: SQLite) a short chunk is the last."""
    while True:
        chunk = cur.fetchmany(CHUNK)
        if not chunk:
            return
        yield chunk
        if short_ends and len(chunk) < CHUNK:
            return


def _collect(
    cur: Any,
    chunks: Iterator[list[tuple[Any, ...]]],
    settings: RunSettings,
    progress: Callable[[int], None] | None,
    limit: int | None,
    *,
    on_early_stop: Callable[[], None] | None = None,
    description: Callable[[], Any] | None = None,
) -> Fetched:
    desc = description() if description is not None else cur.description
    if desc is None:
        return Fetched(columns=[], row_count=max(int(cur.rowcount or 0), 0), has_rows=False)
    columns = [str(d[0]) for d in desc]
    builder = FrameBuilder(columns)
    seen, exact, sized = 0, True, False
    steps = ProgressSteps(progress, settings.progress_every)
    cap, budget, used = settings.row_cap, settings.max_result_bytes, 0
    for chunk in chunks:
        if limit is not None and seen + len(chunk) > limit:
            chunk = chunk[: limit - seen]
        if builder.count < cap:
            keep = chunk[: cap - builder.count]
            if budget is not None:
                size = chunk_bytes(keep)
                if used + size > budget:  # keep the rows that fit, and nothing after them
                    keep = keep[: rows_within(keep, budget - used)]
                    sized, cap = True, builder.count + len(keep)
                used += size
            builder.add(keep)
        seen += len(chunk)
        steps.update(seen)
        if (limit is not None and (seen >= limit or sized)) or seen >= settings.count_limit:
            exact = False
            if on_early_stop is not None:
                on_early_stop()
            break
    return Fetched(
        columns=columns,
        row_count=seen,
        row_count_exact=exact,
        truncated=seen > builder.count,
        size_capped=sized,
        head=builder.head,
        kept=builder.count,
        builder=builder,
    )


def _postgres_read(
    conn: Any,
    sql: str,
    settings: RunSettings,
    progress: Callable[[int], None] | None,
    limit: int | None,
    *,
    begin: str | None = None,
) -> Fetched:
    """A read on PostgreSQL; ``begin`` (``BEGIN READ ONLY`` and its settings, when the
    transaction is not open yet) goes in front of its first statement."""
    cur = conn.cursor()
    if not CURSOR_TEXT.match(sql):  # SHOW, EXPLAIN...: small results, streamed
        if begin is not None:
            cur.execute(begin)
        rows = cur.stream(sql, size=CHUNK)
        try:
            chunks = iter(lambda: list(itertools.islice(rows, CHUNK)), [])
            first = next(chunks, [])
            # The description is known once the first rows (or the end) arrived.
            return _collect(
                cur,
                itertools.chain([first], chunks) if first else iter(()),
                settings,
                progress,
                limit,
            )
        finally:
            rows.close()  # stops the stream: psycopg cancels what is left and drains
            cur.close()
    try:
        # A server-side cursor: the first batch comes with the DECLARE in one round trip,
        # and stopping at the cap is just not fetching more (the rollback closes it). When
        # the transaction opens in the same message and that first batch is all the read
        # will take (a row cap under _PG_FIRST), it also ends there: one round trip in all.
        end = limit if limit is not None else settings.count_limit
        sized = settings.max_result_bytes is not None
        first = min(end, _PG_FIRST if sized else _PG_BATCH)
        text = f"DECLARE {_PG_CURSOR} NO SCROLL CURSOR FOR {sql}\n; FETCH FORWARD {first} FROM {_PG_CURSOR}"
        if begin is not None:
            text = f"{begin}; {text}" + ("; ROLLBACK" if first == end else "")
        cur.execute(text)
        while cur.description is None and cur.nextset():  # on to the FETCH's result
            pass
        batches = _pg_batches(cur, first, end, measure=sized, ends_transaction=begin is not None)
        return _collect(cur, batches, settings, progress, limit)
    finally:
        cur.close()


def _pg_batches(
    cur: Any, first: int, end: int, *, measure: bool, ends_transaction: bool
) -> Iterator[list[tuple[Any, ...]]]:
    """The rows of the read's cursor, one ``FETCH`` at a time, up to ``end`` rows in all.

    The first batch (``first`` rows) came with the ``DECLARE``. With ``measure`` (the read
    has a size bound), each later ``FETCH`` asks for about :data:`_PG_BATCH_BYTES` of the
    widest rows seen so far, and at most :data:`_PG_GROWTH` times the rows of the batch
    before, so libpq and the driver hold about that much at once on top of the rows kept
    (rows much wider than all before them can still pass it: a ``FETCH`` is counted in
    rows); without it, :data:`_PG_BATCH` rows. With ``ends_transaction`` (the
    read opened its transaction in its first message), the ``FETCH`` that takes the read to
    ``end`` carries the ``ROLLBACK`` too, saving the round trip after it.
    """
    asked, fetched, widest = first, 0, 0.0
    batch: list[tuple[Any, ...]] = cur.fetchall()
    while batch:
        yield batch
        fetched += len(batch)
        if len(batch) < asked or fetched >= end:
            return  # the result ended, or the read has all it takes (and may be rolled back)
        left = end - fetched
        if measure:
            widest = max(widest, _bytes_per_row(batch))
            left = min(left, len(batch) * _PG_GROWTH)
        asked = _next_batch_rows(left, widest)
        last = ends_transaction and fetched + asked == end
        cur.execute(f"FETCH FORWARD {asked} FROM {_PG_CURSOR}" + ("; ROLLBACK" if last else ""))
        batch = cur.fetchall()


def _next_batch_rows(left: int, widest: float) -> int:
    """Rows of the next ``FETCH``: :data:`_PG_BATCH_BYTES` of rows ``widest`` bytes wide (at
    least one row; ``0``: unknown), never more than :data:`_PG_BATCH` nor than ``left``."""
    rows = _PG_BATCH if widest <= 0 else max(1, int(_PG_BATCH_BYTES // widest))
    return min(rows, _PG_BATCH, left)


def _bytes_per_row(batch: list[tuple[Any, ...]]) -> float:
    """Bytes of values per row in ``batch``, from at most about :data:`_PG_SAMPLE` rows
    spread over it (sizing a batch needs an estimate, and measuring every row of ten
    thousand narrow ones would cost more than their round trip)."""
    sample = batch[:: max(1, len(batch) // _PG_SAMPLE)]
    return chunk_bytes(sample) / len(sample)


def _duckdb(
    conn: Any,
    kind: RunKind,
    sql: str,
    settings: RunSettings,
    progress: Callable[[int], None] | None,
    limit: int | None,
) -> Fetched:
    if kind == "read" and limit is not None and settings.arrow:
        from pi_notebook.sql.backend.arrow import duckdb_arrow_read

        fetched = duckdb_arrow_read(conn, sql, settings)
        if fetched is not None:
            return fetched
    if kind == "read" and limit is not None:
        relation = conn.sql(sql)
        if relation is None:
            return Fetched(columns=[], row_count=0, has_rows=False)
        return _duckdb_read(conn, relation, settings, progress, limit)
    conn.execute(sql)
    fetched = _collect(conn, _chunks(conn), settings, progress, None)
    if kind == "write" and fetched.columns == ["Count"] and fetched.row_count == 1:
        # DuckDB answers DML with a one-row "Count" result instead of a rowcount.
        return Fetched(columns=[], row_count=int(fetched.head[0][0]), has_rows=False)
    return fetched


def _duckdb_read(
    conn: Any,
    relation: Any,
    settings: RunSettings,
    progress: Callable[[int], None] | None,
    limit: int,
) -> Fetched:
    """A DuckDB read of ``relation`` under its ``LIMIT``, streamed ``CHUNK`` rows at a time,
    so stopping at the size bound stops the query; read again, once, with its infinite dates
    named when it holds a day on the edge (see :class:`~.duckdb_days.DuckdbEdgeDays`)."""
    columns = [(c,) for c in relation.columns]
    limited = relation.limit(limit)

    def collect(chunks: Iterator[list[tuple[Any, ...]]]) -> Fetched:
        return _collect(None, chunks, settings, progress, limit, description=lambda: columns)

    try:
        return collect(duckdb_chunks(conn, limited, CHUNK))
    except DuckdbEdgeDays as edge:
        return collect(duckdb_fixed_chunks(conn, limited, edge, CHUNK))


def _stop_unbuffered(cur: Any, interrupt: Callable[[], None] | None) -> None:
    """Stop a MySQL unbuffered result that has more rows than we read: KILL QUERY, then drain
    what is already on the wire (the server's "interrupted" error ends it). A result that
    ends right here (``sql_select_limit`` stopped it) needs neither."""
    if cur.fetchone() is None:
        return
    if interrupt is not None:
        try:
            interrupt()
        except Exception:  # the drain below still ends the result, only slower
            pass
    try:
        cur.close()
    except Exception:  # 1317 "Query execution was interrupted": the result is over
        pass
