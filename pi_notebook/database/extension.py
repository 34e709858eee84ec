"""``DatabaseExtension``: the factory that registers ``query_database`` and its gate.

Read-only SQL runs at once. Anything that writes or has a side effect needs the user's approval
(``ui.request_approval``, else ``ctx.ui.confirm``); the decision is committed to the audit and
an approval becomes a one-shot capability for this call id and the canonical hash of the
arguments shown. The backend checks again on the SQL it is about to run (the gate is intent,
the backend is authorisation). A capability dies with its call (``tool_execution_end``).

Results: each call's DataFrame is in its tool result's ``details["dataframe"]`` (so in
``session.messages`` and the ``tool_execution_end`` event), never sent to the model. The
extension object also keeps the last few by call id: ``ext.results[call_id]`` and
``ext.last_dataframe``.
"""

from __future__ import annotations

import os
from collections import OrderedDict
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import pandas as pd

from pi_notebook.ai.messages import TextContent
from pi_notebook.approvals import AuditApprovals, CapabilityStore
from pi_notebook.approvals.review_wait import ReviewSettings, ReviewWaiter
from pi_notebook.database.budget import ReadBudget, install_read_budget
from pi_notebook.database.describe import register_schema_context
from pi_notebook.database.gate import TOOL_NAME, Edit, make_gate
from pi_notebook.database.grants import GrantStore
from pi_notebook.database.guard import install_data_policy
from pi_notebook.database.policy import DataPolicy, load_policy
from pi_notebook.database.schema import SchemaCache
from pi_notebook.database.semantic import load_semantic
from pi_notebook.database.tool import ContentPolicy, QueryDatabaseParams, make_query_tool
from pi_notebook.database.views import call_views
from pi_notebook.extensions import ExtensionAPI
from pi_notebook.sample_db import sample_database_url
from pi_notebook.sql import classify
from pi_notebook.sql.backend import DatabaseBackend
from pi_notebook.sql.backend.roles import RoleFor
from pi_notebook.sql.backend.sizes import DEFAULT_MAX_RESULT_BYTES
from pi_notebook.sql.engines import create_backend, schema_source

__all__ = ["DatabaseExtension", "QueryDatabaseParams", "database_extension", "register"]

ENV_URL = "PI_NOTEBOOK_DATABASE_URL"


