"""The Spark Connect session of one backend: connecting, tagging, interrupting, progress.

``sc://HOST:PORT`` (optionally ``/;token=...;use_ssl=true``, Spark Connect's own parameters)
is handed to ``pyspark``'s Connect client as written; what the tool shows and records is
``sc://HOST:PORT`` alone, and the parameters' values are scrubbed from every error.

The session is opened lazily on the backend's worker thread, and only counts as open once
the server answered (``spark.version``), within a short retry policy instead of the client's
default ten minutes: an unreachable server or a cluster slow to start is a short error, and
nothing has run. Every statement runs under an operation tag added on the thread that runs
it (the client keeps tags per thread: added anywhere else, the interrupt would miss it);
Stop and the statement timeout call ``interruptTag`` from another thread, which cancels the
job on the cluster. The client's progress handler reports the job's tasks while it runs.
"""

from __future__ import annotations

import logging
import re
import threading
import uuid
import warnings
from collections.abc import Callable
from typing import Any, TypeVar

from sqlalchemy.engine import URL

from pi_notebook.sql.backend.errors import ConnectFailed, QueryAborted
from pi_notebook.sql.backend.progress import JobProgress

__all__ = ["MAX_TABLES", "SparkCluster", "SparkSchema", "arrow_of", "spark_remote", "sql_frame"]

T = TypeVar("T")

MAX_TABLES = 200
"""Tables of the current database the schema lists at most (one round trip per table)."""

_RPC_DETAILS = re.compile(r'status = StatusCode\.(\w+)\s+details = "([^"\n]*)"')
_CONNECT_RETRIES = 3
"""Retries of a failing call (connection refused, server busy) before it is an error: about
a second in all, where the client's default waits ten minutes."""


def spark_remote(url: str | URL) -> tuple[URL, str, tuple[str, ...]]:
    """The URL shown for ``url`` (``sc://HOST:PORT``, no parameters), the connection string
    the client gets, and the parameter values to scrub from errors (a token among them).

    Raises:
        ValueError: not an ``sc://HOST[:PORT]`` URL.
    """
    text = url.render_as_string(hide_password=False) if isinstance(url, URL) else str(url)
    if not text.startswith("sc://"):
        raise ValueError("Spark Connect URLs look like sc://HOST:15002")
    rest = text[len("sc://") :]
    address, _, params = rest.partition("/")
    host, _, port = address.rpartition(":") if ":" in address else (address, "", "")
    if not host or "@" in address or (port and not port.isdigit()):
        raise ValueError(
            "Spark Connect URLs look like sc://HOST:15002 (a token goes in "
            "/;token=..., not before the host)"
        )
    secrets = tuple(
        value
        for part in params.split(";")
        if "=" in part
        for value in [part.split("=", 1)[1]]
        if len(value) >= 4
    )
    shown = URL.create("sc", host=host, port=int(port) if port else 15002)
    return shown, text, secrets


def sql_frame(spark: Any, sql: str) -> Any:
    """The DataFrame of the statement ``sql``, sent with the plan that reads it.

    ``spark.sql(text)`` is a round trip of its own (the server parses the statement and
    hands it back); built here, the statement travels inside the one ``ExecutePlan`` that
    runs it, and the server parses it there. What runs is the same: the server turns the
    text into a plan with the session's own ``sql`` (a command in it runs then, once)."""
    from pyspark.sql.connect.dataframe import DataFrame
    from pyspark.sql.connect.plan import SQL

    return DataFrame(SQL(sql), spark)


def arrow_of(frame: Any) -> Any:
    """``frame``'s rows as an Arrow table, typed as ``DataFrame.toArrow`` types them (its
    Spark schema in Arrow, timestamps in UTC), in one ``ExecutePlan``: the schema is the one
    the server sends ahead of the batches, where ``toArrow`` asks for it in a round trip
    first."""
    from pyspark.sql.pandas.types import to_arrow_schema

    table, schema = frame._to_table()
    if schema is None:  # a server that sent no schema: ask for it
        schema = frame.schema
    return table.cast(
        to_arrow_schema(schema, error_on_duplicated_field_names_in_struct=True, timezone="UTC")
    )


