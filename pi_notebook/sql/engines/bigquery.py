"""BigQuery through its official client, ``google-cloud-bigquery`` (the ``bigquery`` extra).

The URL is ``bigquery://PROJECT/DATASET``: the project that runs (and pays for) the jobs and
the dataset unqualified tables are looked up in. Two options: ``maximum_bytes_billed=N`` (the
per-job hard cap; :data:`DEFAULT_MAXIMUM_BYTES_BILLED` without it) and
``api_endpoint=http://HOST:PORT`` (an emulator or a proxy); any other is refused. The
credentials are the environment's (Application Default Credentials, or none towards an
``api_endpoint``), never the URL's: no secret reaches the audit.

The policy and statement paths are
:class:`~pi_notebook.sql.engines.direct.DirectBackend`'s (through :mod:`.warehouse_base`);
what is BigQuery's:

* the read-only backstop is the project's, not the tool's: give the credentials IAM roles
  that only read (``roles/bigquery.dataViewer`` and ``roles/bigquery.jobUser``); each job
  carries ``maximum_bytes_billed`` (a job that would bill more fails before it reads) and
  ``job_timeout_ms`` (the tool's statement timeout), standard SQL only;
* the job's id is chosen before it is sent, so Stop and the statement timeout cancel it with
  ``jobs.cancel`` even while it is being inserted. A stopped read returns nothing, even if
  the job ended after all; a cancelled DML job changes nothing (a DML statement is atomic);
* rows come as Arrow record batches of the result's pages (``to_arrow_iterable``, at most
  ``row_cap + 1`` rows asked for with ``max_results``), kept to the row cap and the byte
  bound; the result's row count is BigQuery's ``total_rows``, exact without reading them;
* a read's cost is a dry run (``dry_run=True, use_query_cache=False``):
  ``total_bytes_processed``. Towards an ``api_endpoint`` a dry run of 0 bytes is not taken
  as an estimate (an emulator has no cost model): the estimate says so;
* a write is not tried in a transaction (the tool sends one statement per job, no
  multi-statement transaction): its rows are counted with the derived ``SELECT count(*)``.
"""

from __future__ import annotations

import threading
import uuid
from collections.abc import Callable
from typing import Any, TypeVar

import pandas as pd
from sqlalchemy.engine import URL, make_url

from pi_notebook.sql import lexical
from pi_notebook.sql.backend.errors import ConnectFailed, QueryAborted
from pi_notebook.sql.backend.fetch import Fetched, RunSettings, read_limit
from pi_notebook.sql.backend.readonly import RunKind
from pi_notebook.sql.engines.base import EngineInfo, ReadEstimate
from pi_notebook.sql.engines.direct import Running, short
from pi_notebook.sql.engines.rows import take_arrow
from pi_notebook.sql.engines.warehouse_base import WarehouseBackend

__all__ = [
    "DEFAULT_MAXIMUM_BYTES_BILLED",
    "ENGINE",
    "BigQueryBackend",
    "BigQuerySchema",
    "BigQueryTarget",
    "bigquery_target",
    "dry_run_estimate",
]

DEFAULT_MAXIMUM_BYTES_BILLED = 100_000_000_000
"""Each job's ``maximum_bytes_billed`` when the URL does not set one: 100 GB."""

