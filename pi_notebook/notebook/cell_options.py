"""A ``%%pi`` cell's options (``--background``, ``-o NAME``) and binding its result to NAME.

``-o NAME`` binds the run's last result DataFrame (the last call's with columns: a write's
empty result is not one) to ``NAME`` in the user namespace when the run settles, however it
settles; a run with no result DataFrame leaves ``NAME`` as it was and says so in one line.
What does not belong here: running the cell (:mod:`.cell`, :mod:`.state`).
"""

from __future__ import annotations

import keyword
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from IPython.core.error import UsageError

if TYPE_CHECKING:
    from .run import Run

__all__ = ["CELL_USAGE", "CellOptions", "bind_output", "parse_cell_options"]

CELL_USAGE = "%%pi [--background] [-o NAME]"


@dataclass(frozen=True, kw_only=True)
class CellOptions:
    """What the ``%%pi`` line asked for."""

    background: bool = False
    """``--background``: the cell returns at once; the run goes on."""
    output: str | None = None
    """``-o NAME``: the variable the run's last result DataFrame is bound to."""


def parse_cell_options(line: str) -> CellOptions:
    """The options of a ``%%pi`` line.

    Raises:
        UsageError: an unknown option, ``-o`` without a name, or a name that is not a
            variable name.
    """
    words = line.split()
    background, output, unknown = False, None, []
    i = 0
    while i < len(words):
        word = words[i]
        if word == "--background":
            background = True
        elif word in ("-o", "--out"):
            if i + 1 >= len(words):
                raise UsageError(f"-o needs a variable name, e.g. %%pi -o df. Usage: {CELL_USAGE}")
            i += 1
            output = words[i]
        else:
            unknown.append(word)
        i += 1
    if unknown:
        raise UsageError(
            f"%%pi takes only --background and -o NAME (got {' '.join(unknown)}): "
            "write the question in the cell body."
        )
    if output is not None and (not output.isidentifier() or keyword.iskeyword(output)):
        raise UsageError(f"{output!r} is not a variable name: use e.g. %%pi -o df.")
    return CellOptions(background=background, output=output)


def bind_output(run: Run, name: str, namespace: dict[str, Any]) -> bool:
    """Bind ``run``'s last result DataFrame to ``name`` in ``namespace``; returns whether it did.

    Without one, ``name`` is left as it was and one line says so.
    """
    frames = [f for f in run.results().values() if len(f.columns)]
    if frames:
        namespace[name] = frames[-1]
        return True
    kept = f" ({name} keeps its earlier value)" if name in namespace else ""
    print(f"No result DataFrame from this run ({run.state.status}): {name} was not set{kept}.")
    return False