class SparkCluster:
    """One Spark Connect session (see the module docstring), used from the worker thread;
    :meth:`interrupt` and :meth:`close` may be called from any thread."""

    def __init__(self, remote: str, secrets: tuple[str, ...]) -> None:
        self._remote = remote
        self.secrets = secrets
        self._lock = threading.Lock()
        self._spark: Any = None
        self._progress: Callable[[int], None] | None = None
        self._last = (-1, -1, -1)
        self._closed = False

    def session(self) -> Any:
        """The connected session (opened on first use).

        Raises:
            ConnectFailed: the server did not answer (the error's text is scrubbed).
        """
        with self._lock:
            if self._spark is not None:
                return self._spark
        spark = self._open()
        with self._lock:
            closed = self._closed
            if self._spark is None and not closed:
                self._spark = spark
                spark = None
            current = self._spark
        if spark is not None:  # another thread connected meanwhile, or the backend closed
            _quietly(spark.stop)
        if closed:
            raise ConnectFailed(RuntimeError("the backend was closed while it connected"))
        return current

    def _open(self) -> Any:
        try:
            with warnings.catch_warnings():  # pyspark warns about pandas 3 on import
                warnings.simplefilter("ignore")
                from pyspark.sql.connect.client.retries import DefaultPolicy
                from pyspark.sql.connect.session import SparkSession

            # The client logs every failed query (text and JVM stack) as JSON on stderr; the
            # tool reports the error itself, once, in one line.
            logging.getLogger("SQLQueryContextLogger").setLevel(logging.CRITICAL)
            spark: Any = SparkSession.builder.remote(self._remote).create()
        except Exception as exc:
            raise ConnectFailed(RuntimeError(self.clean(exc))) from None
        try:
            spark.client.set_retry_policies([DefaultPolicy(max_retries=_CONNECT_RETRIES)])
            spark.registerProgressHandler(self._on_progress)
            spark.version  # noqa: B018 - the first call that reaches the server
        except Exception as exc:
            _quietly(spark.stop)
            raise ConnectFailed(RuntimeError(self.clean(exc))) from None
        return spark

    def run(
        self,
        fn: Callable[[Any], T],
        canceller: Any,
        progress: Callable[[int], None] | None = None,
    ) -> T:
        """``fn(session)`` on this thread under a fresh operation tag, cancellable by
        ``canceller`` (Stop, the statement timeout) while it runs, reporting the job's
        progress to ``progress``."""
        spark = self.session()
        tag = f"pi-{uuid.uuid4().hex}"
        spark.addTag(tag)  # on this thread: the tags are the calling thread's
        self._progress, self._last = progress, (-1, -1, -1)
        canceller.started(lambda: spark.interruptTag(tag))
        try:
            if canceller.reason is not None:
                raise QueryAborted("cancelled before it started")
            return fn(spark)
        finally:
            canceller.stopped()
            self._progress = None
            _quietly(lambda: spark.removeTag(tag))

    def _on_progress(self, stages: Any, inflight_tasks: int, operation_id: Any, done: bool) -> None:
        report = self._progress
        if report is None or done or not stages:
            return
        tasks = sum(int(s.num_tasks) for s in stages)
        finished = sum(int(s.num_completed_tasks) for s in stages)
        read = sum(int(s.num_bytes_read) for s in stages)
        if (finished, tasks, read) != self._last:  # the server repeats an unchanged state
            self._last = (finished, tasks, read)
            report(JobProgress(finished, tasks=tasks, bytes_read=read))

    def clean(self, exc: BaseException) -> str:
        """``exc``'s first line, without the URL's parameter values (a token)."""
        details = getattr(exc, "details", None)  # a gRPC error: its status, not its repr
        if callable(details):
            code = getattr(exc, "code", None)
            status = getattr(code(), "name", "") if callable(code) else ""
            text = f"{status}: {details()}" if status else str(details())
        else:
            text = str(exc).strip()
        found = _RPC_DETAILS.search(text)  # the client wraps a gRPC error's repr
        if found is not None:
            text = f"{found.group(1)}: {found.group(2)}"
        text = text.strip().splitlines()[0] if text.strip() else type(exc).__name__
        for secret in self.secrets:
            text = text.replace(secret, "***")
        return text[:300]

    def close(self) -> None:
        """Release the session on the server (best effort)."""
        with self._lock:
            spark, self._spark, self._closed = self._spark, None, True
        if spark is not None:
            _quietly(spark.stop)


TableRow = tuple[str, str, str | None]
ColumnRow = tuple[str, str, str, bool, str | None, bool]


class SparkSchema:
    """The current database's tables and views (temporary views too) as plain rows, for the
    schema cache of the database extension; ``MAX_TABLES`` at most."""

    dialect = "spark"

    def __init__(self, cluster: SparkCluster, url: URL) -> None:
        self._cluster = cluster
        self.url = url

    def catalog(self) -> tuple[list[TableRow], list[ColumnRow]]:
        """Tables ``(name, kind, comment)`` and columns ``(table, name, type, nullable,
        comment, False)`` (Spark tables have no primary key), blocking."""
        spark = self._cluster.session()
        tables: list[TableRow] = []
        columns: list[ColumnRow] = []
        for table in sorted(spark.catalog.listTables(), key=lambda t: t.name)[:MAX_TABLES]:
            kind = "view" if str(table.tableType).upper() in ("VIEW", "TEMPORARY") else "table"
            tables.append((str(table.name), kind, table.description or None))
            for column in spark.catalog.listColumns(table.name):
                columns.append(
                    (
                        str(table.name),
                        str(column.name),
                        str(column.dataType),
                        bool(column.nullable),
                        column.description or None,
                        False,
                    )
                )
        return tables, columns


def _quietly(call: Callable[[], object]) -> None:
    try:
        call()
    except Exception:  # closing or untagging a session whose server is gone
        pass
