"""DuckDB's own parser, for the DuckDB statements sqlglot cannot parse.

sqlglot parses nearly all of DuckDB's SQL; what it cannot (a trailing comma after the last
CTE, say) would be refused as unparseable, though DuckDB reads it. For those statements
only, DuckDB's parser is asked: ``SELECT json_serialize_sql(?)`` on an in-memory connection
without external access gives the statement's syntax tree or an error. It parses and nothing
more: no table is bound, no function is looked up or called, and it serializes ``SELECT``
statements only.

The statement is then a read only when all of this holds:

1. DuckDB parses it as exactly one ``SELECT`` statement;
2. every function its tree calls (operators aside) is a built-in, unqualified, on the DuckDB
   allow-list of ``functions.py`` (a listed name, or a name sqlglot maps to a pure class);
3. DuckDB renders the tree back to SQL (``json_deserialize_sql``), that text parses back to
   the very same tree (so it is the same statement, written as DuckDB writes it), and the
   whole classifier, every table, function, size and catalog rule, calls the text a read.

A function the policy refuses makes it a ``reject``, and whatever the classifier finds in the
rendered text stands (a file read asks, a refused call is refused). When DuckDB parses it but
any check cannot be made (a function off the list, a rendering sqlglot cannot parse either, a
tree that changes on the way back), a person is asked: DuckDB reads the statement, the tool
could not. When DuckDB cannot parse it either, nothing is returned and it stays refused.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator
from typing import Any

from sqlglot import exp

from pi_notebook.sql import functions
from pi_notebook.sql.commands import Assessment
from pi_notebook.sql.findings import rejects, writes
from pi_notebook.sql.pragmas import pragma_table_is_read

__all__ = ["READ_REASON", "UNPARSED", "duckdb_assessment", "duckdb_tree", "function_names"]

READ_REASON = (
    "a single read that DuckDB's own parser reads (sqlglot could not), made only of pure "
    "read constructs"
)
UNPARSED = ("the SQL cannot be parsed", "the SQL is nested too deeply to parse")
"""How the classifier's refusals of text sqlglot cannot parse begin."""
_CONFIG: dict[str, str | bool | int | float | list[str]] = {
    "enable_external_access": False,
    "autoinstall_known_extensions": False,
    "autoload_known_extensions": False,
    "lock_configuration": True,
}
_LOCATIONS = frozenset({"query_location", "query_location_length"})


def _ask_duckdb(query: str, value: str) -> str | None:
    """The one text ``query`` returns for the parameter ``value`` on a fresh in-memory
    connection without external access, or ``None`` (no DuckDB, or any failure)."""
    try:
        import duckdb
    except ImportError:
        return None
    try:
        conn = duckdb.connect(":memory:", config=_CONFIG)
        try:
            row = conn.execute(query, [value]).fetchone()
        finally:
            conn.close()
    except Exception:  # any failure of the parser is "cannot say"
        return None
    return row[0] if row and isinstance(row[0], str) else None


def duckdb_tree(sql: str) -> list[dict[str, Any]] | None:
    """The statements DuckDB's parser makes of ``sql`` (their ``node`` trees), or ``None``
    when it cannot parse it, serializes only part of it (not a ``SELECT``), or DuckDB is not
    installed."""
    text = _ask_duckdb("SELECT json_serialize_sql(?::VARCHAR)", sql)
    try:
        parsed = json.loads(text) if text is not None else None
    except ValueError:
        return None
    if not isinstance(parsed, dict) or parsed.get("error") is not False:
        return None
    statements = parsed.get("statements")
    if not isinstance(statements, list):
        return None
    nodes: list[dict[str, Any]] = []
    for statement in statements:
        node = statement.get("node") if isinstance(statement, dict) else None
        if not isinstance(node, dict):
            return None
        nodes.append(node)
    return nodes


def _rendered(tree: dict[str, Any]) -> str | None:
    """DuckDB's own SQL text for one statement's tree, or ``None``."""
    payload = json.dumps({"error": False, "statements": [{"node": tree}]})
    text = _ask_duckdb("SELECT json_deserialize_sql(?::JSON)", payload)
    return text if text is not None and text.strip() else None


