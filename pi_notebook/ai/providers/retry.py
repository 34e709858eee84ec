"""The request loop shared by the real providers: stream, retry, abort.

One attempt runs in its own task (the *producer*) that opens the SDK stream and pushes
raw chunks onto a queue; the provider's generator (the *consumer*) translates them into
protocol events. Keeping all HTTP work in one task means an abort can simply cancel it:
the SDK closes the response in its ``finally`` and the server sees the connection drop
at once, whatever the SDK was awaiting (connect, headers, the next chunk).

Retries happen only before any content has been streamed: once the user has seen text
or a tool call, a second attempt could duplicate it, so a later failure ends the turn.
"""

from __future__ import annotations

import asyncio
import contextlib
import copy
import random
from collections.abc import AsyncGenerator, AsyncIterator, Awaitable, Callable, Sequence
from dataclasses import dataclass
from typing import Any, Protocol

from ..abort import AbortSignal
from ..events import AssistantMessageEvent, RetryEvent
from ..model import RequestHook
from ..payload import blocked_text, check_request
from ..stream import AssistantStream
from .errors import Failure, scrub, unexpected_failure

__all__ = ["RetryPolicy", "SdkStream", "Translator", "drive", "run_request"]

ABORTED_MESSAGE = "Request aborted."


@dataclass(frozen=True, kw_only=True)
class RetryPolicy:
    """Bounded exponential backoff with jitter.

    Attributes:
        max_retries: retries after the first attempt (0 disables retrying).
        base_delay_s: the first backoff; each later one doubles.
        max_delay_s: cap on any single wait, including a server's ``Retry-After``.
    """

    max_retries: int = 3
    base_delay_s: float = 1.0
    max_delay_s: float = 30.0

    def delay(self, attempt: int, retry_after_s: float | None = None) -> float:
        """Seconds to wait after failed attempt number ``attempt`` (1-based)."""
        if retry_after_s is not None:
            return min(retry_after_s, self.max_delay_s)
        backoff = self.base_delay_s * (2 ** (attempt - 1))
        # Jitter keeps many clients that failed together from retrying together.
        return min(backoff * random.uniform(0.75, 1.25), self.max_delay_s)


class SdkStream(Protocol):
    """What both SDKs' async streams offer: async iteration and ``close()``."""

    def __aiter__(self) -> AsyncIterator[Any]: ...

    async def close(self) -> None: ...


class Closable(Protocol):
    """An SDK client: it owns an HTTP connection pool that must be closed."""

    async def close(self) -> None: ...


class Translator(Protocol):
    """Turns one attempt's raw chunks into protocol events on an AssistantStream."""

    def feed(self, chunk: Any) -> list[AssistantMessageEvent]:
        """Events for one chunk (may be empty). May raise; that ends the turn as an error."""
        ...

    def finish(self) -> list[AssistantMessageEvent]:
        """Events once the SDK stream is exhausted, ending with a done or error event."""
        ...


_Item = tuple[str, Any]  # ("chunk", obj) | ("end", None) | ("error", exc) | ("aborted", None)


async def _produce(
    open_stream: Callable[[], Awaitable[SdkStream]], queue: asyncio.Queue[_Item]
) -> None:
    try:
        stream = await open_stream()
        try:
            async for chunk in stream:
                queue.put_nowait(("chunk", chunk))
        finally:
            await stream.close()
        queue.put_nowait(("end", None))
    except asyncio.CancelledError:
        # Cancelled by an abort (or by the consumer going away): report it and finish
        # quietly, so nobody has to retrieve a cancellation from this task.
        queue.put_nowait(("aborted", None))
    except Exception as exc:  # every failure is reported to the consumer as a value
        queue.put_nowait(("error", exc))


def _cancel_on_abort(signal: AbortSignal | None, task: asyncio.Task[None]) -> Callable[[], None]:
    if signal is None:
        return lambda: None
    loop = asyncio.get_running_loop()

    def cancel() -> None:
        # abort() may be called from another thread (a widget callback); hop onto our loop.
        loop.call_soon_threadsafe(task.cancel)

    return signal.add_listener(cancel)


async def _sleep_unless_aborted(delay: float, signal: AbortSignal | None) -> bool:
    """Wait ``delay`` seconds; True if the signal fired first."""
    if signal is None:
        await asyncio.sleep(delay)
        return False
    try:
        await asyncio.wait_for(signal.wait(), timeout=delay)
    except TimeoutError:
        return False
    return True


def _translate(
    kind: str,
    payload: Any,
    translator: Translator,
    describe: Callable[[BaseException], Failure],
    service: str,
) -> tuple[Sequence[AssistantMessageEvent], Failure | None]:
    """One item of the producer's queue: the events it makes, or the failure it is (an
    ``error`` item, or a translator that raised on a wire shape we did not expect)."""
    try:
        if kind == "chunk":
            return translator.feed(payload), None
        if kind == "end":
            return translator.finish(), None
        return (), describe(payload)
    except Exception as exc:
        return (), unexpected_failure(exc, service=service)