ENGINE = EngineInfo(
    engine="bigquery",
    dialect="bigquery",
    url_scheme="bigquery://PROJECT/DATASET",
    schemes=("bigquery",),
    read_only_backstop="the project's: IAM roles that only read (dataViewer and jobUser on "
    "the credentials from the environment, granted by the deployer), and on each job "
    "maximum_bytes_billed (the URL's, 100 GB by default) and job_timeout_ms; the emulator "
    "(bqemulator) has no IAM, no billing and no job timeout, so the tests cannot show them",
    bounds="max_results of row cap + 1 and Arrow pages kept within the byte bound (the rest "
    "never fetched); maximum_bytes_billed and job_timeout_ms on each job",
    cancel="jobs.cancel by the job id chosen before the job is sent; a stopped read returns "
    "nothing, a cancelled DML job changes nothing. The emulator runs each job to its end "
    "before it answers: the tests show the stopped read's answer dropped, not the job stopped",
    write_preview="no transaction is tried (one statement per job): rows counted with the "
    "derived SELECT count(*), else not measured (said so)",
    estimate="a dry run: total_bytes_processed (the emulator's dry run always says 0 bytes: "
    "its estimate says there is none)",
    arrow=True,
    read_path="google-cloud-bigquery's to_arrow_iterable, one DataFrame from the kept pages",
    extra="bigquery",
    modules=("google.cloud.bigquery",),
    tested_against="emulator",
)

_T = TypeVar("_T")
_OPTIONS = frozenset({"api_endpoint", "maximum_bytes_billed"})
_ROW_STARTS = frozenset({"SELECT", "WITH"})
_PAGE_ROWS = 10_000


class BigQueryTarget:
    """What a ``bigquery://`` URL names (see the module docstring)."""

    def __init__(
        self, project: str, dataset: str | None, api_endpoint: str | None, maximum_bytes_billed: int
    ) -> None:
        self.project, self.dataset = project, dataset
        self.api_endpoint, self.maximum_bytes_billed = api_endpoint, maximum_bytes_billed


def bigquery_target(url: str | URL) -> BigQueryTarget:
    """The project, dataset and options of a ``bigquery://PROJECT/DATASET`` URL.

    Raises:
        ValueError: no project, a user or password in the URL, a path deeper than the
            dataset, an option the tool does not accept, or a bad option value.
    """
    url = make_url(url)
    if not url.host:
        raise ValueError("bigquery URL: the project is missing (bigquery://PROJECT/DATASET)")
    if url.username or url.password is not None:
        raise ValueError(
            "bigquery URL: credentials come from the environment (Application "
            "Default Credentials), not the URL"
        )
    unknown = sorted(set(url.query) - _OPTIONS)
    if unknown:
        raise ValueError(
            f"bigquery URL: unknown option(s) {', '.join(unknown)}; accepted: "
            f"{', '.join(sorted(_OPTIONS))}"
        )
    path = [part for part in (url.database or "").split("/") if part]
    if len(path) > 1:
        raise ValueError("bigquery URL: the path is /DATASET at most")

    def option(key: str) -> str | None:
        value = url.query.get(key)
        return value[-1] if isinstance(value, tuple) else value

    endpoint = option("api_endpoint")
    if endpoint is not None and not endpoint.startswith(("http://", "https://")):
        raise ValueError("bigquery URL: api_endpoint must be an http:// or https:// URL")
    cap = option("maximum_bytes_billed")
    if cap is not None and not (cap.isdigit() and int(cap) > 0):
        raise ValueError("bigquery URL: maximum_bytes_billed must be a positive integer")
    return BigQueryTarget(
        url.host,
        path[0] if path else None,
        endpoint,
        int(cap) if cap is not None else DEFAULT_MAXIMUM_BYTES_BILLED,
    )


class _Client:
    """The backend's one ``bigquery.Client``, made lazily on the worker thread."""

    def __init__(self, target: BigQueryTarget) -> None:
        self.target = target
        self._lock = threading.Lock()
        self._client: Any = None

    def client(self) -> Any:
        with self._lock:
            if self._client is None:
                from google.cloud import bigquery

                options: dict[str, Any] = {}
                if self.target.api_endpoint is not None:
                    from google.auth.credentials import AnonymousCredentials

                    options = {
                        "client_options": {"api_endpoint": self.target.api_endpoint},
                        "credentials": AnonymousCredentials(),
                    }
                try:
                    self._client = bigquery.Client(project=self.target.project, **options)
                except Exception as exc:  # no Application Default Credentials, mostly
                    raise ConnectFailed(exc) from exc
            return self._client

    def close(self) -> None:
        with self._lock:
            client, self._client = self._client, None
        if client is not None:
            client.close()


