"""``query_database`` itself: its parameters and its ``execute``.

``execute`` hands the final SQL to the backend (which makes the last policy decision), keeps
the result DataFrame for the analyst in ``details`` and gives the model a bounded text
preview in ``content``. When the extension has a content policy (data protection), the
preview the model sees comes from it instead.
"""

from __future__ import annotations

from typing import Any, Protocol

from pydantic import BaseModel, Field

from pi_notebook.agent.types import ToolResult
from pi_notebook.ai.messages import TextContent
from pi_notebook.database.content import ContentPolicy, ModelContent
from pi_notebook.database.gate import audit_of
from pi_notebook.database.names import TOOL_NAME
from pi_notebook.database.views import QUERY_LABEL, query_call_view
from pi_notebook.extensions import ExtensionAPI, ToolDefinition, define_tool
from pi_notebook.secrets import safe_url
from pi_notebook.sql.backend import DatabaseBackend, JobProgress

__all__ = [
    "ContentPolicy",
    "ModelContent",
    "QueryDatabaseParams",
    "QuerySettings",
    "make_query_tool",
]


class QueryDatabaseParams(BaseModel):
    """Arguments of ``query_database``."""

    sql: str = Field(min_length=1, description="Exactly one SQL statement.")
    count_rows: bool = Field(
        default=False,
        description=(
            "Count every row of a read that has more rows than the row cap (slower). By "
            "default a read stops just past the cap and reports 'more than N rows'; prefer "
            "SELECT count(*) when only the number matters."
        ),
    )


class QuerySettings(Protocol):
    """What the tool needs of its extension (``DatabaseExtension`` is one)."""

    @property
    def content_policy(self) -> ContentPolicy | None: ...

    def keep_result(self, tool_call_id: str, frame: Any) -> None: ...


class _Updates:
    """The updates of one running query: ``Querying…`` when it does not finish at once (see
    ``backend.run``), then its progress (rows fetched, or a job's stages)."""

    def __init__(self, on_update: Any) -> None:
        self.on_update = on_update

    def querying(self) -> None:
        self.on_update(
            ToolResult(content=[TextContent(text="Querying…")], details={"phase": "query"})
        )

    def fetched(self, rows: int) -> None:
        if isinstance(rows, JobProgress):  # a job that has no rows yet (Spark's stages)
            self.on_update(
                ToolResult(content=[TextContent(text=rows.text())], details=rows.details())
            )
            return
        self.on_update(
            ToolResult(
                content=[TextContent(text=f"Fetched {rows:,} rows…")],
                details={"phase": "fetch", "rows_fetched": rows},
            )
        )


def make_query_tool(
    ext: QuerySettings, backend: DatabaseBackend, pi: ExtensionAPI
) -> ToolDefinition[QueryDatabaseParams]:
    """The ``query_database`` definition bound to ``backend``."""

    async def execute(
        tool_call_id: str, params: QueryDatabaseParams, signal: Any, on_update: Any, ctx: Any
    ) -> ToolResult:
        updates = _Updates(on_update)
        # A session's audit (ctx.audit) comes with its recorder, whose end record holds the
        # outcome (details): the backend then leaves out its query_result (one record per fact).
        in_session = getattr(ctx, "audit", None) is not None
        outcome = await backend.run(
            tool_call_id,
            params.sql,
            signal=signal,
            on_progress=updates.fetched,
            audit=audit_of(pi, ctx),
            count_rows=params.count_rows,
            record_result=not in_session,
            on_slow=updates.querying,
        )
        if outcome.has_rows:
            ext.keep_result(tool_call_id, outcome.dataframe)
        details = outcome.details()
        text = outcome.preview
        if ext.content_policy is not None and outcome.has_rows:
            shown = ext.content_policy.model_content(params.sql, backend.dialect, outcome)
            text = shown.text
            details["protected_columns"] = dict(shown.protected)
        return ToolResult(content=[TextContent(text=text)], details=details)

    return define_tool(
        ToolDefinition(
            name=TOOL_NAME,
            label=QUERY_LABEL,
            description=(
                f"Run one SQL statement ({backend.dialect} dialect) on the connected database "
                "and return the rows. Reads run at once; writes and anything with side effects "
                "need the user's approval."
            ),
            parameters=QueryDatabaseParams,
            execute=execute,
            execution_mode="sequential",
            describe_call=query_call_view,
            prompt_snippet=(
                f"run one SQL statement on the {backend.dialect} database {safe_url(backend.url)}"
            ),
            prompt_guidelines=[
                "query_database: send exactly one SQL statement per call; several statements are refused.",
                "query_database: plain SELECT (and WITH ... SELECT) runs without asking; prefer it.",
                "query_database: INSERT/UPDATE/DELETE, DDL, SET/PRAGMA, file or network access "
                "need the user's approval; say why before asking, and expect a refusal.",
                "query_database: results are capped; use aggregates or LIMIT instead of fetching everything.",
            ],
        )
    )
