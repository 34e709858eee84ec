"""The MCP server for the governed database tools: ``query_database`` and ``describe_database``.

Every ``tools/call`` becomes one governed call of the session (``AgentSession.call_tool``) with
a fresh call id, so the gate, the backend's final check, one-shot capabilities and the audit
apply exactly as in the notebook. Each call's audit trail starts with an ``mcp_request``
record naming the client (from ``clientInfo``), the protocol revision and the transport, and,
over authenticated HTTP, the caller: ``requester`` (the token's ``sub``), ``client_id``,
``issuer`` and ``scopes`` (:mod:`pi_notebook.mcp.scopes`). One server serves many callers, so
the caller is a fact of each call, joined to the call's other records by its
``tool_call_id``; the caller's scopes are enforced in the session's ``tool_call`` chain. A
question names the subject with the client (``ana via claude-code``), and so does the
approval record's ``approver``: the person who answered is the token's subject.

Reads run at once. A write asks the client's user through MCP elicitation (see
:mod:`pi_notebook.mcp.approval` for the two protocol eras); a client without elicitation
gets a refusal that says why. The tool list's annotations say what the tool may do
(``query_database`` may write); each result's ``_meta["pi-notebook/annotations"]`` carries the
classifier's verdict on the statement actually run (the protocol has no per-call annotations).

What does not belong here: the command line and transports (:mod:`pi_notebook.mcp.serve`).
"""

from __future__ import annotations

import json
import logging
import uuid
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, ClassVar

from mcp.server import Server
from mcp.server.auth.middleware.auth_context import get_access_token
from mcp.server.context import ServerRequestContext
from mcp.server.request_state import RequestStateBoundary, RequestStateSecurity
from mcp.shared.exceptions import MCPError
from mcp.types import (
    INVALID_PARAMS,
    CallToolRequestParams,
    CallToolResult,
    ElicitRequest,
    ElicitRequestFormParams,
    ElicitResult,
    InputRequiredResult,
    ListToolsResult,
    PaginatedRequestParams,
    TextContent,
    Tool,
    ToolAnnotations,
)
from mcp.types.version import MODERN_PROTOCOL_VERSIONS

from pi_notebook.ai.messages import ToolResultMessage, content_text
from pi_notebook.approvals import ApprovalDecided, ApprovalEntry
from pi_notebook.audit.durable import record_after
from pi_notebook.audit.records import AuditRecord
from pi_notebook.mcp.approval import (
    APPROVAL_SCHEMA,
    PendingApprovals,
    PriorAnswer,
    Question,
    RequestApproval,
    approval_message,
    serving,
)
from pi_notebook.mcp.scopes import Principal, acting_as, principal_of
from pi_notebook.session import AgentSession
from pi_notebook.sql import classify
from pi_notebook.sql.backend import query_args_hash

__all__ = ["SERVED_TOOLS", "SERVER_NAME", "GovernedToolServer", "McpRequest"]

log = logging.getLogger(__name__)

SERVER_NAME = "pi_notebook"
SERVED_TOOLS = ("query_database", "describe_database")
_APPROVAL_KEY = "pi_notebook_approval"
_META = "pi-notebook/call"
_ANNOTATIONS_META = "pi-notebook/annotations"


@dataclass(frozen=True, kw_only=True)
class McpRequest(AuditRecord):
    """A ``tools/call`` served over MCP: who asked, from which client, and how it is approved."""

    kind: ClassVar[str] = "mcp_request"
    caller: Mapping[str, Any]
    """``Principal.describe()`` of the verified caller, else ``{"requester": None}``; its keys
    lead the payload."""
    client: str | None
    """The client's name, as it introduced itself."""
    client_version: str | None
    """Its version."""
    protocol_version: str | None
    """The MCP protocol version of the connection."""
    transport: str
    """The transport the request came over."""
    request_id: str
    """The JSON-RPC request id."""
    approval_mode: str
    """How a write of this call is approved."""
    answers_question_of: str | None = None
    """The call whose question this request answers, where it answers one."""

    def payload(self) -> dict[str, Any]:
        out = super().payload()
        return {**out.pop("caller"), **out}


_ANNOTATIONS = {
    "query_database": ToolAnnotations(
        title="Query database",
        read_only_hint=False,  # it may write, each write approved by the user
        destructive_hint=True,
        idempotent_hint=False,
        open_world_hint=False,
    ),
    "describe_database": ToolAnnotations(
        title="Describe database", read_only_hint=True, open_world_hint=False
    ),
}

_INSTRUCTIONS = (
    "Governed SQL access. query_database runs one statement per call: plain reads run at "
    "once; anything that writes or has side effects is shown to the user through MCP "
    "elicitation and runs only if they approve that exact statement, once. Every call is "
    "audited. describe_database lists tables and columns."
)


