"""The durable record on its own: escaping, Markdown, numbers for people, themes, order."""

from __future__ import annotations

import re

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
from pi_notebook.database import call_views
from pi_notebook.notebook import RunInfo, RunState, record_bundle, reduce
from pi_notebook.notebook.format import cell_text, format_value, frame_html
from pi_notebook.notebook.record import RECORD_CSS
from pi_notebook.notebook.store import ApprovalRequested, ApprovalResolved


def _said(text: str) -> list[object]:
    message = AssistantMessage(content=[TextContent(text=text)])
    return [MessageStartEvent(message=message), MessageEndEvent(message=message)]


def _call(call_id: str, sql: str, details: object, content: str = "ok") -> list[object]:
    return [
        ToolExecutionStartEvent(
            tool_call_id=call_id, tool_name="query_database", args={"sql": sql}
        ),
        ToolExecutionEndEvent(
            tool_call_id=call_id,
            tool_name="query_database",
            is_error=False,
            result=ToolResult(content=[TextContent(text=content)], details=details),
        ),
    ]


def _state(*events: object) -> RunState:
    state = RunState()
    for i, event in enumerate([AgentStartEvent(), *events, AgentEndEvent()]):
        state = reduce(state, event, now=float(i))
    return state


# The calls are the database tool's: they read as it describes them (the SQL as code).
INFO = RunInfo(
    run_id="r1", model="openai:gpt-test", label_of=lambda n: "Query database", view_of=call_views
)


def test_everything_from_the_model_and_the_database_is_escaped() -> None:
    evil = pd.DataFrame({"<b>col</b>": ["<script>alert(1)</script>", "<img src=x onerror=1>"]})
    state = _state(
        *_said("**Bold** <script>steal()</script> [x](javascript:alert(1))"),
        *_call("c1", "SELECT '<svg onload=1>'", {"dataframe": evil, "row_count": 2}),
    )
    html = record_bundle(state, INFO)["text/html"]
    assert "<strong>Bold</strong>" in html  # Markdown rendered by markdown-it
    for raw in ("<script>", "<img src=x", "<svg onload", "<b>col</b>", 'href="javascript'):
        assert raw not in html
    assert "&lt;script&gt;alert(1)&lt;/script&gt;" in html and "&lt;b&gt;col&lt;/b&gt;" in html


def test_text_and_cards_keep_their_order_in_every_form() -> None:
    frame = pd.DataFrame({"n": [3]})
    state = _state(
        *_said("First I count."),
        *_call("c1", "SELECT 1", {"dataframe": frame, "row_count": 1}),
        *_said("See the table above."),
    )
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
    from decimal import Decimal

    assert format_value(12_300_000_000.0) == "12,300,000,000"
    assert format_value(1234567) == "1,234,567"
    assert format_value(19.99) == "19.99"
    assert format_value(0.000012) == "1.2e-05"
    assert cell_text(float("nan")) == "NULL" and cell_text(None) == "NULL"
    assert cell_text(pd.NA) == "NULL" and cell_text(pd.NaT) == "NULL"
    frame = pd.DataFrame(
        {"price": [19.99, 5.5, 100.0], "qty": [1, 20, 30000], "name": ["a", "b", "c"]}
    )
    html = frame_html(frame)
    assert ">19.99<" in html and ">5.5<" in html and ">100<" in html  # as the model reads them
    assert ">30,000<" in html and "pi-num" in html
    assert "e+" not in frame_html(pd.DataFrame({"big": [1.23e10, 4.5e12]}))
    # A DataFrame of floats alone (no rows kept by a backend): each its shortest exact text,
    # and a number is never cut to the text form's width.
    exact = pd.DataFrame({"revenue": [70131.16, 0.125, 1e-7, 12345678901234.0, 1 / 3]})
    assert [c for _, c in _cells(frame_html(exact))] == [
        "70,131.16",
        "0.125",
        "1e-07",
        "12,345,678,901,234",
        "0.3333333333333333",
    ]
    long = pd.DataFrame({"n": [Decimal("1" * 45 + ".5")], "t": ["x" * 45]})
    plain = record_bundle(
        _state(*_call("c", "SELECT 1", {"dataframe": long, "row_count": 1})), INFO
    )["text/plain"]
    assert f"{int('1' * 45):,}.5" in plain and "x" * 45 not in plain


