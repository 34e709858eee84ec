"""A ``%%pi`` cell that runs like any cell: busy until its run settles, stopped by interrupt.

A cell magic is a plain function, and the kernel's loop cannot run while it blocks, so a
blocking magic would freeze the very clicks (Approve, Reject, Stop) the run waits for.
Instead, an IPython input transformer (installed by ``%load_ext``) rewrites a ``%%pi`` cell
into one awaited call, ``await run_pi_cell(options, body)``. Under IPython's autoawait the
kernel runs that cell as a coroutine on its own loop: the cell is busy until the run settles
(Run All and nbclient need no explicit wait), and ipykernel (≥ 7.4) still dispatches widget
messages while a cell awaits.

An interrupt (the ■ button, ``KernelManager.interrupt_kernel``) cancels the awaiting cell;
:func:`run_pi_cell` then stops the run as Stop does, waits for it to settle (the query is
cancelled, the record is written) and raises :class:`RunInterrupted`, so a Run All stops
there as it does for any interrupted cell.

The transformer leaves the cell to the ``%%pi`` magic (which starts the run and returns at
once) when the cell asks for ``--background``, outside a kernel, with autoawait off, or where
the kernel cannot take widget messages while a cell awaits; the kernel's interrupt still
stops such a run while no other cell runs (:mod:`.interrupt`).
"""

from __future__ import annotations

import asyncio
import re
from typing import Any

from ..errors import PiNotebookError
from .kernel import kernel_handles_comms_while_awaiting

__all__ = ["RunInterrupted", "install", "pi_cell_transformer", "run_pi_cell", "uninstall"]

_PI_CELL = re.compile(r"^%%pi(?:[ \t]+(?P<options>[^\n]*))?\s*$")
_SETTLE_AFTER_INTERRUPT_S = 30.0


class RunInterrupted(PiNotebookError, KeyboardInterrupt):
    """The kernel was interrupted during a ``%%pi`` cell; the run was stopped."""

    def _render_traceback_(self) -> list[str]:
        # IPython shows this instead of a traceback: one line that says what happened.
        return [f"KeyboardInterrupt: {self}"]


def _shell() -> Any:
    from IPython.core.getipython import get_ipython

    return get_ipython()


def _can_await(shell: Any) -> bool:
    if shell is None or getattr(shell, "kernel", None) is None:
        return False
    if not getattr(shell, "autoawait", False):
        return False
    try:
        from IPython.core.async_helpers import _asyncio_runner  # the runner ipykernel checks
    except ImportError:  # pragma: no cover - IPython ≥ 8 has it
        return False
    if getattr(shell, "loop_runner", None) is not _asyncio_runner:
        return False
    return kernel_handles_comms_while_awaiting()


def pi_cell_transformer(lines: list[str]) -> list[str]:
    """IPython cleanup transformer: a ``%%pi`` cell becomes ``await run_pi_cell(...)``."""
    if not lines:
        return lines
    match = _PI_CELL.match(lines[0])
    if match is None:
        return lines
    options = match.group("options") or ""
    if "--background" in options.split() or not _can_await(_shell()):
        return lines
    body = "".join(lines[1:])
    return [
        "await __import__('pi_notebook.notebook.cell', fromlist=['run_pi_cell'])"
        f".run_pi_cell({options!r}, {body!r})\n"
    ]


async def run_pi_cell(options: str, body: str) -> None:
    """Run the cell's prompt and wait until it settles (what a transformed ``%%pi`` does).

    Raises:
        UsageError: the cell is empty, has an unknown option, or a run is still going.
        RunInterrupted: the kernel was interrupted; the run was stopped and its record shown.
    """
    from . import current

    state = current()
    run = state.start_cell_run(options, body, background=False)
    try:
        await run.settle()
    except (asyncio.CancelledError, KeyboardInterrupt):
        run.abort("interrupted")
        try:
            await asyncio.wait_for(asyncio.shield(_finished(run)), _SETTLE_AFTER_INTERRUPT_S)
        except (TimeoutError, asyncio.CancelledError):
            pass
        status = run.state.status
        raise RunInterrupted(
            "the run was stopped; its record is above."
            if status == "stopped"
            else f"the run ended ({status}) as the kernel was interrupted; its record is above."
        ) from None


async def _finished(run: Any) -> None:
    if run.task is not None:
        await asyncio.wait({run.task})


def install(shell: Any) -> None:
    """Add the transformer to ``shell`` (idempotent)."""
    transformers = getattr(shell, "input_transformers_cleanup", None)
    if transformers is not None and pi_cell_transformer not in transformers:
        transformers.append(pi_cell_transformer)


def uninstall(shell: Any) -> None:
    """Remove the transformer from ``shell``."""
    transformers = getattr(shell, "input_transformers_cleanup", None)
    if transformers is not None and pi_cell_transformer in transformers:
        transformers.remove(pi_cell_transformer)
