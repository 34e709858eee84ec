"""Notebook context as an extension with a namespace: ``{name}`` interpolation and
DataFrame mentions (shape, columns, dtypes; never rows)."""

from __future__ import annotations

import re
from typing import Any

import pandas as pd
import pytest

from pi_notebook import create_agent_session
from pi_notebook.ai.messages import content_text
from pi_notebook.notebook.context import CUSTOM_TYPE, interpolate, notebook_context
from pi_notebook.testing import ScriptedModel, text

ORDERS = pd.DataFrame(
    {
        "order_id": [1, 2, 3],
        "status": ["shipped", "delivered", "secret-row-value"],
        "total": [9.5, 20.0, 7.25],
    }
)


async def sent_messages(namespace: dict[str, Any], prompt: str) -> list[Any]:
    model = ScriptedModel([text("ok")])
    session = create_agent_session(
        model=model, extensions=[notebook_context(namespace)], audit=False
    )
    await session.prompt(prompt)
    await session.close()
    return list(model.calls[0].messages)


@pytest.mark.parametrize(
    ("prompt", "expected"),
    [
        ("Top {n} rows of {table}", "Top 5 rows of orders"),
        ("Literal {{braces}} and {{n}}", "Literal {braces} and {n}"),
        ("Unknown {nope} stays", "Unknown {nope} stays"),
        (
            "Not a name: {n + 1}, {table.upper()}, {'a': 1}, { n }",
            "Not a name: {n + 1}, {table.upper()}, {'a': 1}, { n }",
        ),
        ("Keywords {class} stay", "Keywords {class} stay"),
        ("A list {items}", "A list [1, 2, 3]"),
        ("Nested {{{n}}}", "Nested {5}"),
        ('JSON {"a": {n}}', 'JSON {"a": 5}'),
        ("No braces at all", "No braces at all"),
    ],
)
def test_interpolation_rules(prompt: str, expected: str) -> None:
    namespace = {"n": 5, "table": "orders", "items": [1, 2, 3]}
    assert interpolate(prompt, namespace) == expected


def test_interpolated_values_are_bounded_and_never_show_a_url_password() -> None:
    namespace = {
        "url": "postgresql://analyst:hunter2@db.internal:5432/shop",
        "big": "x" * 10_000,
        "many": list(range(100_000)),
    }
    out = interpolate("{url} {big} {many}", namespace, max_value_chars=500)
    assert "hunter2" not in out and "postgresql://analyst:***@db.internal:5432/shop" in out
    assert "[cut at 500 of 10,000 characters]" in out
    assert "99999" not in out and "..." in out  # reprlib shortens the list before the cut


def test_a_value_with_a_broken_repr_does_not_break_the_prompt() -> None:
    class Broken:
        def __repr__(self) -> str:
            raise RuntimeError("no repr")

    assert interpolate("see {thing}", {"thing": Broken()}).startswith("see <Broken instance at")


async def test_session_prompt_is_interpolated_before_the_model_and_the_history() -> None:
    namespace = {"region": "EMEA"}
    messages = await sent_messages(namespace, "Revenue for {region} in {{2024}}")
    assert [content_text(m.content) for m in messages] == ["Revenue for EMEA in {2024}"]
    namespace["region"] = "APAC"  # read at each prompt
    messages = await sent_messages(namespace, "Revenue for {region}")
    assert content_text(messages[-1].content) == "Revenue for APAC"


async def test_mentioning_a_dataframe_injects_shape_columns_and_dtypes_not_rows() -> None:
    namespace = {"orders": ORDERS, "_": ORDERS, "order_count": 3, "s": ORDERS["total"]}
    messages = await sent_messages(
        namespace, "What is the average total in orders? Compare with s."
    )
    injected, prompt = messages
    assert injected.custom_type == CUSTOM_TYPE and prompt.custom_type is None
    body = content_text(injected.content)
    assert re.search(
        r"- orders: pandas DataFrame, 3 rows x 3 columns: order_id \(int64\), "
        r"status \((object|str)\), total \(float64\)",
        body,
    )
    assert "- s: pandas Series, 3 values, dtype float64" in body
    assert "secret-row-value" not in body and "shipped" not in body and "20.0" not in body
    assert "- _:" not in body


async def test_no_mention_no_message_and_partial_words_do_not_count() -> None:
    namespace = {"orders": ORDERS}
    messages = await sent_messages(namespace, "How many reorders_x are there? preorders?")
    assert len(messages) == 1


async def test_interpolating_a_dataframe_is_asking_for_its_rows() -> None:
    namespace = {"orders": ORDERS}
    messages = await sent_messages(namespace, "Summarise {orders}")
    assert "secret-row-value" in content_text(messages[-1].content)
