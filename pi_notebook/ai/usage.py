"""Token usage and cost, summed over assistant messages.

Every assistant message carries the ``usage`` its provider reported. :class:`UsageTotals`
adds them up, with the cost where every message's model has a price
(:mod:`pi_notebook.ai.pricing`); one message of an unpriced model makes the cost unknown
(``None``), never a partial sum presented as the whole.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from .messages import AssistantMessage, Message, Usage
from .pricing import cost_usd, price_for

__all__ = ["UsageMeter", "UsageTotals", "usage_of"]


@dataclass(kw_only=True)
class UsageTotals(Usage):
    """Tokens in and out, cost and request count of some model requests.

    Attributes:
        input_tokens: prompt tokens billed as fresh input (cache reads and writes apart).
        output_tokens: tokens the model produced.
        cache_read_tokens: prompt tokens served from the provider's cache.
        cache_write_tokens: prompt tokens written to the provider's cache.
        cost_usd: dollars, or ``None`` when a model without a known price was used.
        requests: model requests answered (failed or blocked requests that used no tokens
            are not counted).
    """

    cost_usd: float | None = 0.0
    requests: int = 0

    @property
    def prompt_tokens(self) -> int:
        """Every token sent: fresh input plus cache reads and writes."""
        return self.input_tokens + self.cache_read_tokens + self.cache_write_tokens

    def add(self, message: AssistantMessage) -> None:
        """Count one assistant message (in place)."""
        usage = message.usage
        used = usage.total_tokens > 0
        if not used and message.stop_reason in ("error", "aborted"):
            return  # nothing was answered, nothing billed
        self.requests += 1
        self.input_tokens += usage.input_tokens
        self.output_tokens += usage.output_tokens
        self.cache_read_tokens += usage.cache_read_tokens
        self.cache_write_tokens += usage.cache_write_tokens
        if not used or self.cost_usd is None:
            return
        price = price_for(message.provider, message.model)
        self.cost_usd = None if price is None else self.cost_usd + cost_usd(usage, price)

    def copy(self) -> UsageTotals:
        return UsageTotals(**vars(self))

    def __str__(self) -> str:
        parts = [f"{self.prompt_tokens:,} tokens in", f"{self.output_tokens:,} out"]
        if self.cache_read_tokens:
            parts.append(f"{self.cache_read_tokens:,} from cache")
        parts.append(f"{self.requests} request{'s' if self.requests != 1 else ''}")
        parts.append("cost unknown" if self.cost_usd is None else f"${self.cost_usd:.4f}")
        return ", ".join(parts)


def usage_of(messages: Iterable[Message]) -> UsageTotals:
    """The totals of the assistant messages among ``messages`` (e.g. one run's)."""
    totals = UsageTotals()
    for message in messages:
        if isinstance(message, AssistantMessage):
            totals.add(message)
    return totals


class UsageMeter:
    """Totals for a session and for its latest run, fed with the agent's events."""

    def __init__(self) -> None:
        self.session = UsageTotals()
        self.run = UsageTotals()

    def observe(self, event: Any) -> None:
        """Count ``message_end`` of assistant messages; ``agent_start`` begins a new run."""
        kind = getattr(event, "type", None)
        if kind == "agent_start":
            self.run = UsageTotals()
        elif kind == "message_end":
            message = getattr(event, "message", None)
            if isinstance(message, AssistantMessage):
                self.session.add(message)
                self.run.add(message)
