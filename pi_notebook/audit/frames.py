"""Reading the audit as a pandas DataFrame, one row per record, with typed columns (D9).

``read_records`` is on the path of ``%pi_audit`` over stores with millions of rows. Where
pyarrow and an ADBC driver are installed, the rows come as Arrow columns through a reader of
:mod:`pi_notebook.readers` and become a DataFrame without a Python object per value: on
PostgreSQL through an ADBC connection (:class:`~pi_notebook.readers.postgres.PostgresReader`),
on a SQLite file with at least :data:`SQLITE_ARROW_MIN_RECORDS` records through the ADBC
reader process (:func:`~pi_notebook.readers.sqlite.shared_reader`; never ADBC for SQLite
inside the kernel, see there). Every other store, and a read a reader declines, is read
through the driver's cursor and converted column by column. Payloads stay JSON text
unless asked to be decoded (one ``json.loads`` over all of them). The ADBC connections only
ever run this module's own SELECT over the audit tables (no user SQL).
"""

from __future__ import annotations

import datetime as dt
import gc
import json
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from typing import TYPE_CHECKING, Any

import numpy as np
import sqlalchemy as sa

from .schema import records

if TYPE_CHECKING:
    import pandas as pd

    from pi_notebook.readers.protocol import ArrowReader, Query

__all__ = ["RECORD_COLUMNS", "SQLITE_ARROW_MIN_RECORDS", "decode_payloads", "read_records"]

SQLITE_ARROW_MIN_RECORDS = 20_000
"""SQLite stores from this many records on are read through the ADBC reader process (below
it, ``sqlite3`` is done before the process has started)."""

RECORD_COLUMNS = [
    "id",
    "session_id",
    "seq",
    "timestamp",
    "kind",
    "tool_call_id",
    "tool_name",
    "user",
    "policy_version",
    "payload",
    "prev_hash",
    "hash",
]


def _utc(value: Any) -> dt.datetime:
    import pandas as pd

    ts = pd.Timestamp(value)
    if ts is pd.NaT:
        raise ValueError(f"since={value!r} is not a point in time")
    ts = ts.tz_localize("UTC") if ts.tzinfo is None else ts.tz_convert("UTC")
    out = ts.to_pydatetime()
    if not isinstance(out, dt.datetime):
        raise ValueError(f"since={value!r} is not a point in time")
    return out


def read_records(
    engine: sa.Engine,
    *,
    session: str | None = None,
    tool: str | None = None,
    tool_call_id: str | None = None,
    since: Any = None,
    kind: str | Sequence[str] | None = None,
    user: str | None = None,
    calls_only: bool = False,
    decode: bool = True,
) -> pd.DataFrame:
    """The matching records, ordered by session and seq, with typed columns.

    ``decode`` turns the ``payload`` column from JSON text into dicts.
    """

    query = _records_query(
        engine.dialect.name == "sqlite",
        session=session,
        tool=tool,
        tool_call_id=tool_call_id,
        since=since,
        kind=kind,
        user=user,
        calls_only=calls_only,
    )
    with _no_cyclic_gc():
        frame = _read_arrow(engine, query, decode)
        if frame is not None:
            return frame
        return _read_rows(engine, query, decode)


def _records_query(
    sqlite: bool,
    *,
    session: str | None,
    tool: str | None,
    tool_call_id: str | None,
    since: Any,
    kind: str | Sequence[str] | None,
    user: str | None,
    calls_only: bool,
) -> sa.Select[*tuple[Any, ...]]:
    """The SELECT of the records :func:`read_records` matches, ordered by session and seq."""
    c = records.c
    # SQLite keeps timestamps as text: fetch the text and let pandas parse it in bulk rather
    # than have SQLAlchemy build a datetime object per row.
    ts_col = sa.type_coerce(c.ts, sa.String()) if sqlite else c.ts
    query = sa.select(
        c.id,
        c.session_id,
        c.seq,
        ts_col,
        c.kind,
        c.tool_call_id,
        c.tool_name,
        c.user,
        c.policy_version,
        c.payload,
        c.prev_hash,
        c.hash,
    )
    if session is not None:
        query = query.where(c.session_id == session)
    if tool is not None:
        query = query.where(c.tool_name == tool)
    if tool_call_id is not None:
        query = query.where(c.tool_call_id == tool_call_id)
    if user is not None:
        query = query.where(c.user == user)
    if calls_only:
        query = query.where(c.tool_call_id.is_not(None))
    if since is not None:
        bound = _utc(since)
        if sqlite:
            # Compare with SQLite's stored text (naive UTC, SQLAlchemy's own format).
            text = bound.replace(tzinfo=None).isoformat(sep=" ", timespec="microseconds")
            query = query.where(sa.type_coerce(c.ts, sa.String()) >= text)
        else:
            query = query.where(c.ts >= bound)
    if kind is not None:
        kinds = [kind] if isinstance(kind, str) else list(kind)
        query = query.where(c.kind.in_(kinds))
    query = query.order_by(c.session_id, c.seq)
    return query


