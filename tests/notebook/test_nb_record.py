"""The durable record on its own: escaping, Markdown, numbers for people, themes, order."""

from __future__ import annotations

import pandas as pd

from pi_notebook import TextContent, ToolResult
from pi_notebook.agent.events import (
    AgentEndEvent,
    AgentStartEvent,
    MessageEndEvent,
    MessageStartEvent,
    ToolExecutionEndEvent,
    ToolExecutionStartEvent,
)
from pi_notebook.ai.messages import AssistantMessage
from pi_notebook.notebook import RunInfo, RunState, record_bundle, reduce
from pi_notebook.notebook.format import format_value, frame_html
from pi_notebook.notebook.record import RECORD_CSS


def _said(text: str) -> list[object]:
    message = AssistantMessage(content=[TextContent(text=text)])
    return [MessageStartEvent(message=message), MessageEndEvent(message=message)]


def _call(call_id: str, sql: str, details: object, content: str = "ok") -> list[object]:
    return [
        ToolExecutionStartEvent(tool_call_id=call_id, tool_name="query_database", args={"sql": sql}),
        ToolExecutionEndEvent(tool_call_id=call_id, tool_name="query_database", is_error=False,
                              result=ToolResult(content=[TextContent(text=content)], details=details)),
    ]  # fmt: skip


def _state(*events: object) -> RunState:
    state = RunState()
    for i, event in enumerate([AgentStartEvent(), *events, AgentEndEvent()]):
        state = reduce(state, event, now=float(i))
    return state


INFO = RunInfo(run_id="r1", model="openai:gpt-test", label_of=lambda n: "Query database")


def test_everything_from_the_model_and_the_database_is_escaped() -> None:
    evil = pd.DataFrame({"<b>col</b>": ["<script>alert(1)</script>", "<img src=x onerror=1>"]})
    state = _state(*_said("**Bold** <script>steal()</script> [x](javascript:alert(1))"),
                   *_call("c1", "SELECT '<svg onload=1>'", {"dataframe": evil, "row_count": 2}))  # fmt: skip
    html = record_bundle(state, INFO)["text/html"]
    assert "<strong>Bold</strong>" in html  # Markdown rendered by markdown-it
    for raw in ("<script>", "<img src=x", "<svg onload", "<b>col</b>", 'href="javascript'):
        assert raw not in html
    assert "&lt;script&gt;alert(1)&lt;/script&gt;" in html and "&lt;b&gt;col&lt;/b&gt;" in html


def test_text_and_cards_keep_their_order_in_every_form() -> None:
    frame = pd.DataFrame({"n": [3]})
    state = _state(*_said("First I count."), *_call("c1", "SELECT 1", {"dataframe": frame, "row_count": 1}),
                   *_said("See the table above."))  # fmt: skip
    bundle = record_bundle(state, INFO)
    for mime in ("text/html", "text/plain"):
        text = bundle[mime]
        assert (
            text.index("First I count.")
            < text.index("SELECT 1")
            < text.index("See the table above.")
        )
    assert bundle["text/markdown"] == "First I count.\n\nSee the table above."


def test_numbers_for_people() -> None:
    assert format_value(12_300_000_000.0) == "12,300,000,000"
    assert format_value(1234567) == "1,234,567"
    assert format_value(19.99) == "19.99"
    assert format_value(0.000012) == "1.2e-05"
    assert format_value(float("nan")) == "NULL" and format_value(None) == "NULL"
    frame = pd.DataFrame(
        {"price": [19.99, 5.5, 100.0], "qty": [1, 20, 3000], "name": ["a", "b", "c"]}
    )
    html = frame_html(frame)
    assert ">19.99<" in html and ">5.50<" in html and ">100.00<" in html  # one precision per column
    assert ">3,000<" in html and "pi-num" in html
    assert "e+" not in frame_html(pd.DataFrame({"big": [1.23e10, 4.5e12]}))


def test_a_write_says_how_many_rows_it_changed_and_a_text_result_is_shown() -> None:
    write = {"dataframe": pd.DataFrame(), "row_count": 1234, "statement_kind": "write"}
    state = _state(*_call("w", "UPDATE t SET x = 1", write),
                   *_call("t", "SELECT 2", {"n": 1}, content="42 widgets in stock"))  # fmt: skip
    html = record_bundle(state, INFO)["text/html"]
    assert "1,234 rows changed" in html
    assert "<pre class='pi-content'>42 widgets in stock</pre>" in html


def test_colours_come_from_jupyterlab_variables_and_tables_scroll() -> None:
    assert "var(--jp-success-color1" in RECORD_CSS and "var(--jp-error-color1" in RECORD_CSS
    assert "#3c763d" not in RECORD_CSS  # the old hard-coded green
    assert "white-space:pre-wrap;word-break:normal;overflow-wrap:normal" in RECORD_CSS
    assert ".pi-table-wrap{max-width:100%;max-height:22em;overflow:auto" in RECORD_CSS
    wide = pd.DataFrame({f"column_{i}": [i] for i in range(60)})
    assert frame_html(wide).startswith("<div class='pi-table-wrap'>")