def _cells(html: str) -> list[tuple[str, str]]:
    """(class, text) of each body cell."""
    return re.findall(r"<td class='([^']*)'[^>]*>([^<]*)</td>", html)


def test_card_numbers_follow_the_model_preview_rules() -> None:
    """Years and ids get no separators, quantities do from 10,000 on; Decimal and nullable
    Int64 columns are numbers (right-aligned, separators); the card and the model's preview
    write each value alike."""
    from decimal import Decimal

    from pi_notebook.sql.backend.results import format_value as preview_value

    frame = pd.DataFrame(
        {
            "customer_id": [10001, 10002],
            "year": [2024, 1999],
            "orders": [1033, 25000],
            "total": [Decimal("1234.50"), Decimal("98765.4321")],
            "stock": pd.array([12000, None], dtype="Int64"),
            "name": ["a", "b"],
        }
    )
    cells = _cells(frame_html(frame))
    assert cells[:6] == [
        ("pi-num", "10001"),
        ("pi-num", "2024"),
        ("pi-num", "1033"),
        ("pi-num", "1,234.50"),
        ("pi-num", "12,000"),
        ("", "a"),
    ]
    assert cells[6:] == [
        ("pi-num", "10002"),
        ("pi-num", "1999"),
        ("pi-num", "25,000"),
        ("pi-num", "98,765.4321"),
        ("pi-num", "NULL"),
        ("", "b"),
    ]
    # The same values, as the model's preview writes them from the database's rows.
    for column in frame.columns:
        for value, (_, shown) in zip(
            frame[column], cells[list(frame.columns).index(column) :: 6], strict=True
        ):
            if value is pd.NA:
                continue
            native = value.item() if hasattr(value, "item") else value
            assert preview_value(native, column) == shown, (column, value)
    # The record's text form follows the same rules (not pandas' defaults).
    state = _state(*_call("c", "SELECT 1", {"dataframe": frame, "row_count": 2}))
    plain = record_bundle(state, INFO)["text/plain"]
    assert "1,234.50" in plain and "2024" in plain and "2,024" not in plain
    assert "10,001" not in plain and "10001" in plain


def test_one_formatter_for_the_card_and_the_preview() -> None:
    """The backend's preview writes values with ``pi_notebook.formatting.format_value`` itself."""
    import numpy as np

    from pi_notebook.formatting import format_value as shared
    from pi_notebook.sql.backend.results import format_value as preview_value

    assert preview_value is shared
    # NumPy scalars (a DataFrame's cells) are written as Python's.
    assert shared(np.int64(123456), "n") == "123,456" and shared(np.int64(2024), "n") == "2024"
    assert shared(np.float32(0.5), "x") == "0.5" and shared(np.bool_(True), "x") == "true"
    # A narrower float is its own shortest text, not its float64 widening (0.10000000149...).
    assert shared(np.float32(0.1), "x") == "0.1" and shared(np.float32(70131.16)) == "70,131.16"
    assert shared(np.float64(70131.16), "x") == "70,131.16"


def test_a_write_says_how_many_rows_it_changed_and_a_text_result_is_shown() -> None:
    write = {"dataframe": pd.DataFrame(), "row_count": 1234, "statement_kind": "write"}
    state = _state(
        *_call("w", "UPDATE t SET x = 1", write),
        *_call("t", "SELECT 2", {"n": 1}, content="42 widgets in stock"),
    )
    html = record_bundle(state, INFO)["text/html"]
    assert "1,234 rows changed" in html
    assert re.search(r"<pre class='pi-content'[^>]*>42 widgets in stock</pre>", html)