class DatabaseExtension:
    """Factory of the database extension (call it with ``pi``), plus the last results.

    Args:
        url: SQLAlchemy URL; ``None`` reads ``PI_NOTEBOOK_DATABASE_URL`` when the factory
            runs, else uses the bundled sample database.
        row_cap: rows kept per result DataFrame.
        max_result_bytes: bytes of values kept per result besides the row cap (default 64 MiB;
            ``None``: rows only); a read that reaches it stops and says so.
        approval_timeout_s: how long the user has to decide; no decision is a denial.
        statement_timeout_s: a statement running longer is cancelled.
        memory_limit_bytes: the most memory a statement may use where the engine runs
            (DuckDB, chDB: their worker process, under an OS cap; SQLite: its heap limit); past it
            the call ends with an error naming the limit and the kernel and its variables
            survive. Default: half the machine's memory, at most 4 GiB.
        capability_ttl_s: how long an approval stays usable before the call executes.
        keep_results: how many DataFrames ``results`` keeps.
        semantic: a semantic file (YAML/JSON path or dict): descriptions, glossary, examples.
        schema_budget_chars: size of the schema summary in the system prompt (0: none).
        schema_ttl_s: the cached schema is read again after this long (None: only after DDL).
        data_policy: protected columns, ``{"customers.email": "mask", "customers.phone":
            "drop"}`` (or ``hash``), or a YAML/JSON file of them: the model never sees their
            values, nor anything computed from them; ``details`` keep them for the user.
        read_budget: ``{"rows": M, "bytes": N}``: a read whose engine estimate passes either
            bound asks a person first (see :mod:`.budget`).
        review: ``{"url": STORE, "reviewers": ["ana", "bo"], "timeout_s": 600}``: every write
            waits for a reviewer's decision in that store (``%pi_review``,
            ``ReviewQueue(STORE).decide``) instead of the local prompt; the requester never
            approves their own request; ``timeout_s`` defaults to ``approval_timeout_s``
            (see :mod:`pi_notebook.approvals.review`).
        role_per_user: PostgreSQL only: each statement runs under ``SET LOCAL ROLE`` to the
            role of whom the call acts for (the notebook's user, or an MCP request's
            subject), so the database's own privileges apply per person; the login may only
            assume the roles granted to it. Refused at start on any other engine.
        role_for: the role of each user: a mapping ``{"ana": "analyst_ana"}`` or a function
            of the user's name (default: the user's name itself).
    """

    def __init__(
        self,
        url: str | None = None,
        *,
        row_cap: int = 10_000,
        approval_timeout_s: float = 30,
        statement_timeout_s: float = 30,
        capability_ttl_s: float = 60,
        keep_results: int = 20,
        semantic: str | Path | dict[str, Any] | None = None,
        schema_budget_chars: int = 2_000,
        schema_ttl_s: float | None = 600,
        data_policy: DataPolicy | Mapping[str, Any] | str | Path | None = None,
        max_result_bytes: int | None = DEFAULT_MAX_RESULT_BYTES,
        read_budget: ReadBudget | Mapping[str, Any] | None = None,
        review: ReviewSettings | Mapping[str, Any] | None = None,
        role_per_user: bool = False,
        role_for: RoleFor | None = None,
        memory_limit_bytes: int | None = None,
    ) -> None:
        self.url = url
        self.row_cap = row_cap
        self.max_result_bytes = max_result_bytes
        self.memory_limit_bytes = memory_limit_bytes
        self.approval_timeout_s = approval_timeout_s
        self.statement_timeout_s = statement_timeout_s
        self.capability_ttl_s = capability_ttl_s
        self.keep_results = keep_results
        self.results: OrderedDict[str, pd.DataFrame] = OrderedDict()
        self.backend: DatabaseBackend | None = None
        self.approvals = AuditApprovals(None, call_views)
        self.grants = GrantStore(None)
        self.edits: dict[str, Edit] = {}
        self.content_policy: ContentPolicy | None = None
        self.semantic = load_semantic(semantic) if semantic is not None else None
        self.schema_budget_chars = schema_budget_chars
        self.schema_ttl_s = schema_ttl_s
        self.schema: SchemaCache | None = None
        self.data_policy = load_policy(data_policy) if data_policy is not None else None
        self.read_budget = ReadBudget.of(read_budget) if read_budget is not None else None
        self.review = ReviewSettings.of(review) if review is not None else None
        self.role_per_user = role_per_user
        self.role_for = role_for

    def keep_result(self, tool_call_id: str, frame: pd.DataFrame) -> None:
        """Remember ``frame`` as the result of ``tool_call_id`` (the last ``keep_results``)."""
        self.results[tool_call_id] = frame
        while len(self.results) > self.keep_results:
            self.results.popitem(last=False)

    @property
    def last_dataframe(self) -> pd.DataFrame | None:
        """The DataFrame of the most recent successful call, if any."""
        return next(reversed(self.results.values())) if self.results else None

    def explain_approval(self, sql: str) -> str:
        """Why ``sql`` needs approval, in words (for a UI showing the approval prompt)."""
        backend = self.backend
        verdict = backend.classify(sql) if backend is not None else classify(sql, "sqlite")
        return "; ".join(verdict.reasons) or "it is not a plain read"

    def __call__(self, pi: ExtensionAPI) -> None:
        url = self.url or os.environ.get(ENV_URL) or sample_database_url()
        roles: dict[str, Any] = {}
        if self.role_per_user or self.role_for is not None:  # only then: other engines' options
            roles = {"role_per_user": self.role_per_user, "role_for": self.role_for}
        backend = create_backend(
            url,
            row_cap=self.row_cap,
            approvals=CapabilityStore(),
            statement_timeout_s=self.statement_timeout_s,
            max_result_bytes=self.max_result_bytes,
            memory_limit_bytes=self.memory_limit_bytes,
            **roles,
        )
        self.backend = backend
        # Decisions are on record in the session's audit; this is the view of them.
        self.approvals = AuditApprovals(pi.audit, call_views)
        # Grants never outlive their session: this session's gate uses this store, and closing
        # the session revokes this store's grants only (not those of a newer session that
        # uses the same extension object).
        grants = GrantStore(backend.dialect, audit=lambda: pi.audit)
        self.grants = grants
        pi.register_tool(make_query_tool(self, backend, pi))
        waiter = ReviewWaiter(self.review) if self.review is not None else None
        pi.on("tool_call", make_gate(self, backend, pi, grants, review=waiter))
        if self.read_budget is not None:
            install_read_budget(
                pi, backend, self.read_budget, approval_timeout_s=self.approval_timeout_s
            )
        pi.on("tool_result", self._tell_model_of_edit)
        pi.on("tool_execution_end", lambda event, _ctx: self._call_ended(backend, event))
        self.schema = SchemaCache(
            schema_source(backend),
            backend.dialect,
            ttl_s=self.schema_ttl_s,
            offload=backend.offload,
        )
        register_schema_context(
            pi,
            self.schema,
            query_tool=TOOL_NAME,
            semantic=self.semantic,
            budget=self.schema_budget_chars,
            policy=self.data_policy,
        )
        if self.data_policy is not None:
            self.content_policy = install_data_policy(pi, self.data_policy, self.schema)
        pi.on("session_shutdown", lambda _event, _ctx: self._shutdown(backend, grants, waiter))

    def _tell_model_of_edit(self, event: Any, _ctx: Any) -> dict[str, Any] | None:
        """The model is told the person edited the statement, and sees the one that ran."""
        edit = self.edits.get(event.tool_call_id)
        if edit is None or event.tool_name != TOOL_NAME:
            return None
        how = (
            "it ran as a read, without further approval"
            if edit.kind == "read"
            else ("it was approved as edited")
        )
        note = (
            f"Note: the user edited the statement before approving it ({how}). "
            f"The statement that ran:\n{edit.sql}"
        )
        details = dict(event.details) if isinstance(event.details, dict) else {}
        details["edited"] = {
            "original_sql": edit.original_sql,
            "sql": edit.sql,
            "original_args_hash": edit.original_args_hash,
            "args_hash": edit.args_hash,
        }
        return {"content": [TextContent(text=note), *event.content], "details": details}

    def _call_ended(self, backend: DatabaseBackend, event: Any) -> None:
        # A capability dies with the call that earned it, however the call ended (blocked by
        # a later handler, errored, aborted, finished); its id is burnt.
        backend.capabilities.revoke(event.tool_call_id)
        self.edits.pop(event.tool_call_id, None)

    def _shutdown(
        self, backend: DatabaseBackend, grants: GrantStore, waiter: ReviewWaiter | None = None
    ) -> None:
        grants.revoke_all(reason="session closed")
        backend.dispose()
        if waiter is not None:
            waiter.close()


def database_extension(url: str | None = None, **options: Any) -> DatabaseExtension:
    """A database extension factory for ``url`` (see :class:`DatabaseExtension` for options)."""
    return DatabaseExtension(url, **options)


def register(pi: ExtensionAPI) -> None:
    """Default factory (C35): ``PI_NOTEBOOK_DATABASE_URL``, else the bundled sample database."""
    DatabaseExtension()(pi)
