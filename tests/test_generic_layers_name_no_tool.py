"""The generic layers name no tool: a call is shown as its tool describes it.

Outside the database extension (``pi_notebook/database``) and the SQL policy
(``pi_notebook/sql``), no module of the package names the database tool or reads a ``sql``
argument; the exceptions below say why each one still does. An exception that no longer needs
its place fails the test too, so the list only shrinks.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pi_notebook

PACKAGE = Path(pi_notebook.__file__).parent
OWNERS = ("database", "sql")
TOOL = "query_" + "database"  # spelled in two pieces so this file is no hit of its own scan
CODE = "sql"

NAMES_THE_TOOL = {
    "mcp/__init__.py": "its docstring says which tools the MCP server serves",
    "mcp/server.py": "the MCP server of the governed database tools: it serves them by name, "
    "with their annotations, and classifies each statement for the result's annotations",
    "mcp/scopes.py": "the MCP server's scopes: which scope a database call needs is its "
    "statement's SQL verdict",
    "mcp/serve.py": "the command line that serves the database tools says so in its help",
    "approvals/protocol.py": "a Grant's scope is SQL's (operations and tables); its tool "
    "defaults to the database's query tool",
}
READS_SQL = {
    "audit/calls.py": "reads the backend's own records (final_args, query_refused, "
    "capability_mismatch), whose `sql` field is the statement the backend was given",
    "approvals/review.py": "the four-eyes queue keeps requests without their tool's view; its "
    "frame shows a queued statement",
    "notebook/review_magic.py": "%pi_review --sql edits a queued request's statement",
    "notebook/review_board.py": "the reviewer's card shows a queued request's statement (the "
    "queue keeps no view)",
    "mcp/server.py": "the database MCP server classifies the statement a call ran, for the "
    "result's annotations",
    "readers/sqlite_child.py": "the SQLite reader process takes the statement it reads in its "
    "request (a reader's query, not a tool's arguments)",
}


def _modules() -> dict[str, Path]:
    out: dict[str, Path] = {}
    for path in sorted(PACKAGE.rglob("*.py")):
        rel = path.relative_to(PACKAGE).as_posix()
        if rel.split("/", 1)[0] not in OWNERS:
            out[rel] = path
    return out


def _reads_sql(tree: ast.AST) -> list[int]:
    """Lines with ``x["sql"]``, ``x.get("sql")`` or ``x.pop("sql")``."""
    lines: list[int] = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Subscript) and isinstance(node.slice, ast.Constant):
            if node.slice.value == CODE:
                lines.append(node.lineno)
        elif (
            isinstance(node, ast.Call)
            and isinstance(node.func, ast.Attribute)
            and node.func.attr in ("get", "pop")
            and node.args
            and isinstance(node.args[0], ast.Constant)
            and node.args[0].value == CODE
        ):
            lines.append(node.lineno)
    return lines


def test_no_generic_module_names_the_database_tool() -> None:
    named = {rel for rel, path in _modules().items() if TOOL in path.read_text("utf-8")}
    assert sorted(named - set(NAMES_THE_TOOL)) == [], "show the call through its CallView"
    assert sorted(set(NAMES_THE_TOOL) - named) == [], "mended: drop it from NAMES_THE_TOOL"


def test_no_generic_module_reads_a_sql_argument() -> None:
    reading = {
        rel: lines
        for rel, path in _modules().items()
        if (lines := _reads_sql(ast.parse(path.read_text("utf-8"))))
    }
    assert {r: v for r, v in reading.items() if r not in READS_SQL} == {}, (
        "read the call's code from its tool's CallView"
    )
    assert sorted(set(READS_SQL) - set(reading)) == [], "mended: drop it from READS_SQL"


def test_the_scan_sees_what_it_looks_for() -> None:
    """The scan itself: each form it forbids is found."""
    source = 'a["sql"]\nb.get("sql")\nc.pop("sql", None)\nd["url"]\ne.get("url")\n'
    assert _reads_sql(ast.parse(source)) == [1, 2, 3]
