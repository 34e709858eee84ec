"""``ScriptedModel``: a strict, deterministic model for tests and lessons.

Each model request consumes one step. A step is ``text("...")``, ``tool_call(...)``,
a list mixing them, ``turn(parts, stop_reason=...)``, an exception to raise, or a
callable that receives the request's :class:`~pi_notebook.ai.model.Context` and returns
one of those. Steps are checked when the model is built; a request past the last step
raises :class:`UnexpectedModelCall`; ``assert_complete()`` fails while steps are
unused. Every request is recorded as a frozen :class:`ModelCall`, with the payload it would
have carried (:func:`~pi_notebook.ai.payload.context_payload`). A request that the
``before_request`` hook blocks consumes no step: it lands in ``blocked`` instead of ``calls``.
"""

from __future__ import annotations

import itertools
import json
from collections.abc import AsyncIterator, Callable, Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any, TypeAlias, overload

from ..errors import UnexpectedModelCall
from .abort import AbortSignal
from .events import AssistantMessageEvent
from .messages import Message, StopReason, TextContent, ToolCall, Usage
from .model import Context, RequestHook, ToolSchema
from .payload import blocked_text, check_request, context_payload, neutral_payload
from .stream import AssistantStream

__all__ = [
    "ModelCall",
    "ScriptedModel",
    "Step",
    "UnexpectedModelCall",
    "text",
    "tool_call",
    "turn",
]

_ids = itertools.count(1)


@dataclass(frozen=True, kw_only=True)
class ScriptedTurn:
    """One assistant answer: parts, and optionally a forced stop reason and usage."""

    parts: tuple[TextContent | ToolCall, ...]
    stop_reason: StopReason | None = None
    usage: Usage | None = None


Part: TypeAlias = TextContent | ToolCall
Step: TypeAlias = Part | Sequence[Part] | ScriptedTurn | BaseException | Callable[[Context], Any]


def text(value: str) -> TextContent:
    """A text answer (or a text part of a mixed answer)."""
    return TextContent(text=value)


def tool_call(name: str, args: Any = None, *, id: str | None = None) -> ToolCall:
    """A tool call part. ``args`` is sent as is (it need not be valid)."""
    return ToolCall(
        id=id or f"call_{next(_ids)}", name=name, arguments={} if args is None else args
    )


def turn(
    parts: Part | Sequence[Part],
    *,
    stop_reason: StopReason | None = None,
    usage: Usage | None = None,
) -> ScriptedTurn:
    """An answer with a forced stop reason (e.g. ``"length"``) or usage."""
    as_tuple = (parts,) if isinstance(parts, TextContent | ToolCall) else tuple(parts)
    return ScriptedTurn(parts=as_tuple, stop_reason=stop_reason, usage=usage)


class _HistoryView(Sequence[Message]):
    """A frozen view of the first ``length`` messages of an append-only history.

    Taking it costs O(1), so recording every request does not make a long run
    quadratic.
    """

    def __init__(self, source: Sequence[Message], length: int) -> None:
        self._source, self._length = source, length

    def __len__(self) -> int:
        return self._length

    @overload
    def __getitem__(self, index: int) -> Message: ...
    @overload
    def __getitem__(self, index: slice) -> Sequence[Message]: ...
    def __getitem__(self, index: int | slice) -> Message | Sequence[Message]:
        return list(self._source[: self._length])[index]

    def __iter__(self) -> Iterator[Message]:
        return iter(self._source[: self._length])

    def __repr__(self) -> str:
        return f"HistoryView({list(self)!r})"


@dataclass(frozen=True, kw_only=True)
class ModelCall:
    """What the model saw on one request.

    ``payload`` is the request in the JSON form a hook saw (system prompt, messages as the
    model reads them, tools); ``payload_text`` is it serialised, for "does X appear" checks.
    ``block_reason`` is set on the requests in ``ScriptedModel.blocked``.
    """

    system_prompt: str
    messages: Sequence[Message]
    tools: tuple[ToolSchema, ...]
    block_reason: str | None = None
    model_id: str = "scripted"
    provider: str = "scripted"
    _payload: dict[str, Any] | None = field(default=None, repr=False, compare=False)

    @property
    def payload(self) -> dict[str, Any]:
        if self._payload is None:  # built on first use: recording stays O(1) per request
            payload = neutral_payload(
                self.model_id, self.provider, self.system_prompt, self.messages, self.tools
            )
            object.__setattr__(self, "_payload", payload)
            return payload
        return self._payload

    @property
    def payload_text(self) -> str:
        return json.dumps(self.payload, ensure_ascii=False, default=str)

    @property
    def tool_names(self) -> list[str]:
        return [t.name for t in self.tools]


