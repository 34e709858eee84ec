"""Spark SQL through Spark Connect (``sc://HOST:15002``; the ``spark`` extra: pyspark's
Connect client, no JVM in the kernel).

The policy and statement paths are
:class:`~pi_notebook.sql.engines.direct.DirectBackend`'s (``run``: classify, capability,
audit first; the worker, the write's audit wait and bounds, the derived-count preview); what
is Spark's:

* Spark has no read-only switch (``CREATE TABLE ... AS SELECT`` runs in any session), so a
  read passes the classifier only: everything else (writes, ``SET``, cache and refresh,
  ``ADD JAR``, temporary views, path reads such as ``parquet.`/path` ``, ``reflect``) asks
  or is refused before anything reaches the cluster (:mod:`pi_notebook.sql.spark`);
* a read runs as the statement under ``limit(cap + 1)`` (the limit is a plan node around the
  statement, not text pasted after it: a sort becomes a top-N), sent inside the one
  ``ExecutePlan`` that reads it (:func:`.spark_session.sql_frame`: no ``spark.sql`` round trip
  first, no schema round trip either), and comes back as Arrow typed as ``toArrow`` types it,
  then is kept to the row cap and the byte bound;
* every statement runs under an operation tag; Stop and the statement timeout interrupt its
  job on the cluster (``interruptTag``); the job's tasks are reported while it runs
  (:mod:`.spark_session`);
* an approved write runs as one ``spark.sql`` call. Spark has no transactions: stopped, what
  it had written stays, and the error says so. Nor can a write be tried and rolled back: the
  preview counts rows with the derived ``SELECT count(*)`` (an approval's bounds are checked
  with it before the write runs) or says plainly they cannot be counted;
* a read's cost is estimated with ``EXPLAIN COST`` (:mod:`.spark_cost`): one statement, one
  round trip.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace
from typing import Any

import pandas as pd
from sqlalchemy.engine import URL

from pi_notebook.sql import lexical
from pi_notebook.sql.backend import QueryError
from pi_notebook.sql.backend.arrow import fetched_from_table, to_frame
from pi_notebook.sql.backend.errors import ConnectFailed
from pi_notebook.sql.backend.fetch import Fetched, RunSettings, read_limit
from pi_notebook.sql.backend.readonly import RunKind
from pi_notebook.sql.backend.sizes import arrow_rows_within
from pi_notebook.sql.engines.base import ReadEstimate
from pi_notebook.sql.engines.direct import DirectBackend
from pi_notebook.sql.engines.spark_cost import cost_estimate
from pi_notebook.sql.engines.spark_session import (
    SparkCluster,
    SparkSchema,
    arrow_of,
    spark_remote,
    sql_frame,
)

__all__ = ["SparkBackend"]

_ROW_STARTS = frozenset(
    {"SELECT", "WITH", "FROM", "VALUES", "TABLE", "SHOW", "DESCRIBE", "DESC", "EXPLAIN", "LIST"}
)
"""First words of statements that return rows (an approved path read too)."""
_QUERIES = frozenset({"SELECT", "WITH", "FROM", "VALUES", "TABLE"})
"""Of those, the ones ``EXPLAIN COST`` estimates."""


class SparkBackend(DirectBackend):
    """``query_database``'s backend for Spark Connect (see the module docstring): the
    statement path is :class:`DirectBackend`'s, each hook one call on the cluster."""

    backend = "spark"
    dialect = "spark"
    engine_name = "Spark"
    no_rollback = (
        "Spark has no transactions: what the write had done before it was "
        "stopped stays (files its tasks had already committed)"
    )
    count_words = "SELECT count(*)"
    preview_fatal = (ConnectFailed,)

    def __init__(self, url: str | URL, **options: Any) -> None:
        shown, remote, secrets = spark_remote(url)
        super().__init__(shown, **options)
        self.settings = replace(self.settings, arrow=True)
        self._cluster = SparkCluster(remote, secrets)
        self.schema_source = SparkSchema(self._cluster, self.url)

    def dispose(self) -> None:
        """Let the worker go and release the Spark Connect session on the server."""
        self._execution.close()
        self._cluster.close()

    # -- hooks ---------------------------------------------------------------------------
    def _execute(
        self,
        kind: RunKind,
        sql: str,
        settings: RunSettings,
        canceller: Any,
        progress: Callable[[int], None] | None,
        counted: int | None = None,
    ) -> Fetched:
        def run(spark: Any) -> Fetched:
            if kind == "write" and _first_word(sql) not in _ROW_STARTS:
                spark.sql(sql)  # a command runs here, in one round trip
                fetched = Fetched(
                    columns=[],
                    row_count=counted or 0,
                    has_rows=False,
                    row_count_exact=counted is not None,
                )
                fetched.preview = (
                    f"Statement executed; {counted:,} row(s) affected (counted before it ran)."
                    if counted is not None
                    else "Statement executed (Spark does not report the rows a statement changed)."
                )
                return fetched
            return _take(spark, sql, settings)

        return self._cluster.run(run, canceller, progress)

    def _read_frame(self, sql: str, canceller: Any) -> pd.DataFrame:
        return self._cluster.run(lambda spark: spark.sql(sql).toPandas(), canceller)

    def _scalar(self, sql: str, canceller: Any) -> int:
        return int(
            self._cluster.run(
                lambda spark: arrow_of(sql_frame(spark, sql))[0][0].as_py(), canceller
            )
        )

    def _clean(self, exc: BaseException, canceller: Any) -> BaseException:
        """``exc`` as the worker hands it back: a Spark error as its first line, without the
        URL's token (the canceller's reason, when set, decides the message anyway)."""
        if isinstance(exc, QueryError | ConnectFailed | KeyboardInterrupt | SystemExit) or (
            canceller.reason is not None
        ):
            return exc
        return RuntimeError(self._cluster.clean(exc))

    def _error_text(self, exc: BaseException) -> str:
        return self._cluster.clean(exc)

    def _says_no_rollback(self, kind: RunKind, error: QueryError) -> bool:
        return kind == "write"

    def _estimate(
        self, sql: str, *, canceller: Any, progress: Callable[[int], None] | None = None
    ) -> ReadEstimate:
        """What the read ``sql`` would scan, from ``EXPLAIN COST`` (see :mod:`.spark_cost`)."""
        first = _first_word(sql)
        if first not in _QUERIES:
            return ReadEstimate(
                rows=None, bytes=None, source=f"no estimate for {first or 'this'} statements"
            )
        self._cluster.session()  # a server that cannot be reached is the read's error
        try:
            text = self._cluster.run(
                lambda spark: str(arrow_of(sql_frame(spark, f"EXPLAIN COST {sql}"))[0][0].as_py()),
                canceller,
            )
        except Exception as exc:
            if canceller.reason is not None:
                raise
            return ReadEstimate(
                rows=None,
                bytes=None,
                source=f"Spark EXPLAIN COST failed: {self._cluster.clean(exc)}",
            )
        return cost_estimate(text)


