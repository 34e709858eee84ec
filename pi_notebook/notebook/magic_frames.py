"""The DataFrames the magics return: the tool registry, the grants in force, a call's result.

``%pi_tools`` shows the registry with the active set, ``%pi_grants`` the scoped grants in
force, and ``%pi_result`` finds a call's result DataFrame across the kernel's runs (the
latest with columns by default), saying so when it was dropped to bound memory.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from IPython.core.error import UsageError

from ..extensions.types import RegisteredTool

__all__ = ["find_result", "grants_frame", "tools_frame"]


def tools_frame(registry: Mapping[str, RegisteredTool], active: Sequence[str]) -> Any:
    """One row per registered tool: name, label, source, kind, whether active, description."""
    import pandas as pd

    active_set = set(active)
    rows = [
        {
            "name": name,
            "label": tool.definition.label,
            "source": str(tool.source_info),
            "kind": tool.source_info.kind,
            "active": name in active_set,
            "description": tool.definition.description,
        }
        for name, tool in registry.items()
    ]
    return pd.DataFrame(rows, columns=["name", "label", "source", "kind", "active", "description"])


def grants_frame(grants: Iterable[Any]) -> Any:
    """One row per grant in force (its ``describe()``), ``expires_at`` as a UTC time."""
    import pandas as pd

    columns = [
        "grant_id",
        "operations",
        "tables",
        "reads",
        "max_rows",
        "expires_at",
        "uses",
        "approver",
        "origin_call_id",
    ]
    rows = [g.describe() for g in grants]
    frame = pd.DataFrame(rows, columns=columns)
    frame["expires_at"] = pd.to_datetime(frame["expires_at"], unit="s", utc=True).dt.floor("s")
    return frame


def find_result(runs: Sequence[Any], call_id: str | None, keep: int | None) -> Any:
    """The result DataFrame of ``call_id`` (``None``: the latest with columns, as a write's
    empty result is not one), newest run first.

    Raises:
        UsageError: it was dropped to bound memory (the notebook keeps the latest ``keep``), or
            there is none.
    """
    found: Any = None
    dropped: str | None = None  # the newest wanted call whose frame was dropped
    for run in reversed(runs):
        results = run.results()
        if call_id is None:
            # By default the latest frame with columns: a write's empty result is not one.
            results = {k: v for k, v in results.items() if len(v.columns)}
        if call_id is None and results:
            found = list(results.values())[-1]
            break
        if call_id in results:
            found = results[call_id]
            break
        for candidate in reversed(run.state.order):
            card = run.state.cards.get(candidate)
            details = card.details if card is not None else None
            if (
                isinstance(details, dict)
                and details.get("dataframe_dropped")
                and call_id in (None, candidate)
                and dropped is None
            ):
                dropped = candidate
    if found is None and dropped is not None:
        raise UsageError(
            f"The result DataFrame of call {dropped!r} was dropped to bound memory: the "
            f"notebook keeps those of the latest {keep} calls. Its record still shows a "
            "preview; re-run its %%pi cell for the rows (or keep more with the environment "
            "variable PI_NOTEBOOK_KEEP_RESULTS, or current().session.result_retention.keep)."
        )
    if found is None:
        what = f"call {call_id!r}" if call_id else "any call"
        raise UsageError(
            f"No result DataFrame for {what}: run a query first (see %pi_audit for call ids)."
        )
    return found