def _retry_event(
    builder: AssistantStream, failure: Failure, message: str, attempt: int, policy: RetryPolicy
) -> RetryEvent | None:
    """The retry after a failed attempt, or ``None`` when it is final: not retryable, some
    content was already streamed, or the retries are used up."""
    if not failure.retryable or builder.message.content or attempt > policy.max_retries:
        return None
    partial = copy.copy(builder.message)
    partial.content = list(builder.message.content)
    return RetryEvent(
        attempt=attempt,
        max_attempts=policy.max_retries + 1,
        delay_s=policy.delay(attempt, failure.retry_after_s),
        error=message,
        partial=partial,
    )


async def drive(
    builder: AssistantStream,
    *,
    open_stream: Callable[[], Awaitable[SdkStream]],
    new_translator: Callable[[], Translator],
    describe: Callable[[BaseException], Failure],
    policy: RetryPolicy,
    signal: AbortSignal | None,
    secrets: Sequence[str | None],
    service: str,
) -> AsyncGenerator[AssistantMessageEvent, None]:
    """Run attempts until one finishes, a failure is final, or the signal aborts.

    Yields everything after ``start`` (which the provider emits itself) and always ends
    with exactly one done or error event. Never raises for a provider failure.
    """
    attempt = 0
    while True:
        attempt += 1
        if signal is not None and signal.aborted:
            yield builder.error(ABORTED_MESSAGE, aborted=True)
            return
        translator = new_translator()
        queue: asyncio.Queue[_Item] = asyncio.Queue()
        producer = asyncio.create_task(_produce(open_stream, queue))
        remove_listener = _cancel_on_abort(signal, producer)
        failure: Failure | None = None
        try:
            while failure is None:
                kind, payload = await queue.get()
                if kind == "aborted" or (signal is not None and signal.aborted):
                    yield builder.error(ABORTED_MESSAGE, aborted=True)
                    return
                events, failure = _translate(kind, payload, translator, describe, service)
                for event in events:
                    if event.type == "error":
                        event.error.error_message = scrub(event.error.error_message or "", secrets)
                    yield event
                if kind == "end" and failure is None:
                    return
        finally:
            remove_listener()
            if not producer.done():
                producer.cancel()
            await asyncio.wait({producer})

        message = scrub(failure.message, secrets)
        retry = _retry_event(builder, failure, message, attempt, policy)
        if retry is not None:
            yield retry
            if await _sleep_unless_aborted(retry.delay_s, signal):
                yield builder.error(ABORTED_MESSAGE, aborted=True)
                return
            continue
        if attempt > 1 and failure.retryable:
            message = f"{message.rstrip('.')}; gave up after {attempt} attempts."
        yield builder.error(message)
        return


async def run_request(
    builder: AssistantStream,
    *,
    missing_key: str | None,
    build_request: Callable[[], dict[str, Any]],
    connect: Callable[[dict[str, Any]], tuple[Closable, Callable[[], Awaitable[SdkStream]]]],
    new_translator: Callable[[], Translator],
    describe: Callable[[BaseException], Failure],
    policy: RetryPolicy,
    signal: AbortSignal | None,
    secrets: Sequence[str | None],
    service: str,
    before_request: RequestHook | None = None,
) -> AsyncGenerator[AssistantMessageEvent, None]:
    """A provider's whole ``stream()``: start, key check, request, hook, client, :func:`drive`.

    ``build_request`` returns the JSON body (without ``stream``). ``before_request`` sees it
    exactly as it will be sent (with ``"stream": true``) and may block it: then no client is
    made and nothing leaves the process. ``connect`` makes an SDK client for the body (one per
    answer, so nothing outlives the event loop it was made on) and returns it with a function
    that opens the SDK stream. Everything these raise ends the turn as an error event.
    """
    yield builder.start()
    if missing_key is not None:
        yield builder.error(missing_key)
        return
    try:
        request = build_request()
    except Exception as exc:  # an unserialisable history, ...
        yield builder.error(scrub(unexpected_failure(exc, service=service).message, secrets))
        return
    reason = await check_request(before_request, {**request, "stream": True})
    if reason is not None:
        yield builder.error(scrub(blocked_text(reason), secrets))
        return
    try:
        client, open_stream = connect(request)
    except Exception as exc:  # a bad base URL, ...
        yield builder.error(scrub(unexpected_failure(exc, service=service).message, secrets))
        return
    events = drive(
        builder,
        open_stream=open_stream,
        new_translator=new_translator,
        describe=describe,
        policy=policy,
        signal=signal,
        secrets=secrets,
        service=service,
    )
    # aclosing: if our consumer stops early, stop the attempt now (not at garbage
    # collection) and only then close the client it uses.
    try:
        async with contextlib.aclosing(events):
            async for event in events:
                yield event
    finally:
        await client.close()
