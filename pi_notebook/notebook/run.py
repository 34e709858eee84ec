"""``Run``: one ``%%pi`` prompt running as an asyncio task on the kernel's loop.

A ``%%pi`` cell awaits its run (see :mod:`.cell`), so it stays busy until the run settles
while the kernel keeps taking widget clicks; ``%%pi --background`` returns at once. Either
way the run is its own task, referenced from here and from the notebook state until it ends,
and anything it raises is shown in the run view, never lost. While it runs, a tick refreshes
the elapsed times every :data:`TICK_S` seconds, which also wakes the kernel's loop so an
interrupt is delivered promptly.

When the run settles, its durable record (:mod:`.record`) replaces the live view in the
cell's output (through the display id the view was shown with), stamped with provenance
(:mod:`.provenance`): what a saved, reopened or converted notebook shows. Until then a second
output holds the run's provisional record (:mod:`.provisional_output`), what the file says if
the kernel stops first; the record's arrival empties it.
"""

from __future__ import annotations

import asyncio
import contextvars
import datetime as dt
import html
import logging
import time
import uuid
from collections.abc import Callable
from functools import partial
from typing import TYPE_CHECKING, Any

import ipywidgets as widgets

from ..agent.events import AgentEndEvent
from ..agent.views import ViewOf
from ..approvals.protocol import is_decision
from ..audit.notebook import output_digest, prompt_digest
from ..audit.records import NotebookOutput
from ..errors import AwaitNotSupportedError
from .kernel import kernel_handles_comms_while_awaiting, kernel_of_shell
from .prompts import ApprovalPrompt, Prompt
from .provenance import call_stamps, record_output, stamped_calls
from .provisional import SAFETY_EVENTS
from .provisional_output import ProvisionalOutput
from .record import RunInfo, record_bundle, result_dataframe
from .store import (
    ApprovalRequested,
    ApprovalResolved,
    RunFailed,
    RunState,
    StopRequested,
    reduce,
)
from .view import RunView

if TYPE_CHECKING:
    import pandas as pd

    from ..session import AgentSession

__all__ = ["TICK_S", "AwaitNotSupportedError", "Run", "kernel_handles_comms_while_awaiting"]

log = logging.getLogger(__name__)
TICK_S = 0.5
_URGENT = frozenset(
    {
        "tool_execution_start",
        "tool_execution_end",
        "approval_requested",
        "approval_resolved",
        "agent_end",
        "run_failed",
        "stop_requested",
        "notice",
        "decided",
    }
)
_CARD_EVENTS = frozenset(
    {
        "tool_execution_start",
        "tool_execution_update",
        "tool_execution_end",
        "tool_call",
        "tool_result",
        "approval_requested",
        "approval_resolved",
        "decided",
    }
)


