"""The session's side of the pre-model events.

:func:`prepare_prompt` runs ``input`` and ``before_agent_start`` for one prompt and returns
the messages to send and the system prompt for this prompt. :class:`PreModelHooks` holds the
two hooks the session installs into the agent loop: ``transform_context`` (the ``context``
event, on a copy of the history) and ``before_request`` (the ``before_provider_request``
event on the exact payload, audited when it blocks). The agent core never sees extensions.
"""

from __future__ import annotations

import copy
import hashlib
import logging
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, ClassVar

from ..agent.agent import Agent, AgentState
from ..ai.abort import AbortSignal
from ..ai.messages import Message, TextContent, UserMessage, content_text
from ..ai.payload import payload_text
from ..audit.durable import record_after
from ..audit.records import AuditRecord
from ..extensions import premodel
from ..extensions.runner import ExtensionRunner

if TYPE_CHECKING:
    from ..audit import AuditLog

__all__ = [
    "PROVIDER_BLOCK_KIND",
    "PreModelHooks",
    "PreparedPrompt",
    "PromptOverride",
    "ProviderRequestBlocked",
    "SystemPromptState",
    "copy_for_context",
    "prepare_prompt",
]

log = logging.getLogger(__name__)

PROVIDER_BLOCK_KIND = "provider_request_blocked"
"""Audit kind of a request that a ``before_provider_request`` handler stopped."""


@dataclass(frozen=True, kw_only=True)
class ProviderRequestBlocked(AuditRecord):
    """A ``before_provider_request`` handler stopped a request: the block, never the payload
    (its digest and size identify what was stopped)."""

    kind: ClassVar[str] = PROVIDER_BLOCK_KIND
    reason: str
    """The handler's reason."""
    extension_path: str
    """The extension that blocked."""
    model: str
    """The model the request was for."""
    payload_sha256: str
    """SHA-256 (hex) of the request's text."""
    payload_chars: int
    """Its length in characters."""


@dataclass(frozen=True, kw_only=True)
class PromptOverride:
    """A system prompt that ``before_agent_start`` set for one prompt, and the base it saw.

    When the active tools change during the run, the base prompt is rebuilt; an override
    that extended the old base (the usual case: base + a schema summary) is carried over to
    the new base, any other override stays as it is.
    """

    base: str
    text: str

    def rebase(self, new_base: str) -> str:
        if self.text.startswith(self.base):
            return new_base + self.text[len(self.base) :]
        return self.text


class SystemPromptState:
    """The base system prompt (built from the active tools) and the current prompt's
    replacement, if any, kept in step with the agent state the loop reads."""

    def __init__(self, state: AgentState) -> None:
        self._state = state
        self.base = ""
        self._override: PromptOverride | None = None

    def set_base(self, base: str) -> None:
        """A new base (the active set changed); a running prompt's replacement follows it."""
        self.base = base
        if self._override is not None:
            self._override = PromptOverride(base=base, text=self._override.rebase(base))
        self._state.system_prompt = self._override.text if self._override else base

    def begin(self, override: PromptOverride | None) -> None:
        self._override = override
        self._state.system_prompt = override.text if override else self.base

    def end(self) -> None:
        """The prompt is over: back to the base prompt."""
        self.begin(None)


@dataclass(kw_only=True)
class PreparedPrompt:
    """What one prompt sends: injected messages, then the user's message."""

    messages: list[Message] = field(default_factory=list)
    system_prompt: PromptOverride | None = None


async def prepare_prompt(
    runner: ExtensionRunner, prompt: str | Message, base_system_prompt: str
) -> PreparedPrompt | None:
    """Run ``input`` then ``before_agent_start``; ``None`` when an ``input`` handler handled
    the prompt (nothing is sent). Handler errors are reported by the runner, never raised."""
    if isinstance(prompt, str):
        user: Message = UserMessage(content=[TextContent(text=prompt)])
    else:
        user = prompt
    if isinstance(user, UserMessage) and runner.has_handlers("input"):
        original = content_text(user.content)
        outcome = await premodel.emit_input(runner, original)
        if outcome.handled:
            return None
        if outcome.text != original:
            user = UserMessage(content=[TextContent(text=outcome.text)])
    prepared = PreparedPrompt(messages=[user])
    if runner.has_handlers("before_agent_start"):
        text = content_text(user.content) if isinstance(user, UserMessage) else ""
        started = await premodel.emit_before_agent_start(runner, text, base_system_prompt)
        # Injected context goes first, so the user's words stay the last thing the model
        # reads (and what a rule-based model such as ``offline`` answers).
        prepared.messages = [*started.messages, user]
        if started.system_prompt is not None:
            prepared.system_prompt = PromptOverride(
                base=base_system_prompt, text=started.system_prompt
            )
    return prepared


def copy_for_context(messages: list[Message]) -> list[Message]:
    """A copy a ``context`` handler may change freely; ``details`` stay shared (they are
    never sent, and copying a result's DataFrame on every request would be costly)."""
    copies: list[Message] = []
    for message in messages:
        details = getattr(message, "details", None)
        memo: dict[int, Any] = {} if details is None else {id(details): details}
        copies.append(copy.deepcopy(message, memo))
    return copies


class PreModelHooks:
    """The ``transform_context`` and ``before_request`` hooks of one session.

    :meth:`install` puts them into the agent at the start of each prompt, only for the
    events that have handlers: without a ``before_provider_request`` handler no payload is
    built at all. A handler added during a run takes effect from the next prompt.
    """

    def __init__(
        self,
        runner: ExtensionRunner,
        *,
        audit: Callable[[], AuditLog | None],
        model_name: Callable[[], str],
    ) -> None:
        self._runner = runner
        self._audit = audit
        self._model_name = model_name

    def install(self, agent: Agent) -> None:
        runner = self._runner
        agent.transform_context = self.transform_context if runner.has_handlers("context") else None
        wanted = runner.has_handlers("before_provider_request")
        agent.before_request = self.before_request if wanted else None

    async def transform_context(
        self, messages: list[Message], signal: AbortSignal
    ) -> list[Message]:
        if not self._runner.has_handlers("context"):
            return messages
        return await premodel.emit_context(self._runner, copy_for_context(messages))

    async def before_request(self, payload: Any) -> str | None:
        if not self._runner.has_handlers("before_provider_request"):
            return None
        text = payload_text(payload)
        model = self._model_name()
        block = await premodel.emit_before_provider_request(self._runner, payload, text, model)
        if block is None:
            return None
        self._record_block(block.extension_path, block.reason, model, text)
        return f"{block.reason} (blocked by {block.extension_path})"

    def _record_block(self, path: str, reason: str, model: str, text: str) -> None:
        """The block, never the payload: its digest and size identify what was stopped."""
        audit = self._audit()
        if audit is None:
            return
        record = ProviderRequestBlocked(
            reason=reason,
            extension_path=path,
            model=model,
            payload_sha256=hashlib.sha256(text.encode("utf-8")).hexdigest(),
            payload_chars=len(text),
        )
        record_after(audit, record)  # the block stands whatever the audit does
