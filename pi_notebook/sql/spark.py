"""Spark SQL's policy table: Spark has no read-only switch, so the classifier is the only wall.

* path reads (``parquet.`/data/x` ``, ``csv.`s3://b/x.csv` ``, any back-quoted name that
  looks like a path or URL) and the file, stream and URL readers (``read_files``,
  ``read_kafka``...) ask: they reach past the catalogue's tables;
* ``reflect``, ``java_method`` and ``try_reflect`` call any Java method on the cluster, and
  ``TRANSFORM ... USING 'script'`` runs a program on every executor: refused;
* ``ADD JAR`` and a function ``USING JAR`` load Java code into the cluster,
  ``INSERT OVERWRITE [LOCAL] DIRECTORY`` writes files outside the catalogue: refused;
* ``${...}`` is substituted into the text before Spark parses it (session variables, and
  ``${env:...}``/``${system:...}`` from the driver's environment): what would run is not what
  was checked, so it is refused;
* ``SET``, ``RESET``, ``CACHE``/``UNCACHE``/``REFRESH``/``CLEAR CACHE``, ``ADD FILE``,
  ``CREATE TEMPORARY VIEW/FUNCTION``, ``MSCK``, ``ANALYZE``, ``USE``: not reads (generic
  rules: any root that is not a query asks);
* time travel (``VERSION AS OF``), ``DISTRIBUTE BY``/``SORT BY``/``CLUSTER BY`` and join
  hints only shape a read. Unknown functions ask (``functions_warehouses.py``).
"""

from __future__ import annotations

from collections.abc import Sequence

from sqlglot import exp
from sqlglot.tokenizer_core import Token, TokenType

from pi_notebook.sql.dialect_rules import DialectRules
from pi_notebook.sql.findings import Finding, rejects, writes

__all__ = ["DATA_SOURCES", "FILE_READERS", "JAVA_CALLS", "RULES"]

DATA_SOURCES: frozenset[str] = frozenset(
    """parquet csv json orc avro text binaryfile delta iceberg hudi jdbc xml image libsvm
    kafka hive noop console rate socket""".split()
)
"""Data source names Spark reads a path with (``parquet.`/path` ``)."""

JAVA_CALLS: frozenset[str] = frozenset({"reflect", "java_method", "try_reflect"})
"""Calls of any static Java method by name: arbitrary code on the cluster."""

FILE_READERS: frozenset[str] = frozenset(
    """read_files read_kafka read_kinesis read_pubsub read_pulsar read_statestore
    read_state_metadata cloud_files_state from_protobuf to_protobuf http_request
    secret list_secrets ai_query ai_gen ai_classify ai_extract ai_summarize ai_translate
    ai_similarity ai_mask ai_fix_grammar ai_analyze_sentiment ai_forecast vector_search""".split()
)
"""Calls that read files, streams, URLs, secrets or call external services."""

_PATH_CHARS = frozenset("/:\\*?")


def _table_finding(table: exp.Table) -> Finding | None:
    parts = table.parts
    last = parts[-1] if parts else None
    if not isinstance(last, exp.Identifier):
        return None
    qualifiers = [part.name.lower() for part in parts[:-1]]
    looks_like_path = last.quoted and any(char in _PATH_CHARS for char in last.name)
    # A data source may be named by its class (org.apache.spark.sql.parquet.`/path`).
    if looks_like_path or len(parts) > 3 or any(q in DATA_SOURCES for q in qualifiers):
        text = table.sql(dialect="spark")[:80]
        return writes(
            f"{text} reads files or a URL by path, not a catalogue table", when_executed=False
        )
    return None


def _call_finding(node: exp.Func) -> Finding | None:
    if not isinstance(node, exp.Anonymous):
        return None
    name = node.name.lower()
    if name in JAVA_CALLS:
        return rejects(f"{name}() calls any Java method on the cluster")
    if name in FILE_READERS:
        return writes(
            f"{name}() reads files, streams, URLs or secrets, or calls a service",
            when_executed=False,
        )
    return None


def _escape_findings(sql: str, tokens: Sequence[Token], words: Sequence[str]) -> list[Finding]:
    found: list[Finding] = []
    if "${" in sql:
        found.append(
            rejects(
                "Spark substitutes ${...} (variables, env:, system:) into the text "
                "before it parses it: what would run is not what was checked"
            )
        )
    first = words[0]
    # sqlglot may keep a multi-word command as one token ("ADD JAR").
    head = " ".join(token.text.upper() for token in tokens[:2]).split()
    if head[:2] in (["ADD", "JAR"], ["ADD", "JARS"]):
        found.append(rejects("ADD JAR loads Java code into the cluster"))
    if first == "INSERT" and "DIRECTORY" in words[:6]:
        found.append(rejects("INSERT OVERWRITE DIRECTORY writes files outside the catalogue"))
    for index, name in enumerate(words[:-1]):
        following = tokens[index + 1]
        if name == "USING" and following.token_type == TokenType.STRING:
            found.append(
                rejects("TRANSFORM/MAP/REDUCE ... USING 'script' runs a program on the cluster")
            )
            break
        if first == "CREATE" and name == "USING" and words[index + 1] in ("JAR", "ARCHIVE"):
            found.append(rejects("a function USING JAR loads Java code into the cluster"))
            break
    return found


_DESCRIBE_WORDS = frozenset(
    "TABLE EXTENDED FORMATTED FUNCTION DATABASE SCHEMA CATALOG QUERY DETAIL HISTORY".split()
)

RULES = DialectRules(
    pure_nodes=frozenset(
        {exp.Version, exp.Distribute, exp.Sort, exp.Cluster, exp.Hint, exp.JoinHint}
    ),
    table_finding=_table_finding,
    call_finding=_call_finding,
    escape_findings=_escape_findings,
    explain_flags=frozenset({"EXTENDED", "CODEGEN", "COST", "FORMATTED"}),
    describe_words=_DESCRIBE_WORDS,
)
"""Spark SQL's hooks into the generic checks."""
