"""The per-session store of protected values behind the last check (bounded, one pass)."""

from __future__ import annotations

import json

from pi_notebook.database.protected_values import MIN_CHARS, ProtectedValues


def test_finds_values_case_insensitively_and_as_json_escapes_them() -> None:
    store = ProtectedValues()
    store.add(
        ["Ada@Example.org", 'O"Brien Road', "line\nbreak", None, True, "NY", 12], "customers.x"
    )
    assert len(store) == 3 + 2  # two JSON-escaped forms; short, null and boolean values skipped
    assert store.find("mail ADA@example.ORG now") == ["customers.x"]
    assert store.find(json.dumps({"content": 'at O"Brien Road'})) == ["customers.x"]
    assert store.find(json.dumps(["line\nbreak"])) == ["customers.x"]
    assert store.find("NY 12 and nothing else") == []
    assert len("NY") < MIN_CHARS


def test_scrub_replaces_every_occurrence_and_allow_exempts_values_shown_openly() -> None:
    store = ProtectedValues()
    store.add(["ada@example.org", "Ada Lovelace"], "customers.email")
    assert (
        store.scrub("ADA@example.org wrote to ada@example.org")
        == "[protected] wrote to [protected]"
    )
    store.allow(["Ada Lovelace"])  # the model saw it in an unprotected column
    assert store.find("Ada Lovelace, ada@example.org") == ["customers.email"]
    assert store.scrub("Ada Lovelace") == "Ada Lovelace"


def test_bounded_oldest_first() -> None:
    store = ProtectedValues(max_values=3)
    store.add(["one-1", "two-2", "three-3", "four-4"], "t.c")
    assert len(store) == 3
    assert store.find("one-1") == [] and store.find("four-4") == ["t.c"]


def test_values_the_model_had_before_are_not_remembered() -> None:
    store = ProtectedValues()
    store.sent('{"system": "customers: name, email varchar(100)", "user": "Who is ADA@x.org?"}')
    store.add(
        ["ada@x.org", "hidden", "grace@x.net", "varchar", "alan@x.com"],
        "customers.email",
        known_text="SELECT CASE WHEN id = 1 THEN email ELSE 'hidden' END, 'alan@x.com'",
        known={"varchar"},
    )
    assert store.find("ada@x.org hidden varchar alan@x.com") == []  # sent, a literal, a type
    assert store.find("grace@x.net") == ["customers.email"]  # only a protected result had it
    store.sent("now grace@x.net is in a request")  # seen first: stays protected
    store.add(["grace@x.net"], "customers.email")
    assert store.find("grace@x.net") == ["customers.email"]


def test_scrub_messages_cleans_text_and_tool_call_arguments() -> None:
    from pi_notebook.ai.messages import AssistantMessage, TextContent, ToolCall, UserMessage
    from pi_notebook.database.protected_values import scrub_messages

    store = ProtectedValues()
    store.add(["grace@x.net"], "customers.email")
    messages = [
        UserMessage(content="is GRACE@x.net a customer?"),
        AssistantMessage(
            content=[
                TextContent(text="checking grace@x.net"),
                ToolCall(
                    id="c",
                    name="q",
                    arguments={"sql": "... = 'grace@x.net'", "n": [1, "grace@x.net"]},
                ),
            ]
        ),
    ]
    scrubbed = scrub_messages(messages, store)
    assert "grace" not in repr(scrubbed).casefold()
    assert scrubbed[1].content[1].arguments == {
        "sql": "... = '[protected]'",
        "n": [1, "[protected]"],
    }


def test_scrub_messages_leaves_images_untouched() -> None:
    from pi_notebook.ai.messages import ImageContent, TextContent, ToolResultMessage
    from pi_notebook.database.protected_values import scrub_messages

    store = ProtectedValues()
    store.add(["grace@x.net"], "customers.email")
    image = ImageContent(data="Z3JhY2VAeC5uZXQ=", mime_type="image/png")
    result = ToolResultMessage(
        tool_call_id="c", tool_name="shot", content=[TextContent(text="grace@x.net"), image]
    )
    [scrubbed] = scrub_messages([result], store)
    assert scrubbed.content == [
        TextContent(text="[protected]"),
        ImageContent(data="Z3JhY2VAeC5uZXQ=", mime_type="image/png"),
    ]


def test_a_value_sent_inside_json_is_recognised_as_sent() -> None:
    store = ProtectedValues()
    store.sent(json.dumps({"user": 'who lives at 1 "Main" Road?'}))
    store.add(['1 "Main" Road'], "customers.address")
    assert len(store) == 0
