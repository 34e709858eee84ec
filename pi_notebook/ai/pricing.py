"""Prices of the common OpenAI and Anthropic models, in US dollars per million tokens.

A small table, not a live feed: list prices as published by the vendors (standard tier, no
batch discount). A model that is not in the table has no price, and its cost is unknown:
:func:`price_for` returns ``None`` rather than a guess. Dated snapshots (``gpt-4o-2024-08-06``,
``claude-sonnet-4-5-20250929``) and ``-latest`` aliases resolve to their family's entry unless
the table lists them on their own.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from .messages import Usage

__all__ = ["PRICES", "Price", "cost_usd", "price_for"]


@dataclass(frozen=True, kw_only=True)
class Price:
    """Dollars per million tokens: fresh input, output, cache reads, cache writes."""

    input: float
    output: float
    cache_read: float = 0.0
    cache_write: float = 0.0


def _p(input: float, output: float, cache_read: float = 0.0, cache_write: float = 0.0) -> Price:
    return Price(input=input, output=output, cache_read=cache_read, cache_write=cache_write)


PRICES: dict[tuple[str, str], Price] = {
    # OpenAI (cached input is billed at the cache-read price; no separate write price)
    ("openai", "gpt-4o"): _p(2.50, 10.00, 1.25),
    ("openai", "gpt-4o-2024-05-13"): _p(5.00, 15.00),
    ("openai", "gpt-4o-mini"): _p(0.15, 0.60, 0.075),
    ("openai", "gpt-4.1"): _p(2.00, 8.00, 0.50),
    ("openai", "gpt-4.1-mini"): _p(0.40, 1.60, 0.10),
    ("openai", "gpt-4.1-nano"): _p(0.10, 0.40, 0.025),
    ("openai", "gpt-5"): _p(1.25, 10.00, 0.125),
    ("openai", "gpt-5-mini"): _p(0.25, 2.00, 0.025),
    ("openai", "gpt-5-nano"): _p(0.05, 0.40, 0.005),
    ("openai", "gpt-5.1"): _p(1.25, 10.00, 0.125),
    ("openai", "o1"): _p(15.00, 60.00, 7.50),
    ("openai", "o3"): _p(2.00, 8.00, 0.50),
    ("openai", "o3-mini"): _p(1.10, 4.40, 0.55),
    ("openai", "o4-mini"): _p(1.10, 4.40, 0.275),
    # Anthropic (cache writes: 5-minute TTL price)
    ("anthropic", "claude-opus-4-5"): _p(5.00, 25.00, 0.50, 6.25),
    ("anthropic", "claude-opus-4-1"): _p(15.00, 75.00, 1.50, 18.75),
    ("anthropic", "claude-opus-4"): _p(15.00, 75.00, 1.50, 18.75),
    ("anthropic", "claude-opus-4-0"): _p(15.00, 75.00, 1.50, 18.75),
    ("anthropic", "claude-sonnet-4-5"): _p(3.00, 15.00, 0.30, 3.75),
    ("anthropic", "claude-sonnet-4"): _p(3.00, 15.00, 0.30, 3.75),
    ("anthropic", "claude-sonnet-4-0"): _p(3.00, 15.00, 0.30, 3.75),
    ("anthropic", "claude-3-7-sonnet"): _p(3.00, 15.00, 0.30, 3.75),
    ("anthropic", "claude-3-5-sonnet"): _p(3.00, 15.00, 0.30, 3.75),
    ("anthropic", "claude-haiku-4-5"): _p(1.00, 5.00, 0.10, 1.25),
    ("anthropic", "claude-3-5-haiku"): _p(0.80, 4.00, 0.08, 1.00),
    ("anthropic", "claude-3-haiku"): _p(0.25, 1.25, 0.03, 0.30),
    ("anthropic", "claude-3-opus"): _p(15.00, 75.00, 1.50, 18.75),
}
"""(provider, model id) -> price. Extend it in place for a model you use."""

# A trailing snapshot date or alias: -20250929, -2024-08-06, -latest.
_SUFFIX = re.compile(r"-(?:\d{8}|\d{4}-\d{2}-\d{2}|latest)$")


def price_for(provider: str, model_id: str) -> Price | None:
    """The price of ``model_id`` at ``provider`` (``openai``, ``anthropic``), or ``None``.

    Never raises. Only exact ids and their dated snapshots match: ``gpt-4o-mini`` is not
    priced as ``gpt-4o``, and a local model served under an OpenAI-compatible API has no
    price.
    """
    key = (provider.strip().lower(), model_id.strip().lower())
    price = PRICES.get(key)
    if price is None:
        base = _SUFFIX.sub("", key[1])
        if base != key[1]:
            price = PRICES.get((key[0], base))
    return price


def cost_usd(usage: Usage, price: Price) -> float:
    """What ``usage`` costs at ``price``, in dollars."""
    return (
        usage.input_tokens * price.input
        + usage.output_tokens * price.output
        + usage.cache_read_tokens * price.cache_read
        + usage.cache_write_tokens * price.cache_write
    ) / 1_000_000