def test_an_edited_call_shows_what_ran_and_what_the_model_asked_for() -> None:
    """The person edited the SQL before approving: the card's SQL is the edit (what ran), and
    the statement the model asked for is kept beside it, in every form of the record."""
    asked, edited = "DELETE FROM t", "DELETE FROM t WHERE id = 7"
    start, end = _call("w", asked, {"row_count": 1, "statement_kind": "write"})
    state = _state(
        start,
        ApprovalRequested(tool_call_id="w", reasons=("DELETE changes data",)),
        ApprovalResolved(tool_call_id="w", decision="approved", edited_args={"sql": edited}),
        end,
    )
    card = state.cards["w"]
    assert card.args == {"sql": edited} and card.original_args == {"sql": asked}
    bundle = record_bundle(state, INFO)
    html, plain = bundle["text/html"], bundle["text/plain"]
    assert html.index(edited) < html.index("Edited before approval") < html.rindex(asked)
    assert "approved" in html
    assert plain.index(edited) < plain.index("model asked for") < plain.rindex(asked)


def test_an_approval_without_an_edit_keeps_the_call_as_asked() -> None:
    start, end = _call("w", "DELETE FROM t", {"row_count": 1, "statement_kind": "write"})
    state = _state(start, ApprovalResolved(tool_call_id="w", decision="approved"), end)
    assert state.cards["w"].original_args is None
    assert "Edited before approval" not in record_bundle(state, INFO)["text/html"]


def test_colours_come_from_jupyterlab_variables_and_tables_scroll() -> None:
    assert "var(--jp-success-color1" in RECORD_CSS and "var(--jp-error-color1" in RECORD_CSS
    assert "#3c763d" not in RECORD_CSS  # the old hard-coded green
    assert "white-space:pre-wrap;word-break:normal;overflow-wrap:normal" in RECORD_CSS
    assert ".pi-table-wrap{max-width:100%;max-height:22em;overflow:auto" in RECORD_CSS
    wide = pd.DataFrame({f"column_{i}": [i] for i in range(60)})
    assert frame_html(wide).startswith("<div class='pi-table-wrap'")


def test_a_done_run_whose_call_errored_is_not_shown_as_a_plain_success() -> None:
    """Pi's meaning: the run is done when the model ended normally, so an answer after a
    failed call is ``done``; but it says how many calls errored and is not coloured green."""
    from pi_notebook.notebook.view import RunView

    failed = [
        ToolExecutionStartEvent(
            tool_call_id="e", tool_name="query_database", args={"sql": "SELECT nope FROM nowhere"}
        ),
        ToolExecutionEndEvent(
            tool_call_id="e",
            tool_name="query_database",
            is_error=True,
            result=ToolResult(content=[TextContent(text="no such table")]),
        ),
    ]
    state = _state(*failed, *_said("The query failed: there is no table `nowhere`."))
    assert state.status == "done"
    bundle = record_bundle(state, INFO)
    assert bundle["text/plain"].startswith("○ done · 1 error · 1 call · model")
    assert (
        "pi-run-status pi-muted' style='font-weight:bold'>○ done · 1 error</span>"
        in (bundle["text/html"])
    )
    assert "pi-run-status pi-ok" not in bundle["text/html"]
    view = RunView(lambda: state, lambda reason="stopped": None, str)
    view.render()
    assert "pi-muted'>○ done · 1 error</b>" in view.status.value
    # Two failed calls; and a run whose calls all worked is still a green ✔ done.
    twice = _state(*failed, *[replace_id(e, "f") for e in failed])
    assert record_bundle(twice, INFO)["text/plain"].startswith("○ done · 2 errors · 2 calls")
    fine = _state(*_call("c", "SELECT 1", {"n": 1}))
    assert (
        "pi-run-status pi-ok' style='font-weight:bold'>✔ done</span>"
        in (record_bundle(fine, INFO)["text/html"])
    )


def replace_id(event: object, call_id: str) -> object:
    from dataclasses import replace

    return replace(event, tool_call_id=call_id)  # type: ignore[type-var]


