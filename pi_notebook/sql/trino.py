"""Trino's policy table. Trino's own read-only wall is server-side (``access-control.name=
read-only`` or file-based rules), which this tool cannot see, so the classifier asks for:

* the JMX catalog (``jmx.current.*``: the JVMs' system properties and arguments) and
  ``system.runtime.*`` (other users' queries and their text, nodes, tasks, transactions) and
  ``system.metadata.*`` (catalog properties, materialized views' storage, analyze and
  session properties): the cluster's own state, not the data;
* query passthroughs and other connector table functions (``TABLE(system.query(...))``,
  ``TABLE(pg.system.raw_query(...))``): a statement in the remote database's own language
  that this classifier cannot check; only ``exclude_columns`` and ``sequence`` are plain;
* ``CALL`` (kill a query, flush caches, register tables), ``SET``/``RESET SESSION``,
  ``PREPARE``/``EXECUTE``/``DEALLOCATE``, ``USE``, transactions, DML and DDL (generic rules).

``EXPLAIN ANALYZE`` runs its statement, which must then be a read. Time travel
(``FOR VERSION AS OF``) and ``MATCH_RECOGNIZE`` only shape a read.
"""

from __future__ import annotations

from sqlglot import exp

from pi_notebook.sql.dialect_rules import DialectRules
from pi_notebook.sql.findings import Finding, writes

__all__ = ["RULES", "SYSTEM_SCHEMAS"]

SYSTEM_SCHEMAS: frozenset[str] = frozenset({"runtime", "metadata"})
"""Schemas of the ``system`` catalog that show the cluster's state rather than data."""

_PASSTHROUGH = frozenset({"query", "raw_query"})


def _table_finding(table: exp.Table) -> Finding | None:
    if not isinstance(table.this, exp.Identifier):
        return None
    catalog, schema = table.catalog.lower(), table.db.lower()
    # JMX tables are MBean names (java.lang:type=Runtime), whatever the catalog is called.
    if catalog == "jmx" or ":" in table.name:
        text = table.sql(dialect="trino")[:80]
        return writes(f"{text} shows the cluster's JVMs (system properties, arguments)")
    if schema in SYSTEM_SCHEMAS and catalog in ("", "system"):
        text = table.sql(dialect="trino")[:80]
        return writes(
            f"{text} shows the cluster's state (other users' queries, nodes, "
            "catalog and session properties), not data"
        )
    return None


def _call_finding(node: exp.Func) -> Finding | None:
    if not isinstance(node, exp.Anonymous):
        return None
    parent = node.parent
    name = node.name.lower()
    if isinstance(parent, exp.Dot) and parent.expression is node and name in _PASSTHROUGH:
        qualifier = parent.this.sql(dialect="trino")[:60]
        return writes(
            f"{qualifier}.{name}(...) passes a statement the tool "
            "cannot check to the connector's own database",
            when_executed=False,
        )
    return None


RULES = DialectRules(
    pure_nodes=frozenset({exp.Version, exp.MatchRecognize, exp.MatchRecognizeMeasure}),
    table_finding=_table_finding,
    call_finding=_call_finding,
    explain_options=frozenset({"FORMAT", "TYPE"}),
)
"""Trino's hooks into the generic checks."""
