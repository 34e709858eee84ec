"""The kernel's interrupt (■) stops a ``%%pi --background`` run that is still going.

An awaited ``%%pi`` cell is stopped by the interrupt as any busy cell is (:mod:`.cell`). A
background run outlives its cell, and an idle ipykernel ignores SIGINT (``SIG_IGN``), so
without this the ■ would do nothing to it. ipykernel installs ``default_int_handler`` around
each shell message and, after it, restores ``kernel.saved_sigint_handler``, the handler it
found before. While a background run goes on, that handler is ours: so while no cell runs, a
SIGINT asks the loop to stop the run (as Stop does); while a cell runs, the interrupt stays
that cell's (the run goes on). When the run settles, the previous handler is put back.

Where the kernel has no such hook (another kernel, a terminal IPython, a test shell) nothing
is installed. What does not belong here: stopping the run (``Run.abort``).
"""

from __future__ import annotations

import asyncio
import signal
import threading
from typing import Any

from .run import Run

__all__ = ["stop_on_interrupt"]

_HOOK = "saved_sigint_handler"  # what ipykernel's post_handler_hook restores after a message


def _kernel() -> Any:
    from IPython.core.getipython import get_ipython

    return getattr(get_ipython(), "kernel", None)


def stop_on_interrupt(run: Run) -> bool:
    """While ``run`` goes on, an interrupt of the idle kernel stops it; returns whether the
    kernel allowed that (an ipykernel shell message being handled in the main thread).

    Call it from the cell that started the run, after :meth:`Run.start`.
    """
    kernel = _kernel()
    task = run.task
    if (
        kernel is None
        or task is None
        or not hasattr(kernel, _HOOK)
        or not callable(getattr(kernel, "post_handler_hook", None))
        or threading.current_thread() is not threading.main_thread()
    ):
        return False
    previous = getattr(kernel, _HOOK)
    if previous is None:  # not a handler Python can put back
        return False
    loop = asyncio.get_running_loop()

    def on_sigint(_signum: int, _frame: Any) -> None:
        # A signal handler: only hand the stop to the loop.
        loop.call_soon_threadsafe(run.abort, "interrupted")

    def restore(_task: Any) -> None:
        if getattr(kernel, _HOOK, None) is on_sigint:
            setattr(kernel, _HOOK, previous)  # a cell is running: the kernel restores it after
        if signal.getsignal(signal.SIGINT) is on_sigint:
            signal.signal(signal.SIGINT, previous)  # the kernel is idle: restore it now

    setattr(kernel, _HOOK, on_sigint)  # installed when this cell's message is handled
    task.add_done_callback(restore)
    return True