TableRow = tuple[str, str, str | None]
ColumnRow = tuple[str, str, str, bool, str | None, bool]


class BigQuerySchema:
    """The tables and columns of the URL's dataset (its ``INFORMATION_SCHEMA``), as plain rows
    for the database extension's schema cache."""

    dialect = "bigquery"

    def __init__(self, backend: BigQueryBackend) -> None:
        self._backend = backend
        self.url = backend.url

    def catalog(self) -> tuple[list[TableRow], list[ColumnRow]]:
        """Tables ``(name, kind, None)`` and columns ``(table, name, type, nullable, None,
        False)`` of the dataset (blocking); none without a dataset in the URL."""
        target = self._backend.target
        if target.dataset is None:
            return [], []
        where = f"`{target.project}.{target.dataset}`.INFORMATION_SCHEMA"
        read = self._backend.plain_read
        tables: list[TableRow] = [
            (str(name), "view" if "VIEW" in str(kind).upper() else "table", None)
            for name, kind in read(
                f"SELECT table_name, table_type FROM {where}.TABLES ORDER BY table_name"
            )
        ]
        columns: list[ColumnRow] = [
            (str(table), str(name), str(type_), str(nullable).upper() == "YES", None, False)
            for table, name, type_, nullable in read(
                "SELECT table_name, column_name, data_type, is_nullable FROM "
                f"{where}.COLUMNS ORDER BY table_name, ordinal_position"
            )
        ]
        return tables, columns