# What JupyterLab's sanitizer (untrusted notebooks) keeps, read from its source in the
# installed jupyterlab (jlab_core: the allowedAttributes "*" list and the allowedStyles
# grammar): class and style attributes; <style> elements are dropped; a declaration is kept
# only if its property is listed and its value is plain CSS, so colours must be literal and
# var(--jp-...) is dropped.
_SANITIZER_PROPERTIES = {
    "line-height",
    "margin",
    "margin-left",
    "margin-right",
    "padding",
    "font-weight",
    "font-family",
    "font-size",
    "opacity",
    "white-space",
    "word-break",
    "overflow-wrap",
    "overflow",
    "overflow-x",
    "max-width",
    "max-height",
    "text-align",
    "border-left-width",
    "border-left-style",
    "border-radius",
}
_PLAIN_VALUE = re.compile(
    r"^((\d+(\.\d+)?(px|em|%)?|auto|bold|monospace|smaller|pre-wrap|normal|left|right|solid)"
    r"\s*)+$"
)


def test_the_record_reads_without_its_style_block() -> None:
    """A colleague's untrusted copy: with <style> stripped, every part still has its layout
    from inline styles the sanitizer keeps (no var(), only listed properties)."""
    from pi_notebook.notebook.record import INLINE

    frame = pd.DataFrame({"id": [1, 2], "name": ["a", "b"]})
    state = _state(
        *_said("Looking."),
        *_call("c", "SELECT id, name FROM t", {"dataframe": frame, "row_count": 2}),
    )
    page = record_bundle(state, INFO)["text/html"]
    stripped = re.sub(r"<style>.*?</style>", "", page, flags=re.S)
    assert "<style" not in stripped and "pi-record" in stripped  # the marker is a class
    styles = re.findall(r"style='([^']*)'", stripped)
    assert {INLINE[k] for k in ("rec", "head", "text", "card", "tool", "status", "pre")} <= set(
        styles
    )
    for style in styles:
        assert "var(" not in style and "color" not in style, style
        for declaration in style.split(";"):
            prop, _, value = declaration.partition(":")
            assert prop in _SANITIZER_PROPERTIES, declaration
            assert _PLAIN_VALUE.match(value), declaration
    # The essential layout: the card's bar and padding, SQL wrapped at whitespace, the table
    # scrolling inside the card, numbers right-aligned and text left-aligned.
    assert f"class='pi-card pi-ok' style='{INLINE['card']}'" in stripped
    assert "<pre class='pi-sql' style='white-space:pre-wrap;word-break:normal" in stripped
    assert "style='max-width:100%;max-height:22em;overflow:auto" in stripped
    assert "<td class='pi-num' style='text-align:right'>1</td>" in stripped
    assert "<td class='' style='text-align:left'>a</td>" in stripped
    # The colours stay in the style block, from JupyterLab's variables.
    assert "border-left-color:var(--jp-success-color1" in RECORD_CSS


def test_a_card_says_when_a_read_stopped_at_the_size_limit() -> None:
    """A read that reached ``max_result_bytes`` says how many rows it kept of how many, and
    why, not "more than N rows" (which reads as the row cap)."""
    frame = pd.DataFrame({"i": range(9), "pad": ["x" * 10] * 9})
    capped = {
        "dataframe": frame,
        "row_count": 200,
        "row_count_exact": False,
        "truncated": True,
        "size_capped": True,
    }
    plain = record_bundle(_state(*_call("c", "SELECT 1", capped)), INFO)["text/plain"]
    assert "9 of at least 200 rows kept (size limit)" in plain
    counted = {**capped, "row_count_exact": True}
    plain = record_bundle(_state(*_call("c", "SELECT 1", counted)), INFO)["text/plain"]
    assert "9 of 200 rows kept (size limit)" in plain
    capped_rows = {"dataframe": frame, "row_count": 10, "row_count_exact": False, "truncated": True}
    plain = record_bundle(_state(*_call("c", "SELECT 1", capped_rows)), INFO)["text/plain"]
    assert "more than 10 rows" in plain and "size limit" not in plain
