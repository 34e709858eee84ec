"""``%pi_usage``'s table: tokens in and out and cost, per session of the kernel."""

from __future__ import annotations

from typing import Any

__all__ = ["usage_frame"]


def usage_frame(past: list[tuple[str, Any]], session: Any) -> Any:
    """A DataFrame with one row per session: the replaced ones (``past``: model and
    ``UsageTotals``), then ``session`` if any, marked ``current``."""
    import pandas as pd

    rows: list[tuple[str, Any, bool]] = [(m, u, False) for m, u in past]
    if session is not None:
        rows.append((session.model_name, session.usage, True))
    columns = [
        "session",
        "model",
        "requests",
        "input_tokens",
        "output_tokens",
        "cache_read_tokens",
        "cache_write_tokens",
        "cost_usd",
        "current",
    ]
    return pd.DataFrame(
        [
            (
                i + 1,
                model,
                u.requests,
                u.prompt_tokens,
                u.output_tokens,
                u.cache_read_tokens,
                u.cache_write_tokens,
                u.cost_usd,
                current,
            )
            for i, (model, u, current) in enumerate(rows)
        ],
        columns=columns,
    )
