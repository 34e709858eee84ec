"""The kernel the notebook runs in, and what it can do while a cell awaits.

Outside a kernel (a terminal, a script, a test shell) there is none: no widget messages to
wait for, and no file to keep a provisional record in.
"""

from __future__ import annotations

import inspect
from typing import Any

__all__ = ["kernel_handles_comms_while_awaiting", "kernel_of_shell"]


def kernel_of_shell() -> Any:
    """The kernel of the running IPython shell (``None`` in a terminal, a script, a test)."""
    try:
        from IPython.core.getipython import get_ipython
    except ImportError:  # pragma: no cover - IPython is a dependency
        return None
    return getattr(get_ipython(), "kernel", None)


def kernel_handles_comms_while_awaiting() -> bool:
    """Whether widget messages reach the kernel while a cell is awaiting.

    A feature check, not a version check: ipykernel dispatches ``comm_msg`` beside a busy
    cell only where ``dispatch_shell`` takes the ``concurrent`` flag. Outside a kernel (a
    script, a test shell) there are no comm messages to wait for, so awaiting is safe.
    """
    kernel = kernel_of_shell()
    if kernel is None:
        return True
    dispatch = getattr(kernel, "dispatch_shell", None)
    try:
        return dispatch is not None and "concurrent" in inspect.signature(dispatch).parameters
    except (TypeError, ValueError):
        return False
