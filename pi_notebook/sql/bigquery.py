"""BigQuery's policy table. BigQuery's own walls are the project's IAM roles and each job's
``maximum_bytes_billed`` and timeout (set by :mod:`pi_notebook.sql.engines.bigquery`); none of
them stops a write the credentials may make, so the classifier asks for:

* scripting (``DECLARE``, ``SET``, ``EXECUTE IMMEDIATE``, ``CALL``; a ``BEGIN ... END`` block
  holds several statements and is refused as stacked), DML, DDL (``CREATE MODEL`` trains a
  model), ``LOAD DATA``, transactions (generic rules);
* ``EXTERNAL_QUERY`` (a statement run on a Cloud SQL or Spanner database, in its own
  language), ``ML.*``/``AI.*`` and other qualified calls (models, remote functions, UDFs);
* ``INFORMATION_SCHEMA.JOBS*`` and ``SESSIONS*`` (every user's queries with their text).

``EXPORT DATA`` writes query results outside BigQuery (Cloud Storage, Bigtable, Pub/Sub):
refused. Time travel (``FOR SYSTEM_TIME AS OF``) only shapes a read. BigQuery has no
``EXPLAIN``, ``DESCRIBE`` or ``SHOW``: they ask (the server would refuse them anyway).
"""

from __future__ import annotations

from sqlglot import exp

from pi_notebook.sql.dialect_rules import DialectRules
from pi_notebook.sql.findings import Finding, writes

__all__ = ["ACTIVITY_VIEWS", "RULES"]

ACTIVITY_VIEWS: tuple[str, ...] = ("jobs", "sessions")
"""Prefixes of ``INFORMATION_SCHEMA`` views that list every user's jobs and sessions."""

_FEDERATED = frozenset({"external_query"})


def _table_finding(table: exp.Table) -> Finding | None:
    # A back-quoted name may hold dots: `region-us.INFORMATION_SCHEMA.JOBS`.
    pieces = [piece.lower() for part in table.parts for piece in part.name.split(".")]
    if "information_schema" in pieces[:-1] and pieces[-1].startswith(ACTIVITY_VIEWS):
        text = ".".join(part.name for part in table.parts)[:80]
        return writes(f"{text} lists every user's jobs or sessions with their query text")
    return None


def _call_finding(node: exp.Func) -> Finding | None:
    if isinstance(node, exp.Anonymous) and node.name.lower() in _FEDERATED:
        return writes(
            "EXTERNAL_QUERY runs a statement the tool cannot check on another database",
            when_executed=False,
        )
    return None


RULES = DialectRules(
    pure_nodes=frozenset({exp.Version}),
    table_finding=_table_finding,
    call_finding=_call_finding,
    has_explain=False,
    has_show=False,
    describe=False,
)
"""BigQuery's hooks into the generic checks."""
