"""The SQLAlchemy backend of ``query_database``: final policy check, engine read-only modes,
cancellation through the driver, capped streaming reads, the write preview and its row
bounds, and result shaping."""

from pi_notebook.audit.durable import AuditSink
from pi_notebook.sql.backend.arrow import ARROW_MIN_CAP
from pi_notebook.sql.backend.backend import (
    AUDIT_UNAVAILABLE,
    DatabaseBackend,
    ProgressCallback,
    query_args_hash,
)
from pi_notebook.sql.backend.engines import (
    CONNECT_TIMEOUT_S,
    create_backend_engine,
    sqlglot_dialect,
    supported_backend,
)
from pi_notebook.sql.backend.errors import (
    QueryAborted,
    QueryError,
    QueryRefused,
    QueryTimeout,
    describe_error,
    safe_url,
    scrub,
)
from pi_notebook.sql.backend.progress import JobProgress
from pi_notebook.sql.backend.results import QueryOutcome, format_value, render_preview

__all__ = [
    "ARROW_MIN_CAP",
    "AUDIT_UNAVAILABLE",
    "CONNECT_TIMEOUT_S",
    "AuditSink",
    "DatabaseBackend",
    "JobProgress",
    "ProgressCallback",
    "QueryAborted",
    "QueryError",
    "QueryOutcome",
    "QueryRefused",
    "QueryTimeout",
    "create_backend_engine",
    "describe_error",
    "format_value",
    "query_args_hash",
    "render_preview",
    "safe_url",
    "scrub",
    "sqlglot_dialect",
    "supported_backend",
]
