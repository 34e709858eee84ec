"""Reading a query's result into Arrow and pandas: the one reader protocol and its readers.

This package sits on the ground floor: it imports nothing of ``pi_notebook``, so the audit
and the database backend both read through it. :mod:`.protocol` holds the protocol
(:class:`ArrowReader`: a :class:`Query` within :class:`ReadLimits` gives an
:class:`ArrowRead`, or ``None`` for the DB-API path); :mod:`.frames` turns a table into the
DataFrame the DB-API path gives; :mod:`.batches` keeps a stream of batches within the limits;
:mod:`.sqlite`, :mod:`.postgres` and :mod:`.duckdb` are the readers; :mod:`.pandas_internals`
holds the package's only uses of pandas' private API, each behind its self-check.
"""

from .batches import arrow_rows_within, take_batches
from .frames import column_labels, to_frame
from .protocol import (
    QUERY_TEXT,
    ArrowRead,
    ArrowReader,
    CancelHooks,
    ProgressSteps,
    Query,
    ReadLimits,
    arrow_available,
)

__all__ = [
    "QUERY_TEXT",
    "ArrowRead",
    "ArrowReader",
    "CancelHooks",
    "ProgressSteps",
    "Query",
    "ReadLimits",
    "arrow_available",
    "arrow_rows_within",
    "column_labels",
    "take_batches",
    "to_frame",
]
