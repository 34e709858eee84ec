"""Snowflake's policy table. Snowflake's own walls (a role with only ``SELECT`` grants,
statement timeouts) are the account's, which this tool does not set yet, so the classifier
asks for:

* stage reads (``FROM @stage/path``, ``@~``, ``@%table``) and file-schema inference: files,
  not tables; ``PUT`` (uploads a file of this machine), ``COPY INTO``, ``LIST``, ``REMOVE``;
* ``seq.NEXTVAL`` (advances a sequence), ``SYSTEM$...`` functions (many cancel queries, abort sessions, change clustering or wait),
  external functions and UDFs (unknown names), ``RESULT_SCAN``;
* ``SNOWFLAKE.ACCOUNT_USAGE`` and the other usage schemas (every user's queries with their
  text, logins, grants);
* ``CALL``, ``EXECUTE IMMEDIATE``/``EXECUTE TASK``, ``USE`` (role, warehouse, database),
  ``ALTER SESSION``, transactions, DML and DDL (generic rules); ``DESCRIBE`` of anything but
  a table, view or schema.

``GET`` writes stage files onto this machine's file system, and ``COPY INTO 's3://...'``
unloads data to a location named in the statement (credentials and all): refused. Time travel
(``AT``/``BEFORE``, ``CHANGES``), ``MATCH_RECOGNIZE`` and ``TABLE(FLATTEN(...))`` only shape a
read.
"""

from __future__ import annotations

from collections.abc import Sequence

from sqlglot import exp
from sqlglot.tokenizer_core import Token, TokenType

from pi_notebook.sql.dialect_rules import DialectRules
from pi_notebook.sql.findings import Finding, rejects, writes

__all__ = ["RULES", "USAGE_SCHEMAS"]

USAGE_SCHEMAS: frozenset[str] = frozenset(
    {
        "account_usage",
        "organization_usage",
        "reader_account_usage",
        "data_sharing_usage",
        "telemetry",
        "trust_center",
    }
)
"""Schemas of the shared ``SNOWFLAKE`` database that show the account's activity."""

_STAGE_READERS = frozenset(
    {
        "infer_schema",
        "result_scan",
        "validate",
        "get_presigned_url",
        "build_scoped_file_url",
        "build_stage_file_url",
    }
)


def _table_finding(table: exp.Table) -> Finding | None:
    text = table.sql(dialect="snowflake")[:80]
    if isinstance(table.this, exp.Var) and table.this.name.startswith("@"):
        return writes(f"{text} reads files in a stage, not a table", when_executed=False)
    if table.db.lower() in USAGE_SCHEMAS or table.catalog.lower() == "snowflake":
        return writes(f"{text} shows the account's activity (every user's queries, logins, grants)")
    return None


def _call_finding(node: exp.Func) -> Finding | None:
    if not isinstance(node, exp.Anonymous):
        return None
    name = node.name.lower()
    if name.startswith("system$"):
        return writes(
            f"{name}() is a system function (many cancel queries, abort sessions, "
            "change clustering or wait)",
            when_executed=False,
        )
    if name in _STAGE_READERS:
        return writes(f"{name}() reads stage files or another query's results", when_executed=False)
    return None


def _escape_findings(sql: str, tokens: Sequence[Token], words: Sequence[str]) -> list[Finding]:
    head = " ".join(token.text.upper() for token in tokens[:1]).split()
    if head[:1] == ["GET"]:
        return [rejects("GET writes stage files onto this machine's file system")]
    for index in range(1, len(tokens)):
        if words[index] == "NEXTVAL" and tokens[index - 1].token_type == TokenType.DOT:
            return [writes("seq.NEXTVAL advances a sequence")]
    if list(words[:2]) == ["COPY", "INTO"] and len(tokens) > 2:
        target = tokens[2]
        if target.token_type == TokenType.STRING:
            return [rejects("COPY INTO a URL unloads data out of the account")]
        if target.text.startswith("@"):
            return [writes("COPY INTO a stage unloads data into files")]
    return []


_PURE_NODES: frozenset[type[exp.Expr]] = frozenset(
    {
        exp.HistoricalData,
        exp.Changes,
        exp.MatchRecognize,
        exp.MatchRecognizeMeasure,
        exp.TableFromRows,
    }
)

RULES = DialectRules(
    pure_nodes=_PURE_NODES,
    table_finding=_table_finding,
    call_finding=_call_finding,
    escape_findings=_escape_findings,
    explain_flags=frozenset({"USING", "TABULAR", "JSON", "TEXT"}),
    describe_words=frozenset({"TABLE", "VIEW", "MATERIALIZED", "SCHEMA", "DATABASE", "EXTERNAL"}),
    describe_kind_required=True,
)
"""Snowflake's hooks into the generic checks."""