@dataclass(frozen=True, kw_only=True)
class _Peer:
    client: str
    client_version: str | None
    protocol_version: str
    elicitation: bool
    transport: str


def _peer(ctx: ServerRequestContext[Any, Any], transport: str) -> _Peer:
    session = ctx.session
    params = session.client_params
    info = params.client_info if params is not None else None
    caps = session.client_capabilities
    elicitation = caps is not None and caps.elicitation is not None
    if elicitation and caps is not None and caps.elicitation is not None:
        # An empty capability object means form mode (2025-06-18); url-only cannot show a form.
        elicitation = caps.elicitation.form is not None or caps.elicitation.url is None
    return _Peer(
        client=info.name if info is not None and info.name else "an unnamed MCP client",
        client_version=info.version if info is not None else None,
        protocol_version=ctx.protocol_version,
        elicitation=elicitation,
        transport=transport,
    )


def _asker(peer: _Peer, principal: Principal | None) -> str:
    """Who asks, as a question shows it and an approval records its approver: the token's
    subject through the client (``ana via claude-code``), or the client alone."""
    if principal is None or principal.subject is None:
        return peer.client
    return f"{principal.subject} via {peer.client}"


class GovernedToolServer:
    """An MCP ``Server`` serving the session's governed database tools.

    Args:
        session: a started session with the database extension loaded (its UI must be a
            :class:`~pi_notebook.mcp.approval.McpApprovalUI`).
        dialect: the database's SQL dialect (for the per-call verdict).
        memory_bounded: the engine runs under an OS memory cap (the backend's
            ``memory_capped``), so the per-call verdict is the database gate's.
        approval_ttl_s: how long a question sent in an ``InputRequiredResult`` can be answered.
        transport: ``"stdio"`` or ``"http"`` (recorded with each call).
    """

    def __init__(
        self,
        session: AgentSession,
        *,
        dialect: str,
        memory_bounded: bool = False,
        approval_ttl_s: float = 300.0,
        transport: str = "stdio",
    ) -> None:
        self.session = session
        self.dialect = dialect
        self.memory_bounded = memory_bounded
        self.transport = transport
        self.pending = PendingApprovals(approval_ttl_s, on_expired=self._unanswered)
        self.server: Server[Any] = Server(
            SERVER_NAME,
            version="0.1.0",
            title="pi_notebook governed database",
            instructions=_INSTRUCTIONS,
            on_list_tools=self._list_tools,
            on_call_tool=self._call_tool,
        )
        # requestState is echoed by the client: seal it (the nonce inside is checked anyway).
        self.server.middleware.append(
            RequestStateBoundary(RequestStateSecurity.ephemeral(), default_audience=SERVER_NAME)
        )

    def _unanswered(self, call_id: str | None, question: Question) -> None:
        """A question sent with a call's result that no retry answered in time: that call's
        approval ends ``expired`` (its first leg was only ``deferred``)."""
        audit = self.session.audit
        if audit is None or call_id is None:
            return
        entry = ApprovalEntry(
            decision="expired",
            args_hash=question.args_hash,
            args=question.args,
            reasons=question.reasons,
            reason="Not approved: the client never answered the question "
            f"(it expired after {self.pending.ttl_s:g} s).",
            via="request_approval",
        )
        if question.tool_name is not None:
            entry = entry.showing(self.session.view_of_call(question.tool_name, question.args))
        # After the fact, so best effort: nothing waits on it, and nothing it allows runs.
        record_after(
            audit, ApprovalDecided(entry=entry, tool_call_id=call_id, tool_name=question.tool_name)
        )

    def served_tools(self) -> list[str]:
        """The served tools the session offers now, in order."""
        active = set(self.session.active_tool_names)
        return [name for name in SERVED_TOOLS if name in active]

    async def _list_tools(
        self, ctx: ServerRequestContext[Any, Any], params: PaginatedRequestParams | None
    ) -> ListToolsResult:
        served = set(self.served_tools())
        tools = [
            Tool(
                name=info.name,
                title=info.label,
                description=info.description,
                input_schema=info.parameters,
                annotations=_ANNOTATIONS.get(info.name),
            )
            for info in self.session.get_all_tools()
            if info.name in served
        ]
        return ListToolsResult(tools=tools)

    async def _call_tool(
        self, ctx: ServerRequestContext[Any, Any], params: CallToolRequestParams
    ) -> CallToolResult | InputRequiredResult:
        if params.name not in self.served_tools():
            raise MCPError(code=INVALID_PARAMS, message=f"Unknown tool: {params.name}")
        peer = _peer(ctx, self.transport)
        principal = principal_of(get_access_token())  # None over stdio
        modern = peer.protocol_version in MODERN_PROTOCOL_VERSIONS
        approval = RequestApproval(client=_asker(peer, principal), mode="unavailable")
        if peer.elicitation and modern:
            approval.mode = "input_required"
            approval.answer = self._prior_answer(params)
        elif peer.elicitation and ctx.session.can_send_request:
            approval.mode = "elicit"
            session = ctx.session
            request_id = ctx.request_id

            async def elicit(message: str, schema: dict[str, Any]) -> ElicitResult:
                return await session.elicit_form(message, schema, related_request_id=request_id)

            approval.elicit = elicit
        call_id = f"mcp_{uuid.uuid4().hex}"
        arguments = dict(params.arguments or {})
        self._record_request(call_id, params.name, peer, approval, ctx, principal)
        with serving(approval), acting_as(principal):
            message = await self.session.call_tool(params.name, arguments, tool_call_id=call_id)
        if approval.asked is not None and approval.mode == "input_required":
            return self._ask(approval.asked, approval.client, call_id)
        return self._result(message, params.name, arguments, peer, approval)

    def _prior_answer(self, params: CallToolRequestParams) -> PriorAnswer | None:
        state = params.request_state
        if not state:
            return None
        try:
            nonce = json.loads(state)["nonce"]
        except (ValueError, KeyError, TypeError):
            return None
        if not isinstance(nonce, str):
            return None
        return self.pending.consume(nonce, dict(params.input_responses or {}))

    def _ask(self, question: Question, client: str, call_id: str) -> InputRequiredResult:
        nonce = self.pending.add(question, _APPROVAL_KEY, asked_in=call_id)
        request = ElicitRequest(
            params=ElicitRequestFormParams(
                message=approval_message(question, client), requested_schema=APPROVAL_SCHEMA
            )
        )
        return InputRequiredResult(
            input_requests={_APPROVAL_KEY: request},
            request_state=json.dumps({"v": 1, "nonce": nonce}),
        )

    def _record_request(
        self,
        call_id: str,
        tool: str,
        peer: _Peer,
        approval: RequestApproval,
        ctx: ServerRequestContext[Any, Any],
        principal: Principal | None,
    ) -> None:
        audit = self.session.audit
        if audit is None:
            return
        caller = principal.describe() if principal is not None else {"requester": None}
        record = McpRequest(
            caller=caller,
            client=peer.client,
            client_version=peer.client_version,
            protocol_version=peer.protocol_version,
            transport=peer.transport,
            request_id=str(ctx.request_id),
            approval_mode=approval.mode,
            answers_question_of=approval.answer.asked_in if approval.answer else None,
            tool_call_id=call_id,
            tool_name=tool,
        )
        record_after(audit, record)

    def _verdict(self, tool: str, arguments: dict[str, Any]) -> tuple[dict[str, Any], str | None]:
        """The classifier's verdict on the statement, and its approval hash."""
        if tool != "query_database":
            return {"kind": "read", "reasons": []}, None
        sql = arguments.get("sql")
        if not isinstance(sql, str):
            return {"kind": "reject", "reasons": ["no SQL statement"]}, None
        verdict = classify(sql, self.dialect, memory_bounded=self.memory_bounded)
        try:
            digest: str | None = query_args_hash(sql, self.dialect)
        except Exception:  # unparseable: it was refused, there is nothing to bind to
            digest = None
        return {"kind": verdict.kind, "reasons": list(verdict.reasons)}, digest

    def _result(
        self,
        message: ToolResultMessage,
        tool: str,
        arguments: dict[str, Any],
        peer: _Peer,
        approval: RequestApproval,
    ) -> CallToolResult:
        text = content_text(message.content) or ("Failed." if message.is_error else "Done.")
        if approval.refused:
            text = (
                f"Refused: {peer.client} did not declare MCP elicitation, so this server cannot "
                "ask you to approve the statement, and it did not run. Reads work from any "
                "client; run writes from a client that supports elicitation, or from the notebook."
            )
        verdict, digest = self._verdict(tool, arguments)
        meta = {
            _META: {
                "tool_call_id": message.tool_call_id,
                "session_id": self.session.session_id,
                "args_hash": digest,
                "verdict": verdict,
                "approval": approval.decisions[-1] if approval.decisions else None,
            },
            _ANNOTATIONS_META: {
                "readOnlyHint": verdict["kind"] == "read",
                "destructiveHint": verdict["kind"] != "read",
            },
        }
        return CallToolResult(
            content=[TextContent(type="text", text=text)],
            is_error=message.is_error,
            _meta=meta,
        )