@contextmanager
def _no_cyclic_gc() -> Iterator[None]:
    """Millions of new tuples, dicts and strings would trigger the cyclic garbage collector
    over and over (it scans the whole growing heap); none of them can form a cycle. Decoding a
    million payloads takes half the time without it."""
    was_enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was_enabled:
            gc.enable()


def _read_rows(engine: sa.Engine, query: sa.Select[*tuple[Any, ...]], decode: bool) -> pd.DataFrame:
    """The plain path: the driver's rows, converted column by column."""
    import pandas as pd

    rows = _fetch(engine, query)
    columns = list(zip(*rows, strict=True)) if rows else [()] * len(RECORD_COLUMNS)
    del rows
    data: dict[str, Any] = dict(zip(RECORD_COLUMNS, columns, strict=True))
    data["id"] = np.array(data["id"], dtype=np.int64)
    data["seq"] = np.array(data["seq"], dtype=np.int64)
    data["timestamp"] = _timestamps(list(data["timestamp"]))
    payloads = np.empty(len(data["id"]), dtype=object)
    payloads[:] = _payloads(list(data["payload"])) if decode else list(data["payload"])
    data["payload"] = payloads
    for name in (
        "session_id",
        "kind",
        "tool_call_id",
        "tool_name",
        "user",
        "policy_version",
        "prev_hash",
        "hash",
    ):
        # Object columns as fetched: converting a million strings to pandas' Arrow-backed
        # ``str`` costs more than the fetch (the Arrow path gives ``str`` for free).
        data[name] = pd.Series(np.array(data[name], dtype=object), dtype=object, copy=False)
    data["payload"] = pd.Series(data["payload"], dtype=object, copy=False)
    return pd.DataFrame(data, columns=RECORD_COLUMNS, copy=False)


def _fetch(engine: sa.Engine, query: sa.Select[*tuple[Any, ...]]) -> list[Any]:
    if engine.dialect.name not in _RAW_DIALECTS:
        with engine.connect() as conn:
            return list(conn.execute(query).fetchall())
    # Through the driver's cursor: plain tuples instead of a SQLAlchemy Row per record,
    # which halves the fetch of a large frame. Every bound value here is a str or (on
    # PostgreSQL) an aware datetime, which these drivers take as they are.
    compiled = query.compile(dialect=engine.dialect, compile_kwargs={"render_postcompile": True})
    params = compiled.construct_params()
    args: Any = (
        tuple(params[name] for name in compiled.positiontup or ())
        if compiled.positional
        else params
    )
    with engine.connect() as conn:
        cursor = conn.connection.driver_connection.cursor()  # pyright: ignore[reportOptionalMemberAccess]
        try:
            cursor.execute(str(compiled), args)
            return cursor.fetchall()
        finally:
            cursor.close()


_RAW_DIALECTS = ("sqlite", "postgresql")


def _timestamps(values: list[Any]) -> pd.DatetimeIndex:
    import pandas as pd

    if values and isinstance(values[0], str):
        return pd.DatetimeIndex(pd.to_datetime(values, utc=True, format="ISO8601"))
    return pd.DatetimeIndex(pd.to_datetime(values, utc=True)).as_unit("us")


def _payloads(texts: list[Any]) -> list[Any]:
    if not texts:
        return []
    try:
        # One parse over all payloads instead of a million json.loads calls; it fails only if
        # a row was tampered with into invalid JSON, and then each is decoded on its own.
        decoded = json.loads(f"[{','.join(texts)}]")
        if len(decoded) == len(texts) and all(type(d) is dict for d in decoded):
            return decoded
    except (ValueError, TypeError):
        pass
    return [_one_payload(t) for t in texts]


def _one_payload(text: Any) -> dict[str, Any]:
    # The log only writes JSON objects; anything else was put there by hand. Show it, wrapped,
    # rather than fail the whole frame.
    try:
        value = json.loads(text)
    except (ValueError, TypeError):
        return {"_invalid_json": text if isinstance(text, str) else repr(text)}
    return value if isinstance(value, dict) else {"_not_an_object": value}


def decode_payloads(frame: pd.DataFrame) -> pd.DataFrame:
    """A copy of a records frame whose ``payload`` column holds dicts instead of JSON text."""
    out = frame.copy()
    values = out["payload"].tolist()
    if values and not all(isinstance(v, dict) for v in values):
        decoded = np.empty(len(values), dtype=object)
        decoded[:] = _payloads([v if isinstance(v, str) else json.dumps(v) for v in values])
        out["payload"] = decoded
    return out


