"""The audit log: append-only, hash-chained records of every call, explorable as DataFrames.

``AuditLog`` writes to a SQLAlchemy store (a SQLite file in the data directory by default,
PostgreSQL for a team); ``audit_extension(log)`` records the session's events into it; the
gate and the backend add durable approval and final-argument records through ``commit``
(typed records: ``pi_notebook.audit.records``). ``verify_notebook`` checks a notebook's
stamped outputs against the store.
"""

from . import records
from .chain import VerifyReport
from .encode import to_jsonable
from .frames import decode_payloads
from .log import AuditLog, default_audit_url
from .notebook import NotebookReport, output_digest, verify_notebook
from .recorder import audit_extension, summarise_result
from .records import AuditRecord
from .redact import DEFAULT_PATTERNS, RedactionPattern, Redactor

__all__ = [
    "DEFAULT_PATTERNS",
    "AuditLog",
    "AuditRecord",
    "NotebookReport",
    "RedactionPattern",
    "Redactor",
    "VerifyReport",
    "audit_extension",
    "decode_payloads",
    "default_audit_url",
    "output_digest",
    "records",
    "summarise_result",
    "to_jsonable",
    "verify_notebook",
]