def _walk(node: object) -> Iterator[dict[str, Any]]:
    if isinstance(node, dict):
        yield node
        for value in node.values():
            yield from _walk(value)
    elif isinstance(node, list):
        for value in node:
            yield from _walk(value)


def _without_locations(node: object) -> object:
    if isinstance(node, dict):
        return {k: _without_locations(v) for k, v in node.items() if k not in _LOCATIONS}
    if isinstance(node, list):
        return [_without_locations(v) for v in node]
    return node


def function_names(tree: dict[str, Any]) -> list[tuple[str, str, str]]:
    """``(catalog, schema, name)`` of every function call in ``tree`` (table functions and
    window functions included, operators left out)."""
    found: list[tuple[str, str, str]] = []
    for node in _walk(tree):
        name = node.get("function_name")
        if not isinstance(name, str) or node.get("is_operator") is True:
            continue
        found.append((str(node.get("catalog") or ""), str(node.get("schema") or ""), name))
    return found


def _pure_class(name: str) -> bool:
    cls = exp.FUNCTION_BY_NAME.get(name.upper())
    return cls is not None and cls.__name__ in functions.PURE_FUNCTION_CLASSES


_OPERATOR_CHARS = frozenset("+-*/%<>=!~&|^#@")


def _call_problem(catalog: str, schema: str, name: str) -> tuple[str, str] | None:
    """``("reject" | "write", reason)`` when the call is not a known pure built-in."""
    lowered = name.lower()
    if lowered in functions.REJECT_FUNCTIONS["duckdb"]:
        return "reject", f"function {lowered}() reaches outside the database (host files)"
    if catalog or schema:
        return (
            "write",
            f"function {'.'.join(filter(None, (catalog, schema, name)))}() is "
            "user-defined or unknown",
        )
    if lowered in functions.HOST_ACCESS_FUNCTIONS:
        return "write", f"function {lowered}() reads host files, the network or SQL in a string"
    if lowered.startswith("pragma_"):  # a pragma's table: reports only (pragmas.py)
        if pragma_table_is_read("duckdb", lowered.removeprefix("pragma_"), with_arguments=True):
            return None
        return "write", f"{lowered} runs a pragma that may change state"
    if set(name) <= _OPERATOR_CHARS:
        return None  # an operator DuckDB's tree writes as a call (~~ for LIKE)
    if lowered in functions.PURE_FUNCTIONS["duckdb"] or _pure_class(lowered):
        return None
    return "write", f"function {lowered}() is not known to be free of side effects"


def duckdb_assessment(
    sql: str, classify_rendered: Callable[[str], Assessment]
) -> Assessment | None:
    """The assessment of a DuckDB statement sqlglot cannot parse, from DuckDB's own parser
    (see the module docstring), or ``None`` when DuckDB cannot parse it as one ``SELECT``.

    ``classify_rendered(text)`` assesses DuckDB's rendering of the statement with the whole
    classifier (without asking DuckDB again)."""
    trees = duckdb_tree(sql)
    if trees is None or len(trees) != 1:
        return None
    tree = trees[0]
    calls = [_call_problem(*call) for call in function_names(tree)]
    refused = [reason for kind, reason in filter(None, calls) if kind == "reject"]
    if refused:
        return Assessment(tuple(rejects(reason) for reason in dict.fromkeys(refused)))
    unsure = (
        "DuckDB's own parser reads this statement but the classifier cannot (sqlglot "
        "does not parse it)"
    )
    asked = [writes(reason, when_executed=False) for _kind, reason in filter(None, calls)]
    text = _rendered(tree)
    if text is None:
        return Assessment((*asked, writes(unsure, when_executed=False)))
    again = duckdb_tree(text)
    if not again or len(again) != 1 or _without_locations(again[0]) != _without_locations(tree):
        return Assessment(
            (
                *asked,
                writes(f"{unsure}, nor check it in DuckDB's own rendering", when_executed=False),
            )
        )
    inner = classify_rendered(text)
    if any(f.kind == "reject" and f.reason.startswith(UNPARSED) for f in inner.findings):
        return Assessment((*asked, writes(unsure, when_executed=False)))
    if inner.findings or asked:  # what the whole classifier found says it best
        return Assessment(inner.findings or tuple(asked), inner.plannable)
    return Assessment((), inner.plannable, READ_REASON)