def _compiled(dialect: Any, query: sa.Select[*tuple[Any, ...]]) -> tuple[str, list[Any]]:
    compiled = query.compile(dialect=dialect, compile_kwargs={"render_postcompile": True})
    params = compiled.construct_params()
    return str(compiled), [params[name] for name in compiled.positiontup or ()]


def _reader(
    engine: sa.Engine, query: sa.Select[*tuple[Any, ...]]
) -> tuple[ArrowReader, Query] | None:
    """The Arrow reader of ``engine``'s store and the query in its words, or ``None``: the
    plain path reads it (see the module docstring)."""
    from pi_notebook.readers.protocol import Query, arrow_available

    backend = engine.dialect.name
    if backend not in ("postgresql", "sqlite") or not arrow_available(backend):
        return None
    if backend == "postgresql":
        from sqlalchemy.dialects import postgresql

        from pi_notebook.readers.postgres import PostgresReader

        sql, args = _compiled(postgresql.dialect(paramstyle="numeric_dollar"), query)
        return PostgresReader(engine.url), Query(sql, args)
    from pi_notebook.readers.sqlite import shared_reader, sqlite_file

    path = sqlite_file(engine.url)
    if path is None:
        return None
    with engine.connect() as conn:  # the id is the rowid: its maximum is one b-tree descent
        last = conn.execute(sa.select(sa.func.max(records.c.id))).scalar()
    if last is None or last < SQLITE_ARROW_MIN_RECORDS:
        return None
    sql, args = _compiled(engine.dialect, query)  # every bound value is a str
    return shared_reader(path), Query(sql, args)


def _arrow_table(engine: sa.Engine, query: sa.Select[*tuple[Any, ...]]) -> Any:
    """The records as an Arrow table, or ``None`` for the plain path."""
    from pi_notebook.readers.protocol import ReadLimits

    found = _reader(engine, query)
    if found is None:
        return None
    reader, statement = found
    read = reader.read_arrow(statement, ReadLimits())
    return None if read is None else read.table


def _read_arrow(
    engine: sa.Engine, query: sa.Select[*tuple[Any, ...]], decode: bool
) -> pd.DataFrame | None:
    table = _arrow_table(engine, query)
    if table is None or table.num_rows == 0:
        return None  # the plain path (it gives an empty frame its column types)
    import pyarrow as pa
    import pyarrow.compute as pc

    table = table.rename_columns(RECORD_COLUMNS)
    ts = table["timestamp"]
    if pa.types.is_string(ts.type):  # SQLite keeps naive UTC text: parse, then say UTC
        ts = pc.cast(ts, pa.timestamp("us"))
    ts = pc.cast(ts, pa.timestamp("us", tz="UTC"))
    table = table.set_column(RECORD_COLUMNS.index("timestamp"), "timestamp", ts)
    payloads = _arrow_payloads(table["payload"]) if decode else None
    if decode:
        table = table.drop_columns(["payload"])
    frame = table.to_pandas()
    frame["seq"] = frame["seq"].astype("int64")
    if payloads is not None:
        frame.insert(RECORD_COLUMNS.index("payload"), "payload", payloads)
    return frame


def _arrow_payloads(column: Any) -> np.ndarray[Any, Any]:
    """The payload column of an Arrow table as an object array of dicts.

    The column's own data buffer, with a comma after each text, is parsed as one JSON array:
    no Python string is made per record. That parse stands only if it gives one value per
    record and every text starts with ``{`` (then each value is the object its text holds);
    otherwise, a null or a text tampered into something else, each text is decoded on its own.
    """
    import pyarrow as pa
    import pyarrow.compute

    pc: Any = pyarrow.compute  # its kernels are generated at import: no stubs name them
    out = np.empty(len(column), dtype=object)
    texts = column.combine_chunks()
    if texts.null_count == 0 and pc.all(pc.starts_with(texts, "{")).as_py():
        comma = pa.scalar(",", texts.type)
        joined = pc.binary_join_element_wise(texts, comma, pa.scalar("", texts.type))
        width = np.int64 if pa.types.is_large_string(joined.type) else np.int32
        offsets = np.frombuffer(joined.buffers()[1], dtype=width)
        first, last = int(offsets[joined.offset]), int(offsets[joined.offset + len(joined)])
        body = memoryview(joined.buffers()[2])[first : last - 1]  # without the last comma
        try:
            decoded = json.loads(b"".join((b"[", body, b"]")))
        except (ValueError, TypeError):
            decoded = None
        if isinstance(decoded, list) and len(decoded) == len(out):
            out[:] = decoded
            return out
    out[:] = [_one_payload(text) for text in texts.to_pylist()]
    return out
