"""The IPython extension (layer 6): ``%load_ext pi_notebook``, magics, the event store,
the widgets that render it, and the notebook's ``UIContext``.

Flow: a ``%%pi`` cell awaits its run on the kernel's loop (:mod:`.cell`), so it stays busy
until the run settles while widget clicks (Approve / Reject, Stop) still reach the kernel and
an interrupt stops the run; session events go through the pure reducer in :mod:`.store`; the
live view re-renders only what changed, throttled; when the run settles its durable record
(:mod:`.record`), stamped with provenance, replaces the live view in the cell's output.
"""

from __future__ import annotations

from typing import Any

from .cell import RunInterrupted
from .config import PiNotebook
from .prompts import ApprovalPrompt, ChoicePrompt, Prompt, TextPrompt
from .record import RunInfo, record_bundle
from .run import AwaitNotSupportedError, Run, kernel_handles_comms_while_awaiting
from .state import NotebookState
from .store import CardState, RunState, reduce
from .ui import NotebookUI
from .view import RunView

__all__ = [
    "ApprovalPrompt",
    "AwaitNotSupportedError",
    "CardState",
    "ChoicePrompt",
    "NotebookState",
    "NotebookUI",
    "PiNotebook",
    "Prompt",
    "Run",
    "RunInfo",
    "RunInterrupted",
    "RunState",
    "RunView",
    "TextPrompt",
    "current",
    "kernel_handles_comms_while_awaiting",
    "load_ipython_extension",
    "record_bundle",
    "reduce",
    "unload_ipython_extension",
]

_STATE: NotebookState | None = None


def current() -> NotebookState:
    """The notebook state of this kernel: ``.session``, ``.last_run``, ``.runs``, ``.audit``.

    Raises:
        RuntimeError: the extension is not loaded.
    """
    if _STATE is None:
        raise RuntimeError("pi_notebook is not loaded: run %load_ext pi_notebook first.")
    return _STATE


def load_ipython_extension(ipython: Any) -> None:
    """``%load_ext pi_notebook``: build the session and register the magics.

    With no configuration: the offline model and the database extension on the bundled
    sample database; one status line says so.
    """
    from . import cell
    from .magics import PiMagics

    global _STATE
    if _STATE is not None:
        unload_ipython_extension(ipython)
    from IPython.core.error import UsageError

    from ..ai.resolve import ModelSpecError

    config = PiNotebook(parent=ipython)
    state = NotebookState(config, namespace=ipython.user_ns)
    try:
        state.build()
    except ModelSpecError as exc:
        raise UsageError(f"{exc} Fix it with %config PiNotebook.model = 'offline'.") from None
    ipython.configurables.append(config)
    ipython.register_magics(PiMagics(ipython, state))
    from .review_magic import ReviewMagics

    ipython.register_magics(ReviewMagics(ipython, state))
    cell.install(ipython)
    _STATE = state
    print(state.status_line())


def unload_ipython_extension(ipython: Any) -> None:
    """``%unload_ext pi_notebook``: stop any run, close the session, remove the magics."""
    global _STATE
    state, _STATE = _STATE, None
    if state is None:
        return
    from . import cell

    cell.uninstall(ipython)
    state.close()
    if state.config in ipython.configurables:
        ipython.configurables.remove(state.config)
    from .magics import PiMagics

    manager = ipython.magics_manager
    for kind, names in PiMagics.magics.items():  # every magic the class declares, by kind
        for name in names:
            manager.magics[kind].pop(name, None)
    manager.registry.pop(PiMagics.__name__, None)
    from .review_magic import REVIEW_MAGIC_NAMES, ReviewMagics

    for name in REVIEW_MAGIC_NAMES:
        manager.magics["line"].pop(name, None)
    review = manager.registry.pop(ReviewMagics.__name__, None)
    if isinstance(review, ReviewMagics):
        review.close()
