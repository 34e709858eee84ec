"""AbortController / AbortSignal: flag, reason, listeners, awaitable, idempotence."""

from __future__ import annotations

import asyncio
import threading

import pytest

from pi_notebook.ai.abort import AbortController, AbortError


def test_signal_starts_clear_and_abort_sets_flag_and_default_reason() -> None:
    controller = AbortController()
    assert controller.signal.aborted is False
    assert controller.signal.reason is None
    controller.signal.throw_if_aborted()  # no error while clear

    controller.abort()

    assert controller.signal.aborted is True
    assert controller.signal.reason == "Operation aborted"


def test_abort_keeps_the_given_reason_and_throw_if_aborted_uses_it() -> None:
    controller = AbortController()
    controller.abort("user pressed stop")

    assert controller.signal.reason == "user pressed stop"
    with pytest.raises(AbortError, match=r"^user pressed stop$"):
        controller.signal.throw_if_aborted()


def test_abort_is_idempotent_first_reason_wins_and_listeners_fire_once() -> None:
    controller = AbortController()
    calls: list[str] = []
    controller.signal.add_listener(lambda: calls.append("fired"))

    controller.abort("first")
    controller.abort("second")

    assert calls == ["fired"]
    assert controller.signal.reason == "first"


def test_listeners_run_in_order_and_a_raising_listener_does_not_stop_the_others() -> None:
    controller = AbortController()
    calls: list[int] = []

    def broken() -> None:
        raise RuntimeError("listener bug")

    controller.signal.add_listener(lambda: calls.append(1))
    controller.signal.add_listener(broken)
    controller.signal.add_listener(lambda: calls.append(3))
    controller.abort()

    assert calls == [1, 3]


def test_removed_listener_is_not_called() -> None:
    controller = AbortController()
    calls: list[str] = []
    remove = controller.signal.add_listener(lambda: calls.append("kept"))
    remove_other = controller.signal.add_listener(lambda: calls.append("removed"))
    remove_other()
    remove_other()  # removing twice is harmless

    controller.abort()
    remove()  # removing after the abort is harmless

    assert calls == ["kept"]


def test_listener_added_after_abort_runs_at_once() -> None:
    controller = AbortController()
    controller.abort()
    calls: list[str] = []

    controller.signal.add_listener(lambda: calls.append("late"))

    assert calls == ["late"]


async def test_signal_is_awaitable_and_wakes_every_waiter() -> None:
    controller = AbortController()
    waiters = [asyncio.ensure_future(controller.signal.wait()) for _ in range(3)]
    awaited = asyncio.ensure_future(_await_signal(controller))
    await asyncio.sleep(0)
    assert not any(w.done() for w in [*waiters, awaited])

    controller.abort()
    await asyncio.wait_for(asyncio.gather(*waiters, awaited), timeout=1)

    assert awaited.result() == "woke"


async def _await_signal(controller: AbortController) -> str:
    await controller.signal
    return "woke"


async def test_awaiting_an_aborted_signal_returns_at_once() -> None:
    controller = AbortController()
    controller.abort()

    await asyncio.wait_for(controller.signal.wait(), timeout=0.1)


async def test_cancelled_waiter_leaves_no_trace_and_others_still_wake() -> None:
    controller = AbortController()
    cancelled = asyncio.ensure_future(controller.signal.wait())
    kept = asyncio.ensure_future(controller.signal.wait())
    await asyncio.sleep(0)
    cancelled.cancel()
    with pytest.raises(asyncio.CancelledError):
        await cancelled

    controller.abort()
    await asyncio.wait_for(kept, timeout=1)


async def test_abort_from_another_thread_wakes_an_awaiting_task() -> None:
    controller = AbortController()
    waiter = asyncio.ensure_future(controller.signal.wait())
    await asyncio.sleep(0)

    thread = threading.Thread(target=controller.abort, args=("from a thread",))
    thread.start()
    await asyncio.wait_for(waiter, timeout=1)
    thread.join()

    assert controller.signal.reason == "from a thread"


def test_abort_error_has_the_standard_message() -> None:
    assert str(AbortError()) == "Operation aborted"
