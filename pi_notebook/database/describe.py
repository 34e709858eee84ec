"""Schema context for the model: the ``describe_database`` tool and the system-prompt summary.

Both are registered by the database extension on the public API (a tool, a
``before_agent_start`` handler and a ``tool_result`` handler), as a user could have written
them. ``describe_database`` is a read of the catalog: it needs no approval and shows no row of
data. The summary goes into the system prompt only within a size budget, richest form first
(every column and the descriptions), then all columns, then only key columns, then only table
names; it always ends with a pointer to ``describe_database`` for the rest.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any

import pandas as pd
import sqlglot
from pydantic import BaseModel, Field
from sqlglot import exp

from pi_notebook.agent.types import ToolResult
from pi_notebook.ai.messages import TextContent
from pi_notebook.extensions import ExtensionAPI, ToolDefinition, define_tool

from .names import DESCRIBE_TOOL
from .schema import SchemaCache, SchemaInfo, TableInfo, matching_tables
from .semantic import SemanticLayer
from .views import DESCRIBE_LABEL

if TYPE_CHECKING:
    from .policy import DataPolicy

__all__ = [
    "DESCRIBE_CHARS",
    "DESCRIBE_TOOL",
    "DescribeDatabaseParams",
    "ProtectedLookup",
    "changes_schema",
    "describe_frame",
    "describe_text",
    "make_describe_tool",
    "register_schema_context",
    "schema_summary",
]

log = logging.getLogger(__name__)

DESCRIBE_CHARS = 12_000
"""Budget of one ``describe_database`` answer; tables past it are named, not described."""

ProtectedLookup = Callable[[str, str], str | None]
"""``(table, column) -> action`` of the data policy (``mask``, ``hash``, ``drop``) or None."""

_DML = (exp.Select, exp.Insert, exp.Update, exp.Delete, exp.Merge)


class DescribeDatabaseParams(BaseModel):
    """Arguments of ``describe_database``."""

    tables: list[str] | None = Field(
        default=None, description="Tables or views to describe; omit to describe all of them."
    )


def _no_policy(_table: str, _column: str) -> str | None:
    return None


def _short(text: str | None, limit: int = 160) -> str | None:
    if not text:
        return None
    text = " ".join(text.split())
    return text if len(text) <= limit else text[: limit - 1] + "…"


def _notes(*parts: str | None) -> str:
    kept = [p for p in parts if p]
    return ("; ".join(dict.fromkeys(kept))) if kept else ""


def _table_about(table: TableInfo, semantic: SemanticLayer | None, limit: int) -> str:
    described = semantic.table(table.name) if semantic is not None else None
    return _notes(_short(table.comment, limit), _short(described and described.description, limit))


def _column_about(table: TableInfo, column: str, semantic: SemanticLayer | None) -> str:
    comment = table.column(column)
    described = semantic.column(table.name, column) if semantic is not None else None
    return _notes(_short(comment and comment.comment, 300), _short(described, 300))


def _table_block(
    table: TableInfo, semantic: SemanticLayer | None, protected: ProtectedLookup
) -> str:
    about = _table_about(table, semantic, 400)
    lines = [f"{table.name} ({table.kind})" + (f": {about}" if about else "")]
    for column in table.columns:
        marks = [column.type or "?"]
        if column.name in table.primary_key:
            marks.append("PRIMARY KEY")
        if not column.nullable and column.name not in table.primary_key:
            marks.append("NOT NULL")
        fk = table.foreign_key_of(column.name)
        if fk is not None:
            marks.append(f"-> {fk.referred_table}({', '.join(fk.referred_columns)})")
        action = protected(table.name, column.name)
        if action is not None:
            marks.append(f"[protected: {_ACTION_WORDS.get(action, action)}]")
        note = _column_about(table, column.name, semantic)
        lines.append(f"  - {column.name} {' '.join(marks)}" + (f": {note}" if note else ""))
    return "\n".join(lines)


_ACTION_WORDS = {"mask": "values masked", "hash": "values hashed", "drop": "values dropped"}


def describe_text(
    schema: SchemaInfo,
    tables: Sequence[TableInfo],
    *,
    semantic: SemanticLayer | None = None,
    protected: ProtectedLookup = _no_policy,
    unknown: Sequence[str] = (),
    whole: bool = True,
    max_chars: int = DESCRIBE_CHARS,
) -> str:
    """The model's view of ``tables``: columns, types, keys, comments, descriptions, policy
    marks, then (for the whole database) the glossary, and the matching example queries."""
    head = f"{schema.dialect} database, {len(schema.tables)} tables and views"
    if semantic is not None and semantic.description:
        head += f": {_short(semantic.description, 400)}"
    parts = [head.rstrip(".") + "."]
    if unknown:
        known = ", ".join(t.name for t in schema.tables[:60]) or "none"
        parts.append(f"Unknown tables: {', '.join(unknown)}. Known: {known}.")
    used = len(parts[0]) + sum(len(p) for p in parts[1:])
    left_out: list[str] = []
    for table in tables:
        block = _table_block(table, semantic, protected)
        if used + len(block) > max_chars:
            left_out.append(table.name)
            continue
        parts.append(block)
        used += len(block) + 2
    if left_out:
        parts.append(
            f"Not shown (answer budget): {', '.join(left_out)}. Ask for them by name: "
            f"{DESCRIBE_TOOL}(tables=[...])."
        )
    if schema.truncated:
        parts.append("The database has more tables than were read; ask for others by name.")
    if semantic is not None:
        if whole and semantic.glossary:
            parts.append(
                "Glossary:\n" + "\n".join(f"- {k}: {v}" for k, v in semantic.glossary.items())
            )
        examples = semantic.examples_for([] if whole else [t.name for t in tables])[:8]
        if examples:
            parts.append(
                "Example queries:\n"
                + "\n".join(f"- {e.question}\n  {' '.join(e.sql.split())}" for e in examples)
            )
    return "\n\n".join(parts)


def describe_frame(
    tables: Sequence[TableInfo],
    *,
    semantic: SemanticLayer | None = None,
    protected: ProtectedLookup = _no_policy,
) -> pd.DataFrame:
    """One row per column, for the analyst (``details["dataframe"]``)."""
    rows: list[dict[str, Any]] = []
    for table in tables:
        for column in table.columns:
            fk = table.foreign_key_of(column.name)
            rows.append(
                {
                    "table": table.name,
                    "kind": table.kind,
                    "column": column.name,
                    "type": column.type,
                    "nullable": column.nullable,
                    "primary_key": column.name in table.primary_key,
                    "references": f"{fk.referred_table}({', '.join(fk.referred_columns)})"
                    if fk
                    else None,
                    "comment": column.comment,
                    "description": semantic.column(table.name, column.name) if semantic else None,
                    "protection": protected(table.name, column.name),
                }
            )
    columns = [
        "table",
        "kind",
        "column",
        "type",
        "nullable",
        "primary_key",
        "references",
        "comment",
        "description",
        "protection",
    ]
    return pd.DataFrame(rows, columns=columns)


def _summary_line(table: TableInfo, level: str, semantic: SemanticLayer | None) -> str:
    keys: list[str] = []
    for column in table.columns:
        fk = table.foreign_key_of(column.name)
        if column.name in table.primary_key:
            keys.append(f"{column.name} PK")
        elif fk is not None:
            keys.append(f"{column.name} -> {fk.referred_table}")
        elif level != "keys":
            keys.append(column.name)
    hidden = len(table.columns) - len(keys)
    if hidden > 0:
        keys.append(f"+{hidden} more")
    kind = " (view)" if table.kind == "view" else ""
    line = f"- {table.name}{kind}({', '.join(keys)})"
    if level == "full":
        about = _table_about(table, semantic, 120)
        if about:
            line += f": {about}"
    return line


def schema_summary(
    schema: SchemaInfo, *, semantic: SemanticLayer | None = None, budget: int = 2_000
) -> str:
    """A compact schema summary within ``budget`` characters: the richest form that fits
    (descriptions, all columns, key columns, table names). The header and the pointer to
    ``describe_database`` are always there, so a budget under ~150 characters is exceeded."""
    views = sum(t.kind == "view" for t in schema.tables)
    head = f"Database ({schema.dialect}): {len(schema.tables) - views} tables, {views} views."
    if semantic is not None and semantic.description:
        head = f"{head} {_short(semantic.description, 200)}"
    pointer = (
        f"Call {DESCRIBE_TOOL} for column types, comments, examples and anything not listed here."
    )
    fixed = len(head) + len(pointer) + 2
    body: list[str] | None = None
    for level in ("full", "columns", "keys"):
        lines = [_summary_line(t, level, semantic) for t in schema.tables]
        if fixed + sum(len(line) + 1 for line in lines) <= budget:
            body = lines
            break
    if body is None:  # only names fit, perhaps not even all of them
        names: list[str] = []
        used = fixed + len("Tables: ")
        for table in schema.tables:
            if used + len(table.name) + 2 > budget - 20:
                break
            names.append(table.name)
            used += len(table.name) + 2
        rest = len(schema.tables) - len(names)
        if names:
            body = ["Tables: " + ", ".join(names) + (f", and {rest} more" if rest else "")]
        else:
            body = [f"{rest} tables; their names do not fit here."]
    parts = [head, *body]
    if semantic is not None and semantic.glossary:
        glossary = "Glossary: " + "; ".join(
            f"{k}: {_short(v, 120)}" for k, v in semantic.glossary.items()
        )
        if sum(len(p) + 1 for p in parts) + len(glossary) + len(pointer) + 1 <= budget:
            parts.append(glossary)
    parts.append(pointer)
    return "\n".join(parts)


def changes_schema(sql: str, dialect: str) -> bool:
    """True unless ``sql`` is plainly a query or DML (so the schema may have changed)."""
    try:
        statements = [s for s in sqlglot.parse(sql, read=dialect) if s is not None]
    except Exception:  # unparseable: assume it might have
        return True
    return not statements or not all(isinstance(s, _DML) for s in statements)


def make_describe_tool(
    cache: SchemaCache,
    *,
    semantic: SemanticLayer | None = None,
    protected: ProtectedLookup = _no_policy,
) -> ToolDefinition[DescribeDatabaseParams]:
    """The ``describe_database`` definition reading ``cache``."""

    async def execute(
        tool_call_id: str, params: DescribeDatabaseParams, signal: Any, on_update: Any, ctx: Any
    ) -> ToolResult:
        schema = await cache.get(signal=signal)
        whole = not params.tables
        if whole:
            tables, unknown = list(schema.tables), []
        else:
            tables, unknown = matching_tables(schema, params.tables or [])
        text = describe_text(
            schema, tables, semantic=semantic, protected=protected, unknown=unknown, whole=whole
        )
        details: dict[str, Any] = {
            "dataframe": describe_frame(tables, semantic=semantic, protected=protected),
            "tables": [t.name for t in tables],
            "unknown": list(unknown),
        }
        if semantic is not None:
            details["semantic_warnings"] = semantic.warnings(schema)
        return ToolResult(content=[TextContent(text=text)], details=details)

    return define_tool(
        ToolDefinition(
            name=DESCRIBE_TOOL,
            label=DESCRIBE_LABEL,
            description=(
                "Describe the connected database: tables and views, columns with types, primary "
                "and foreign keys, comments and descriptions, a glossary and example queries. "
                "Pass table names to describe only those. Shows no data."
            ),
            parameters=DescribeDatabaseParams,
            execute=execute,
            prompt_snippet="tables, columns, types, keys and descriptions of the database",
            prompt_guidelines=[
                f"{DESCRIBE_TOOL}: call it before writing SQL against tables you have not seen.",
            ],
        )
    )


def register_schema_context(
    pi: ExtensionAPI,
    cache: SchemaCache,
    *,
    query_tool: str,
    semantic: SemanticLayer | None = None,
    policy: DataPolicy | None = None,
    budget: int = 2_000,
) -> None:
    """Register ``describe_database``, the system-prompt summary (``before_agent_start``) and
    the cache invalidation after an approved DDL through ``query_tool`` (``tool_result``).
    ``policy`` marks protected columns in the descriptions."""
    protected = policy.action_for if policy is not None else _no_policy
    pi.register_tool(make_describe_tool(cache, semantic=semantic, protected=protected))

    async def add_summary(event: Any, ctx: Any) -> dict[str, str] | None:
        if budget <= 0:
            return None
        # Raises when the database cannot be read: reported, and the prompt goes on without.
        schema = await cache.get(signal=getattr(ctx, "signal", None))
        summary = schema_summary(schema, semantic=semantic, budget=budget)
        return {"system_prompt": f"{event.system_prompt}\n\n{summary}"}

    def invalidate_after_ddl(event: Any, ctx: Any) -> None:
        if event.tool_name != query_tool or event.is_error:
            return
        details = event.details if isinstance(event.details, dict) else {}
        sql = getattr(event.input, "sql", "")
        if details.get("statement_kind") == "write" and changes_schema(sql, cache.dialect):
            cache.invalidate()

    pi.on("before_agent_start", add_summary)
    pi.on("tool_result", invalidate_after_ddl)