class BigQueryBackend(WarehouseBackend):
    """``query_database``'s backend for BigQuery (see the module docstring)."""

    backend = "bigquery"
    dialect = "bigquery"

    no_transaction = (
        "BigQuery's write is not tried in a transaction here (the tool sends "
        "one statement per job, no multi-statement transaction)"
    )

    def __init__(self, url: str | URL, *, statement_timeout_s: float = 30, **options: Any) -> None:
        known = {k: v for k, v in options.items() if k in _BACKEND_OPTIONS}
        super().__init__(url, statement_timeout_s=statement_timeout_s, **known)
        self.target = bigquery_target(self.url)
        self.timeout_ms = max(1, round(statement_timeout_s * 1000))
        self.client = _Client(self.target)
        self.schema_source = BigQuerySchema(self)

    def close(self) -> None:
        self.client.close()

    def job_config(self, *, dry_run: bool = False) -> Any:
        """The ``QueryJobConfig`` of each job: standard SQL, the URL's dataset as default,
        ``maximum_bytes_billed`` and ``job_timeout_ms``; a dry run also skips the cache."""
        from google.cloud import bigquery

        target = self.target
        config = bigquery.QueryJobConfig(
            use_legacy_sql=False,
            maximum_bytes_billed=target.maximum_bytes_billed,
            job_timeout_ms=self.timeout_ms,
            labels={"client": "pi_notebook"},
        )
        if target.dataset is not None:
            config.default_dataset = f"{target.project}.{target.dataset}"
        if dry_run:
            config.dry_run, config.use_query_cache = True, False
        return config

    def plain_read(self, sql: str) -> list[tuple[Any, ...]]:
        """The rows of a small metadata read, outside the policy path (the schema cache's)."""
        job = self.client.client().query(sql, job_config=self.job_config())
        return [
            tuple(row.values()) for row in job.result(timeout=self.settings.statement_timeout_s)
        ]

    def _run(
        self,
        sql: str,
        canceller: Any,
        consume: Callable[[Any], _T],
        *,
        read: bool = True,
        max_results: int | None = None,
    ) -> _T:
        """Send ``sql`` as a job and ``consume`` its job and rows, all in the statement's
        cancel window. A read stopped (Stop, the statement timeout) returns nothing, even
        when the job ended after all (an emulator that runs each job to its end)."""
        client = self.client.client()
        job_id = f"pi_notebook_{uuid.uuid4().hex}"

        def cancel() -> None:
            client.cancel_job(job_id, project=self.target.project)

        with Running(canceller, cancel):
            # Not retried with a new id: a failed job (a write) is reported, not repeated.
            job = client.query(sql, job_config=self.job_config(), job_id=job_id, job_retry=None)
            rows = job.result(
                max_results=max_results,
                page_size=_PAGE_ROWS,
                timeout=self.settings.statement_timeout_s,
            )
            result = consume((job, rows))
        if read and canceller.reason is not None:
            raise QueryAborted("stopped while it ran")
        return result

    def _execute(
        self,
        kind: RunKind,
        sql: str,
        settings: RunSettings,
        canceller: Any,
        progress: Callable[[int], None] | None,
        counted: int | None = None,
    ) -> Fetched:
        def take(done: tuple[Any, Any]) -> Fetched:
            job, rows = done
            if kind == "write" or job.statement_type not in (None, "SELECT"):
                return Fetched(
                    columns=[], row_count=int(job.num_dml_affected_rows or 0), has_rows=False
                )
            fetched = take_arrow(
                rows.to_arrow_iterable(), lambda: _columns(rows), settings, progress
            )
            total = rows.total_rows
            if total is not None:  # BigQuery counts the result: exact without reading it
                fetched.row_count, fetched.row_count_exact = int(total), True
                fetched.truncated = int(total) > (fetched.kept or 0)
            return fetched

        return self._run(
            sql, canceller, take, read=kind == "read", max_results=read_limit(settings)
        )

    def _read_frame(self, sql: str, canceller: Any) -> pd.DataFrame:
        return self._run(
            sql, canceller, lambda done: done[1].to_arrow(create_bqstorage_client=False).to_pandas()
        )

    def _estimate(
        self, sql: str, *, canceller: Any, progress: Callable[[int], None] | None = None
    ) -> ReadEstimate:
        if _first_word(sql) not in _ROW_STARTS:
            return ReadEstimate(
                rows=None,
                bytes=None,
                source=f"no estimate for {_first_word(sql) or 'this'} statements",
            )
        client = self.client.client()
        try:
            with Running(canceller, lambda: None):
                job = client.query(sql, job_config=self.job_config(dry_run=True))
        except Exception as exc:
            if canceller.reason is not None:
                raise
            return ReadEstimate(
                rows=None,
                bytes=None,
                source="BigQuery dry run failed, so "
                f"the read runs as without a budget: {short(exc)}",
            )
        return dry_run_estimate(job.total_bytes_processed, self.target.api_endpoint)


_BACKEND_OPTIONS = frozenset(
    {
        "row_cap",
        "approvals",
        "audit",
        "count_limit",
        "progress_every",
        "tool_name",
        "max_result_bytes",
    }
)


def dry_run_estimate(total_bytes_processed: int | None, api_endpoint: str | None) -> ReadEstimate:
    """The estimate in a dry run's ``total_bytes_processed``. Towards an ``api_endpoint`` (an
    emulator or a proxy) 0 bytes is no estimate: an emulator has no cost model."""
    if total_bytes_processed is None:
        return ReadEstimate(
            rows=None, bytes=None, source="BigQuery dry run gave no total_bytes_processed"
        )
    if total_bytes_processed == 0 and api_endpoint is not None:
        return ReadEstimate(
            rows=None,
            bytes=None,
            source="BigQuery dry run at "
            f"{api_endpoint} said 0 bytes: an emulator has no cost model, so "
            "the read runs as without a budget (maximum_bytes_billed holds)",
        )
    return ReadEstimate(
        rows=None,
        bytes=int(total_bytes_processed),
        source="BigQuery dry run: total_bytes_processed",
    )


def _columns(rows: Any) -> list[str]:
    return [str(field.name) for field in rows.schema or ()]


def _first_word(sql: str) -> str:
    tokens = lexical.tokens_of(sql, "bigquery")
    first = next((t for t in tokens if t.text != "("), None)
    return lexical.word(first) if first is not None else ""
