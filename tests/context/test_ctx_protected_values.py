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
