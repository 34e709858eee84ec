"""The data policy's handlers on the extension API: everything around the content policy.

Registered by the database extension when it has a ``data_policy``:

* ``tool_call`` (``query_database``): read the schema (cached) before the statement runs, so
  the content policy traces lineage against a fresh one.
* ``tool_result`` (``query_database``): audit which columns were protected and under which
  policy version (kind ``data_policy``); when a failed statement may read protected data (or
  anything outside the inspected schema), the model gets only the error's class and a hint,
  never the database's message (``error(email)``, a failed cast, a key quote values).
* ``tool_result`` (every other tool): replace protected values the session has seen (an
  ``inspect_variable`` of a query result, a file the user saved) before the model reads them.
* ``before_agent_start``: tell the model which columns are protected.
* ``before_provider_request``: the last check. A payload that carries a protected value seen
  in this session is refused (nothing is sent); from the next prompt on, protected values are
  masked in the messages of every request, text and tool-call arguments (a ``context``
  handler added then), and in the system prompt as this extension and those loaded before it
  built it (a ``before_agent_start`` handler added then), so the session can go on. What an
  extension loaded later adds to the system prompt is not masked: a protected value there
  keeps being refused (fail closed). A request that passes is remembered: what
  the model had before a protected result showed it is not protected (see
  :mod:`.protected_values`).
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, ClassVar

from pi_notebook.ai.messages import ImageContent, TextContent
from pi_notebook.audit.durable import record_after
from pi_notebook.audit.records import AuditRecord
from pi_notebook.extensions import ExtensionAPI

from .names import DESCRIBE_TOOL, TOOL_NAME
from .policy import DataPolicy, LineagePolicy, generic_error
from .protected_values import scrub_messages
from .schema import SchemaCache

__all__ = [
    "POLICY_AUDIT_KIND",
    "DataPolicyApplied",
    "install_data_policy",
    "register_data_policy",
    "sanitize_error",
]

log = logging.getLogger(__name__)

POLICY_AUDIT_KIND = "data_policy"


@dataclass(frozen=True, kw_only=True)
class DataPolicyApplied(AuditRecord):
    """A result reached the model with protected columns hidden (masked, hashed or dropped)
    by the data policy; its ``policy_version`` is also in the payload."""

    kind: ClassVar[str] = POLICY_AUDIT_KIND
    protected: Mapping[str, Any]
    """The result's protected columns and how each was hidden."""

    def payload(self) -> dict[str, Any]:
        return {"protected": dict(self.protected), "policy_version": self.policy_version}


def sanitize_error(text: str) -> str:
    """The class of a database error and a hint, without its message (which can quote a
    value unquoted: DuckDB's ``error(email)``, or with quotes doubled inside quotes)."""
    return generic_error(text)


def _text_of(content: Any) -> str:
    from pi_notebook.ai.messages import content_text

    return content_text(content)


@dataclass
class _PolicyHandlers:
    """The handlers of one content policy (``guard``) on one extension API."""

    pi: ExtensionAPI
    guard: LineagePolicy
    cache: SchemaCache
    query_tool: str
    quiet_tools: tuple[str, ...]
    refused: set[str] = field(default_factory=set[str])
    """Labels of columns whose values a refused request carried."""

    @property
    def policy(self) -> DataPolicy:
        return self.guard.policy

    async def fresh_schema(self, event: Any, ctx: Any) -> None:
        if event.tool_name == self.query_tool:
            schema = await self.cache.get(signal=getattr(ctx, "signal", None))
            problems = self.policy.problems(schema)
            if problems:  # a rule that matches nothing protects nothing: refuse to guess
                raise ValueError(
                    f"the data policy names what the database does not have ({'; '.join(problems)}); "
                    "fix the policy"
                )

    def after_result(self, event: Any, ctx: Any) -> dict[str, Any] | None:
        if event.tool_name == self.query_tool:
            return self._after_query(event, ctx)
        if event.tool_name in self.quiet_tools:
            return None
        text = _text_of(event.content)
        scrubbed = self.guard.seen.scrub(text)
        if scrubbed == text:
            return None
        images = [p for p in event.content or () if isinstance(p, ImageContent)]
        return {"content": [TextContent(text=scrubbed), *images] if images else scrubbed}

    def _after_query(self, event: Any, ctx: Any) -> dict[str, Any] | None:
        sql = getattr(event.input, "sql", "")
        if event.is_error:
            shown = self.guard.model_error(sql, self.cache.dialect, _text_of(event.content))
            return None if shown is None else {"content": shown}
        details = event.details if isinstance(event.details, dict) else {}
        protected = details.get("protected_columns")
        if protected:
            audit = getattr(ctx, "audit", None) or self.pi.audit
            record_after(
                audit,
                DataPolicyApplied(  # best effort: the result stands
                    protected=protected,
                    tool_call_id=event.tool_call_id,
                    tool_name=event.tool_name,
                    policy_version=self.policy.version,
                ),
            )
        return None

    def announce(self, event: Any, ctx: Any) -> dict[str, str]:
        note = (
            f"Data policy {self.policy.version}: the values of {self.policy.describe()} and of "
            "anything computed from them (lengths, ranks, orders, counts over rows they "
            "generate or select) are hidden from you (masked, hashed or dropped in query "
            "results); counts of table rows stay visible, and the user sees the real values. "
            "Do not try to work around it."
        )
        return {"system_prompt": f"{event.system_prompt}\n\n{note}"}

    def mask_refused(self, event: Any, ctx: Any) -> dict[str, Any] | None:
        # a copy: safe to change
        return {"messages": scrub_messages(event.messages, self.guard.seen)}

    def mask_prompt(self, event: Any, ctx: Any) -> dict[str, str] | None:
        # Registered after the refusal, so it runs after this extension's own summary and
        # note, and after every extension loaded before this one.
        scrubbed = self.guard.seen.scrub(event.system_prompt)
        return None if scrubbed == event.system_prompt else {"system_prompt": scrubbed}

    def last_check(self, event: Any, ctx: Any) -> dict[str, Any] | None:
        columns = self.guard.seen.find(event.payload_text)
        if not columns:
            self.guard.seen.sent(event.payload_text)
            return None
        if not self.refused:  # from the next prompt on (a copy of the history per request costs)
            self.pi.on("context", self.mask_refused)
            self.pi.on("before_agent_start", self.mask_prompt)
        self.refused.update(columns)
        return {
            "block": True,
            "reason": (
                f"the request carries a value of {', '.join(columns)}, which the data policy "
                f"{self.policy.version} protects; nothing was sent. Later requests mask it."
            ),
        }


def register_data_policy(
    pi: ExtensionAPI,
    guard: LineagePolicy,
    cache: SchemaCache,
    *,
    query_tool: str,
    quiet_tools: tuple[str, ...] = (),
) -> None:
    """Register the handlers above for ``guard`` (also the extension's content policy)."""
    handlers = _PolicyHandlers(pi, guard, cache, query_tool, quiet_tools)
    pi.on("tool_call", handlers.fresh_schema)
    pi.on("tool_result", handlers.after_result)
    pi.on("before_agent_start", handlers.announce)
    pi.on("before_provider_request", handlers.last_check)


def install_data_policy(pi: ExtensionAPI, policy: DataPolicy, cache: SchemaCache) -> LineagePolicy:
    """The content policy for ``query_database`` under ``policy``, with its handlers registered
    (one per session: the hash salt and the values seen belong to it)."""
    guard = LineagePolicy(policy=policy, schema=cache)
    register_data_policy(pi, guard, cache, query_tool=TOOL_NAME, quiet_tools=(DESCRIBE_TOOL,))
    return guard
