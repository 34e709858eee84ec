"""The SQLAlchemy backend of ``query_database``: final policy check, engine read-only modes,
cancellation through the driver, and result shaping."""

from pi_notebook.sql.backend.auditing import AuditSink
from pi_notebook.sql.backend.backend import DatabaseBackend, ProgressCallback, query_args_hash
from pi_notebook.sql.backend.engines import (
    create_backend_engine,
    sqlglot_dialect,
    supported_backend,
)
from pi_notebook.sql.backend.errors import (
    QueryAborted,
    QueryError,
    QueryRefused,
    describe_error,
    safe_url,
    scrub,
)
from pi_notebook.sql.backend.results import QueryOutcome, render_preview

__all__ = [
    "AuditSink",
    "DatabaseBackend",
    "ProgressCallback",
    "QueryAborted",
    "QueryError",
    "QueryOutcome",
    "QueryRefused",
    "create_backend_engine",
    "describe_error",
    "query_args_hash",
    "render_preview",
    "safe_url",
    "scrub",
    "sqlglot_dialect",
    "supported_backend",
]