def _normalise(step: Any, where: str) -> ScriptedTurn | BaseException | Callable[[Context], Any]:
    if isinstance(step, ScriptedTurn | BaseException):
        return step
    if isinstance(step, TextContent | ToolCall):
        return ScriptedTurn(parts=(step,))
    if isinstance(step, Sequence) and not isinstance(step, str | bytes):
        parts = tuple(step)  # pyright: ignore[reportUnknownArgumentType, reportUnknownVariableType]
        bad = [p for p in parts if not isinstance(p, TextContent | ToolCall)]  # pyright: ignore[reportUnknownVariableType]
        if bad or not parts:
            raise TypeError(f"{where}: a list step holds text(...) and tool_call(...) parts only")
        return ScriptedTurn(parts=parts)  # pyright: ignore[reportUnknownArgumentType]
    if callable(step):
        return step  # pyright: ignore[reportUnknownVariableType]
    raise TypeError(f"{where}: unsupported step {step!r}")


@dataclass
class ScriptedModel:
    """A model that replays a script of steps. ``chunk_size`` sets streaming granularity."""

    steps: Sequence[Step]
    id: str = "scripted"
    provider: str = "scripted"
    chunk_size: int = 16
    calls: list[ModelCall] = field(default_factory=list[ModelCall], init=False)
    blocked: list[ModelCall] = field(default_factory=list[ModelCall], init=False)
    _script: list[ScriptedTurn | BaseException | Callable[[Context], Any]] = field(
        default_factory=list[ScriptedTurn | BaseException | Callable[[Context], Any]], init=False
    )
    _wire: dict[int, str] = field(default_factory=dict[int, str], init=False)
    """The JSON text of each scripted call's arguments, by ``id`` of its part: a provider
    receives its arguments as text and never encodes them, nor does a replay of one."""

    def __post_init__(self) -> None:
        self._script = [_normalise(s, f"step {i + 1}") for i, s in enumerate(self.steps)]
        for step in self._script:
            if isinstance(step, ScriptedTurn):
                for part in step.parts:
                    if isinstance(part, ToolCall):
                        try:
                            self._wire[id(part)] = json.dumps(part.arguments)
                        except (TypeError, ValueError):
                            pass  # not JSON: it fails when streamed, as it always did

    @property
    def remaining(self) -> int:
        return len(self._script) - len(self.calls)

    def assert_complete(self) -> None:
        """Fail if any step was never used."""
        if self.remaining:
            raise AssertionError(
                f"ScriptedModel: {self.remaining} of {len(self._script)} steps were never used"
            )

    async def stream(
        self,
        context: Context,
        *,
        signal: AbortSignal | None = None,
        before_request: RequestHook | None = None,
    ) -> AsyncIterator[AssistantMessageEvent]:
        index = len(self.calls)
        payload = reason = None
        if before_request is not None:
            payload = context_payload(self, context)
            reason = await check_request(before_request, payload)
        call = ModelCall(
            system_prompt=context.system_prompt,
            messages=_HistoryView(context.messages, len(context.messages)),
            tools=tuple(context.tools),
            block_reason=reason,
            model_id=self.id,
            provider=self.provider,
            _payload=payload,
        )
        if reason is not None:
            self.blocked.append(call)
            out = AssistantStream(model=self.id, provider=self.provider)
            yield out.start()
            yield out.error(blocked_text(reason))
            return
        if index >= len(self._script):
            raise UnexpectedModelCall(
                f"ScriptedModel: request {index + 1} but the script has only {len(self._script)} steps"
            )
        self.calls.append(call)
        step = self._script[index]
        if callable(step) and not isinstance(step, ScriptedTurn | BaseException):
            step = _normalise(step(context), f"step {index + 1} (from its callable)")
            if callable(step) and not isinstance(step, ScriptedTurn | BaseException):
                raise TypeError(f"step {index + 1}: a callable step must not return a callable")
        if isinstance(step, BaseException):
            raise step
        assert isinstance(step, ScriptedTurn)
        for event in self._events(step, signal):
            yield event

    def _events(
        self, step: ScriptedTurn, signal: AbortSignal | None
    ) -> Iterator[AssistantMessageEvent]:
        out = AssistantStream(model=self.id, provider=self.provider)
        yield out.start()
        for part in step.parts:
            if signal is not None and signal.aborted:
                yield out.error("Operation aborted", aborted=True)
                return
            if isinstance(part, TextContent):
                yield out.text_start()
                for i in range(0, len(part.text), self.chunk_size):
                    yield out.text_delta(part.text[i : i + self.chunk_size])
                yield out.text_end()
            else:
                index, event = out.tool_call_start(id=part.id, name=part.name)
                yield event
                raw = self._wire.get(id(part))
                if raw is None:  # a step a callable made, or arguments that are not JSON
                    raw = json.dumps(part.arguments)
                for i in range(0, len(raw), self.chunk_size * 4):
                    yield out.tool_call_delta(index, raw[i : i + self.chunk_size * 4])
                yield out.tool_call_end(index)
        if step.usage is not None:
            out.set_usage(step.usage)
        yield out.done(
            step.stop_reason if step.stop_reason not in (None, "error", "aborted") else None
        )  # type: ignore[arg-type]
