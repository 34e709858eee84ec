"""``ProvisionalOutput``: one run's provisional record (:mod:`.provisional`) as a live output.

A run in a kernel shows it below its live view (a terminal keeps no file: no output). It is
sent again before anything it does not name can run (:meth:`~ProvisionalOutput.update`, after
:data:`~.provisional.SAFETY_EVENTS`), at most every :data:`~.provisional.EVERY_S` seconds after
other events (:meth:`~ProvisionalOutput.soon`), and emptied once the run's record is shown
(:meth:`~ProvisionalOutput.empty`), so the file holds one record per run.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from functools import partial
from typing import Any

from .provisional import (
    BLANK,
    EVERY_S,
    provisional_bundle,
    provisional_calls,
    provisional_metadata,
)
from .record import RunInfo
from .store import RunState

__all__ = ["ProvisionalOutput"]


class ProvisionalOutput:
    """The provisional record's output of one run, until the run settles.

    Args:
        run_id: the run's id.
        session: the run's session (its ``session_id`` is stamped in the metadata).
        prompt: the run's prompt.
        state_of: the run's current state.
        info_of: what the record says about the run besides its state (unsettled).
        send: sends a display update the way the run sends its own.

    Attributes:
        handle: the output's display handle once shown (else ``None``).
        args_hashes: call id -> the arguments hash its approval binds to.
    """

    def __init__(
        self,
        run_id: str,
        session: Any,
        prompt: str,
        *,
        state_of: Callable[[], RunState],
        info_of: Callable[[], RunInfo],
        send: Callable[[Callable[[], Any]], None],
    ) -> None:
        self.handle: Any = None
        self.args_hashes: dict[str, str] = {}
        self._run_id, self._session, self._prompt = run_id, session, prompt
        self._state_of, self._info_of, self._send = state_of, info_of, send
        self._cache: dict[str, tuple[Any, str]] = {}
        self._timer: asyncio.TimerHandle | None = None

    def show(self) -> None:
        """Display the provisional record in the current cell, with a display id."""
        from IPython.display import display

        data, metadata = self._render()
        self.handle = display(data, raw=True, metadata=metadata, display_id=True)

    def update(self) -> None:
        """Send the provisional record as the state is now (before anything more can run)."""
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None
        if self.handle is None or self._state_of().settled:
            return
        data, metadata = self._render()
        self._send(partial(self.handle.update, data, raw=True, metadata=metadata))

    def soon(self) -> None:
        """Send it within :data:`~.provisional.EVERY_S` seconds (at once without a loop)."""
        if self._timer is not None or self.handle is None:
            return
        try:
            loop = asyncio.get_running_loop()
        except RuntimeError:
            self.update()
            return
        self._timer = loop.call_later(EVERY_S, self.update)

    def stop(self) -> None:
        """Send nothing more that is pending (the run ended)."""
        if self._timer is not None:
            self._timer.cancel()

    def empty(self) -> None:
        """Empty the output (:data:`~.provisional.BLANK`): the run's record is shown."""
        if self.handle is not None:
            self._send(partial(self.handle.update, BLANK, raw=True, metadata={}))

    def _render(self) -> tuple[dict[str, str], dict[str, Any]]:
        state = self._state_of()
        data = provisional_bundle(state, self._info_of(), self._prompt, cache=self._cache)
        calls = provisional_calls(state, self.args_hashes.get)
        session_id = str(getattr(self._session, "session_id", ""))
        return data, provisional_metadata(self._run_id, session_id, self._prompt, calls)