class Run:
    """One prompt, its event store, its live view and, once settled, its record.

    Attributes:
        run_id: this run's id (stamped in the record's metadata and the audit).
        state: the store's current :class:`RunState`.
        view: the :class:`RunView` shown below the cell while the run goes on.
        prompts: every prompt (approvals and other questions) this run showed, in order.
        record: the record's MIME bundle once the run settled (else ``None``).
        metadata: the record's ``pi_notebook`` provenance once settled (else ``None``).
        provisional: the provisional record's output (:class:`ProvisionalOutput`).
    """

    def __init__(
        self,
        session: AgentSession,
        prompt: str,
        *,
        label_of: Callable[[str], str] = str,
        on_finish: Callable[[Run], None] | None = None,
        usage_of: Callable[[Run], str | None] | None = None,
    ) -> None:
        self.run_id = uuid.uuid4().hex
        self.session = session
        self.prompt = prompt
        self.label_of = label_of
        # How each call reads, as its tool describes itself (the session's registry).
        self.view_of: ViewOf | None = getattr(session, "view_of_call", None)
        self.state = RunState()
        self.view = RunView(lambda: self.state, self.abort, label_of, view_of=self.view_of)
        self.prompts: list[Prompt] = []
        self.task: asyncio.Task[None] | None = None
        self.record: dict[str, str] | None = None
        self.metadata: dict[str, Any] | None = None
        self.handle: Any = None
        self.provisional = ProvisionalOutput(
            self.run_id,
            session,
            prompt,
            state_of=lambda: self.state,
            info_of=lambda: self._info(settled=False),
            send=self._send,
        )
        self.background = False  # the cell returned at once (%%pi --background)
        self.output_name: str | None = None  # %%pi -o NAME: bound when the run settles
        self._on_finish = on_finish
        self._usage_of = usage_of
        self._prompt_waiters: list[asyncio.Future[Prompt]] = []
        self._since = dt.datetime.now(dt.UTC) - dt.timedelta(milliseconds=1)
        self._started = time.monotonic()

    def __repr__(self) -> str:
        return f"<Run {self.state.status}: {len(self.state.cards)} tool call(s)>"

    @property
    def provisional_handle(self) -> Any:
        """The provisional record's output, until settled (``None`` if not shown)."""
        return self.provisional.handle

    @provisional_handle.setter
    def provisional_handle(self, handle: Any) -> None:
        self.provisional.handle = handle

    # -- lifecycle ---------------------------------------------------------------
    def show(self) -> None:
        """Display the live view in the current cell, with a display id the record replaces,
        and below it the provisional record (what the file keeps if the kernel stops first)."""
        from IPython.display import display

        self.handle = display(self.view, display_id=True)
        if kernel_of_shell() is not None:  # a terminal keeps no file: no provisional record
            self.provisional.show()

    def start(self) -> None:
        """Schedule the run on the running loop (the kernel's)."""
        self.task = asyncio.get_running_loop().create_task(self._drive())

    async def _tick(self) -> None:
        while True:
            await asyncio.sleep(TICK_S)
            self.view.tick()

    async def _drive(self) -> None:
        unsubscribe = self.session.subscribe(self.dispatch)
        ticker = asyncio.get_running_loop().create_task(self._tick())
        try:
            await self.session.prompt(self.prompt)
        except asyncio.CancelledError:
            # Only abort() cancels this task (before the agent started); record a stop.
            self.dispatch(StopRequested())
        except Exception as exc:
            self.dispatch(RunFailed(error=f"{type(exc).__name__}: {exc}"))
        finally:
            unsubscribe()
            ticker.cancel()
            self.provisional.stop()
            if not self.state.settled:
                self.dispatch(AgentEndEvent())
            self.view.render()
            for waiter in self._prompt_waiters:
                if not waiter.done():
                    waiter.set_exception(
                        RuntimeError(f"the run ended ({self.state.status}) without a prompt")
                    )
            try:
                await self._finalize()
            except Exception:
                log.exception("pi_notebook: the run's record could not be written")
            if self._on_finish is not None:
                self._on_finish(self)

    async def _finalize(self) -> None:
        """Stamp the calls from the audit, render the record and replace the live view."""
        audit = getattr(self.session, "audit", None)
        session_id = str(getattr(self.session, "session_id", ""))
        order = list(self.state.order)
        stamps = await asyncio.to_thread(call_stamps, audit, session_id, order, self._since)
        for call_id, stamp in stamps.items():  # the one decision word, from the audit
            decided = stamp.decided()
            if decided is not None and call_id in self.state.cards:
                self.dispatch(decided)
        data = record_bundle(self.state, self._info(settled=True))
        calls = stamped_calls(self.state.card_list(), stamps)
        digest = output_digest(data)
        output = NotebookOutput(
            run_id=self.run_id,
            output_digest=digest,
            calls=calls,
            prompt_digest=prompt_digest(self.prompt),
        )
        record_hash = await asyncio.to_thread(record_output, audit, session_id, output, self._since)
        self.metadata = {
            "run_id": self.run_id,
            "session_id": session_id,
            "model": str(getattr(self.session, "model_name", "unknown")),
            "output_digest": digest,
            "record_hash": record_hash,
            "calls": calls,
        }
        self.record = data
        if self.handle is None:
            return
        self._send(
            partial(self.handle.update, data, raw=True, metadata={"pi_notebook": self.metadata})
        )
        self.provisional.empty()  # after the record: never a moment with neither

    def _info(self, *, settled: bool) -> RunInfo:
        """What the record says about this run besides its state (with its usage and time
        once settled)."""
        model = str(getattr(self.session, "model_name", "unknown"))
        return RunInfo(
            run_id=self.run_id,
            model=model.removesuffix(":offline"),
            label_of=self.label_of,
            view_of=self.view_of,
            usage=self._usage_of(self) if settled and self._usage_of else None,
            elapsed=time.monotonic() - self._started if settled else None,
        )

    def _send(self, update: Callable[[], Any]) -> None:
        if self.background:
            # The cell that showed the view has ended. In a fresh context the kernel sends the
            # update as part of the cell running now, so clients that only listen to that
            # cell (nbclient) still apply it; JupyterLab applies it by display id anyway.
            contextvars.Context().run(update)
        else:
            update()

    @property
    def done(self) -> bool:
        """Whether the run has finished (its record written)."""
        return self.task is not None and self.task.done()

    def dispatch(self, event: Any) -> None:
        """Feed an event to the store and re-render (throttled unless it matters now)."""
        kind = getattr(event, "type", None)
        self.state = reduce(self.state, event, now=time.monotonic())
        if kind in _CARD_EVENTS:
            call_id = getattr(event, "tool_call_id", None)
            if call_id is not None:
                self.view.touch(call_id)
        elif kind in ("message_start", "message_update", "message_end") and self.state.assistant:
            self.view.touch(("text", len(self.state.assistant) - 1))
        self.view.request_render(urgent=kind in _URGENT)
        if kind in SAFETY_EVENTS:
            self.provisional.update()  # before the call can run
        elif kind in _URGENT or kind == "message_end":
            self.provisional.soon()

    def abort(self, reason: str = "stopped") -> None:
        """Stop the run: what the Stop button, ``%pi_abort`` and an interrupt do."""
        if self.done or self.state.settled:
            return
        self.dispatch(StopRequested(reason=reason))
        if self.session.is_running:
            self.session.abort(f"{reason} by the user")
        elif self.task is not None:
            self.task.cancel()

    async def settle(self) -> RunState:
        """Wait until the run has settled and its record is written; returns the state.

        Cancelling the waiter (an interrupt of the cell) does not cancel the run.
        """
        if self.task is None:
            raise RuntimeError("the run was never started")
        await asyncio.shield(self.task)
        return self.state

    async def wait(self, timeout: float | None = None) -> RunState:
        """Wait until the run ends and return its final state (for ``--background`` runs).

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
    def show_review(
        self, tool_call_id: str, state: str, message: str, reasons: tuple[str, ...] = ()
    ) -> None:
        """Show a four-eyes review on the card of ``tool_call_id``: ``waiting`` (the card awaits
        approval and says whom it waits for), then ``approved``, ``rejected`` or ``expired``."""
        if tool_call_id not in self.state.cards:
            return
        if state == "waiting":
            self.dispatch(ApprovalRequested(tool_call_id=tool_call_id, reasons=reasons))
            line = widgets.HTML()
            line.add_class("pi-review-wait")
            self.view.card(tool_call_id).show_prompt(line)
        elif is_decision(state):
            self.dispatch(ApprovalResolved(tool_call_id=tool_call_id, decision=state))
        box = self.view.card(tool_call_id).approval_box
        line = box.children[0] if box is not None and box.children else None
        if isinstance(line, widgets.HTML) and "pi-review-wait" in line._dom_classes:
            line.value = f"<div class='pi-meta'>{html.escape(message)}</div>"

    def attach_prompt(
        self, prompt: Prompt, tool_call_id: str | None, reasons: tuple[str, ...] = ()
    ) -> None:
        """Show ``prompt`` in the card of ``tool_call_id`` (or below the cards if ``None``)."""
        self.prompts.append(prompt)
        request = getattr(prompt, "request", None)
        if tool_call_id is not None and isinstance(getattr(request, "args_hash", None), str):
            self.provisional.args_hashes[tool_call_id] = request.args_hash  # pyright: ignore[reportOptionalMemberAccess]
        if tool_call_id is not None and tool_call_id in self.state.cards:
            self.dispatch(ApprovalRequested(tool_call_id=tool_call_id, reasons=reasons))
            self.view.card(tool_call_id).show_prompt(prompt)
            if isinstance(prompt, ApprovalPrompt):
                approval = prompt

                def resolved(_prompt: Prompt) -> None:
                    decided = approval.decision
                    if decided == "granted":  # the person was asked: they approved, by a grant
                        decided = "approved"
                    self.dispatch(
                        ApprovalResolved(
                            tool_call_id=tool_call_id,
                            decision=decided if is_decision(decided) else "expired",
                            edited_args=approval.outcome().edited_args,
                        )
                    )

                approval.on_decided(resolved)
        else:
            self.view.show_dialog(prompt)
        for waiter in self._prompt_waiters:
            if not waiter.done():
                waiter.set_result(prompt)
        self._prompt_waiters.clear()

    async def next_prompt(self, timeout: float | None = 60) -> Prompt:
        """The first prompt not yet answered, waiting for one if needed.

        For executed notebooks and tests: ``(await run.next_prompt()).approve()`` does what
        a person's click on Approve does. If a person already answered (or the run ended
        after asking), the last prompt comes back as it is, so ``approve()`` on it is a
        harmless ``False`` rather than an error.

        Raises:
            RuntimeError: the run ended without ever asking anything.
            TimeoutError: no prompt appeared within ``timeout`` seconds.
        """
        for prompt in self.prompts:
            if not prompt.decided:
                return prompt
        if self.done or self.state.settled:
            if self.prompts:
                return self.prompts[-1]
            raise RuntimeError(f"the run ended ({self.state.status}) without asking anything")
        waiter: asyncio.Future[Prompt] = asyncio.get_running_loop().create_future()
        self._prompt_waiters.append(waiter)
        try:
            return await asyncio.wait_for(waiter, timeout)
        except RuntimeError:
            if self.prompts:
                return self.prompts[-1]
            raise

    # -- results -----------------------------------------------------------------
    def results(self) -> dict[str, pd.DataFrame]:
        """Each call's result DataFrame (from ``details["dataframe"]``), by call id."""
        out: dict[str, pd.DataFrame] = {}
        for card in self.state.card_list():
            frame = result_dataframe(card.details)
            if frame is not None:
                out[card.tool_call_id] = frame
        return out
