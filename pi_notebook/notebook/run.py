"""``Run``: one ``%%pi`` prompt running as an asyncio task on the kernel's loop.

The cell that starts a run returns at once, so the kernel stays free to receive widget
clicks (an approval awaits a future that the Approve / Reject buttons resolve). The task is
referenced from here and from the notebook state until it ends, and anything it raises is
shown in the run view, never lost. Executed notebooks (nbclient, "Run All") do not wait
for background work, so they ``await run.wait()``.
"""

from __future__ import annotations

import asyncio
import inspect
import time
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from ..agent.events import AgentEndEvent
from ..errors import AwaitNotSupportedError
from .cards import result_dataframe
from .prompts import Prompt
from .store import ApprovalRequested, ApprovalResolved, RunFailed, RunState, StopRequested, reduce
from .view import RunView

if TYPE_CHECKING:
    import pandas as pd

    from ..session import AgentSession

__all__ = ["AwaitNotSupportedError", "Run", "kernel_handles_comms_while_awaiting"]

_URGENT = frozenset({"tool_execution_start", "tool_execution_end", "approval_requested",
                     "approval_resolved", "agent_end", "run_failed", "stop_requested", "notice"})  # fmt: skip


def kernel_handles_comms_while_awaiting() -> bool:
    """Whether widget messages reach the kernel while a cell is awaiting.

    A feature check, not a version check: ipykernel dispatches ``comm_msg`` beside a busy
    cell only where ``dispatch_shell`` takes the ``concurrent`` flag. Outside a kernel (a
    script, a test shell) there are no comm messages to wait for, so awaiting is safe.
    """
    try:
        from IPython.core.getipython import get_ipython
    except ImportError:  # pragma: no cover - IPython is a dependency
        return True
    kernel = getattr(get_ipython(), "kernel", None)
    if kernel is None:
        return True
    dispatch = getattr(kernel, "dispatch_shell", None)
    try:
        return dispatch is not None and "concurrent" in inspect.signature(dispatch).parameters
    except (TypeError, ValueError):
        return False


class Run:
    """One prompt, its event store and its view. Create it with ``%%pi``.

    Attributes:
        state: the store's current :class:`RunState`.
        view: the :class:`RunView` shown below the cell.
        prompts: every prompt (approvals and other questions) this run showed, in order.
    """

    def __init__(self, session: AgentSession, prompt: str, *,
                 label_of: Callable[[str], str] = str,
                 on_finish: Callable[[Run], None] | None = None) -> None:  # fmt: skip
        self.session = session
        self.prompt = prompt
        self.state = RunState()
        self.view = RunView(lambda: self.state, self.abort, label_of)
        self.prompts: list[Prompt] = []
        self.task: asyncio.Task[None] | None = None
        self._on_finish = on_finish
        self._prompt_waiters: list[asyncio.Future[Prompt]] = []

    def __repr__(self) -> str:
        return f"<Run {self.state.status}: {len(self.state.order)} tool call(s)>"

    # -- lifecycle ---------------------------------------------------------------
    def start(self) -> None:
        """Schedule the run on the running loop (the kernel's)."""
        self.task = asyncio.get_running_loop().create_task(self._drive())

    async def _drive(self) -> None:
        unsubscribe = self.session.subscribe(self.dispatch)
        try:
            await self.session.prompt(self.prompt)
        except asyncio.CancelledError:
            # Only abort() cancels this task (before the agent started); record a stop.
            self.dispatch(StopRequested())
        except Exception as exc:
            self.dispatch(RunFailed(error=f"{type(exc).__name__}: {exc}"))
        finally:
            unsubscribe()
            if self.state.status in ("idle", "running"):
                self.dispatch(AgentEndEvent())
            self.view.render()
            for waiter in self._prompt_waiters:
                if not waiter.done():
                    waiter.set_exception(
                        RuntimeError(f"the run ended ({self.state.status}) without a prompt")
                    )
            if self._on_finish is not None:
                self._on_finish(self)

    @property
    def done(self) -> bool:
        """Whether the run has finished."""
        return self.task is not None and self.task.done()

    def dispatch(self, event: Any) -> None:
        """Feed an event to the store and re-render (throttled unless it matters now)."""
        self.state = reduce(self.state, event, now=time.monotonic())
        self.view.request_render(urgent=getattr(event, "type", None) in _URGENT)

    def abort(self) -> None:
        """Stop the run: what the Stop button and ``%pi_abort`` do."""
        if self.done:
            return
        self.dispatch(StopRequested())
        if self.session.is_running:
            self.session.abort("stopped by the user")
        elif self.task is not None:
            self.task.cancel()

    async def wait(self, timeout: float | None = None) -> RunState:
        """Wait until the run ends and return its final state.

        Raises:
            AwaitNotSupportedError: the kernel cannot receive widget clicks while a cell
                awaits, so an approval would deadlock; let the cell end instead.
            TimeoutError: ``timeout`` seconds passed (the run goes on).
        """
        if not kernel_handles_comms_while_awaiting():
            raise AwaitNotSupportedError(
                "This kernel cannot receive widget clicks while a cell awaits, so awaiting the "
                "run could deadlock an approval; let the cell finish and watch the run view "
                "(or upgrade ipykernel)."
            )
        if self.task is None:
            raise RuntimeError("the run was never started")
        try:
            # shield: interrupting the waiting cell must not cancel the run itself.
            await asyncio.wait_for(asyncio.shield(self.task), timeout)
        except asyncio.CancelledError:
            if not self.task.cancelled():
                raise
        return self.state

    # -- prompts ---------------------------------------------------------------
    def attach_prompt(self, prompt: Prompt, tool_call_id: str | None) -> None:
        """Show ``prompt`` in the card of ``tool_call_id`` (or below the cards if ``None``)."""
        self.prompts.append(prompt)
        if tool_call_id is not None and tool_call_id in self.state.cards:
            self.dispatch(ApprovalRequested(tool_call_id=tool_call_id))
            self.view.card(tool_call_id).show_prompt(prompt)
            prompt.on_decided(
                lambda p: self.dispatch(
                    ApprovalResolved(tool_call_id=tool_call_id, decision=p.decision or "expired")
                )
            )
        else:
            self.view.show_dialog(prompt)
        for waiter in self._prompt_waiters:
            if not waiter.done():
                waiter.set_result(prompt)
        self._prompt_waiters.clear()

    async def next_prompt(self, timeout: float | None = 30) -> Prompt:
        """The first prompt not yet answered, waiting for one if needed.

        For executed notebooks and tests: ``(await run.next_prompt()).approve()`` does what
        a person's click on Approve does.
        """
        for prompt in self.prompts:
            if not prompt.decided:
                return prompt
        if self.done:
            raise RuntimeError(f"the run ended ({self.state.status}) without a pending prompt")
        waiter: asyncio.Future[Prompt] = asyncio.get_running_loop().create_future()
        self._prompt_waiters.append(waiter)
        return await asyncio.wait_for(waiter, timeout)

    # -- results -----------------------------------------------------------------
    def results(self) -> dict[str, pd.DataFrame]:
        """Each call's result DataFrame (from ``details["dataframe"]``), by call id."""
        out: dict[str, pd.DataFrame] = {}
        for card in self.state.card_list():
            frame = result_dataframe(card.details)
            if frame is not None:
                out[card.tool_call_id] = frame
        return out