def _take(spark: Any, sql: str, settings: RunSettings) -> Fetched:
    """The result of ``sql`` as Arrow in one round trip, fetched to the row cap + 1 (or counted to
    ``count_limit``), kept to the row cap and the byte bound."""
    cap = settings.row_cap
    frame = sql_frame(spark, sql)
    table = arrow_of(frame.limit(cap + 1))
    seen = table.num_rows
    exact = seen <= cap
    limit = read_limit(settings)
    if limit is None and not exact:  # count_rows: count on the cluster, up to the limit
        seen = int(arrow_of(frame.limit(settings.count_limit).groupBy().count())[0][0].as_py())
        exact = seen < settings.count_limit
    kept, sized = table.slice(0, cap), False
    if settings.max_result_bytes is not None:
        rows = arrow_rows_within(kept, settings.max_result_bytes)
        if rows < kept.num_rows:
            kept, sized = kept.slice(0, rows), True
            exact = exact and limit is None
    converted = to_frame(kept)
    pandas_frame = converted if converted is not None else kept.to_pandas()
    fetched = fetched_from_table(kept, pandas_frame, seen, exact, size_capped=sized)
    fetched.kept = len(pandas_frame)
    return fetched


def _first_word(sql: str) -> str:
    tokens = lexical.tokens_of(sql, "spark")
    first = next((t for t in tokens if t.text != "("), None)
    return lexical.word(first) if first is not None else ""
