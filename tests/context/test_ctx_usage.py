"""Usage and cost: tokens summed from the assistant messages, priced from a small table,
unknown prices never guessed; per session (``session.usage``) and per run."""

from __future__ import annotations

import pytest

from pi_notebook import create_agent_session
from pi_notebook.ai.messages import AssistantMessage, Usage
from pi_notebook.ai.pricing import PRICES, price_for
from pi_notebook.ai.usage import UsageTotals, usage_of
from pi_notebook.testing import ScriptedModel, text, tool_call, turn


def priced_model(*steps: object, model_id: str = "gpt-4o-mini") -> ScriptedModel:
    return ScriptedModel(list(steps), id=model_id, provider="openai")  # type: ignore[arg-type]


async def test_session_usage_sums_tokens_and_cost_per_session_and_per_run(make_tool) -> None:
    model = priced_model(
        turn(tool_call("echo", {"text": "a"}), usage=Usage(input_tokens=1_000, output_tokens=100)),
        turn(
            text("first"),
            usage=Usage(input_tokens=2_000, output_tokens=200, cache_read_tokens=1_000),
        ),
        turn(text("second"), usage=Usage(input_tokens=500, output_tokens=50)),
    )
    session = create_agent_session(model=model, custom_tools=[make_tool()], audit=False)
    await session.prompt("one")
    run1 = session.last_run_usage
    assert (run1.input_tokens, run1.output_tokens, run1.cache_read_tokens) == (3_000, 300, 1_000)
    assert run1.requests == 2
    price = PRICES[("openai", "gpt-4o-mini")]
    expected1 = (3_000 * price.input + 300 * price.output + 1_000 * price.cache_read) / 1e6
    assert run1.cost_usd == pytest.approx(expected1)
    await session.prompt("two")
    run2, total = session.last_run_usage, session.usage
    assert (run2.input_tokens, run2.output_tokens, run2.requests) == (500, 50, 1)
    assert (total.input_tokens, total.output_tokens, total.requests) == (3_500, 350, 3)
    assert total.cost_usd == pytest.approx(
        expected1 + (500 * price.input + 50 * price.output) / 1e6
    )
    assert total == usage_of(session.messages)
    assert "4,500 tokens in, 350 out" in str(total) and "$" in str(total)


async def test_unknown_price_gives_no_cost_never_a_guess() -> None:
    model = ScriptedModel(
        [turn(text("hi"), usage=Usage(input_tokens=10, output_tokens=5))],
        id="llama3.1",
        provider="openai",
    )
    session = create_agent_session(model=model, audit=False)
    await session.prompt("x")
    usage = session.usage
    assert (usage.input_tokens, usage.output_tokens, usage.requests) == (10, 5, 1)
    assert usage.cost_usd is None and "cost unknown" in str(usage)


def test_one_unpriced_message_makes_the_total_cost_unknown() -> None:
    totals = UsageTotals()
    totals.add(
        AssistantMessage(model="gpt-4o", provider="openai", usage=Usage(input_tokens=1_000_000))
    )
    assert totals.cost_usd == pytest.approx(2.50)
    totals.add(AssistantMessage(model="my-local", provider="openai", usage=Usage(input_tokens=1)))
    assert totals.cost_usd is None


def test_failed_requests_without_tokens_are_not_counted() -> None:
    totals = usage_of(
        [
            AssistantMessage(
                stop_reason="error", model="gpt-4o", provider="openai", error_message="x"
            ),
            AssistantMessage(model="gpt-4o", provider="openai", usage=Usage(output_tokens=3)),
        ]
    )
    assert totals.requests == 1 and totals.output_tokens == 3


@pytest.mark.parametrize(
    ("provider", "model_id", "expected"),
    [
        ("openai", "gpt-4o-2024-08-06", PRICES[("openai", "gpt-4o")]),
        ("openai", "gpt-4o-2024-05-13", PRICES[("openai", "gpt-4o-2024-05-13")]),
        ("anthropic", "claude-sonnet-4-5-20250929", PRICES[("anthropic", "claude-sonnet-4-5")]),
        ("anthropic", "claude-3-7-sonnet-latest", PRICES[("anthropic", "claude-3-7-sonnet")]),
        ("Anthropic", "Claude-Haiku-4-5", PRICES[("anthropic", "claude-haiku-4-5")]),
        ("openai", "gpt-4o-mini-tts", None),
        ("openai", "claude-sonnet-4-5", None),
        ("ollama", "llama3.1:8b", None),
        ("scripted", "scripted", None),
    ],
)
def test_price_lookup_exact_ids_and_dated_snapshots_only(provider, model_id, expected) -> None:
    assert price_for(provider, model_id) == expected
