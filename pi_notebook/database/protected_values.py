"""The protected values a session has seen, and the search for them in outgoing text.

Every value of a protected column that a query returned (the analyst has it in ``details``) is
remembered, case-folded, with the column it came from. :meth:`ProtectedValues.find` looks for
any of them in a text (a serialised provider payload) in one pass: an index on each value's
first :data:`MIN_CHARS` characters makes the cost proportional to the text, not to the number
of values. A value is also remembered as it appears inside JSON (quotes and backslashes
escaped), since payloads are JSON. The store is bounded; the oldest values go first.

Values the model was shown openly (an unprotected column of a preview) are never matches.
Values shorter than :data:`MIN_CHARS` characters are not remembered: ``"DE"`` or ``"42"``
occur in every payload by chance, so a match would say nothing.

Nor is a value the model already had before any protected result showed it: one that occurs
in a text sent to it earlier (:meth:`ProtectedValues.sent`: the user's prompt, the system
prompt with its schema summary), in the statement it wrote itself (a literal such as
``'hidden'`` or ``WHERE email = 'ada@…'``), or among the names and types of the schema
(``DESCRIBE``). A value first seen in a protected result stays protected wherever it appears
later, the user's own prompt included. :func:`scrub_messages` cleans a history (text, tool-call
arguments) so a session goes on after a refusal.
"""

from __future__ import annotations

import json
import re
from collections import OrderedDict
from collections.abc import Iterable
from typing import Any

__all__ = ["MAX_SENT_CHARS", "MAX_VALUES", "MIN_CHARS", "ProtectedValues", "scrub_messages"]

MIN_CHARS = 4
MAX_VALUES = 50_000
_KEY = MIN_CHARS
_NEEDS_ESCAPE = re.compile(r'[\x00-\x1f"\\]')  # what json.dumps(ensure_ascii=False) changes
MAX_SENT_CHARS = 4_000_000
"""How much of the text already sent to the model is kept to recognise values it had before."""


def _fold(value: object) -> str | None:
    if value is None or isinstance(value, bool):
        return None
    folded = str(value).strip().casefold()
    if len(folded) < MIN_CHARS or folded in ("nan", "none", "null", "nat"):
        return None
    return folded


def _json_form(folded: str) -> str:
    return json.dumps(folded, ensure_ascii=False)[1:-1]


def _found_in(values: Iterable[str], texts: Iterable[str]) -> set[str]:
    """The ``values`` (folded, at least MIN_CHARS long) that occur in any of ``texts`` (folded),
    in one pass over each text."""
    values = list(values)
    found: set[str] = set()
    if not values:
        return found
    texts = [t for t in texts if len(t) >= MIN_CHARS]
    if len(values) * sum(len(t) for t in texts) <= 20_000_000:  # few values: str.find in C
        return {v for v in values if any(v in t for t in texts)}
    index: dict[str, set[str]] = {}
    for value in values:
        index.setdefault(value[:_KEY], set()).add(value)
    for text in texts:
        for i in range(len(text) - _KEY + 1):
            bucket = index.get(text[i : i + _KEY])
            if bucket is None:
                continue
            for value in bucket:
                if value not in found and text.startswith(value, i):
                    found.add(value)
    return found


class ProtectedValues:
    """A bounded set of protected values with the column each came from."""

    def __init__(self, *, max_values: int = MAX_VALUES) -> None:
        self.max_values = max_values
        self._values: OrderedDict[str, str] = OrderedDict()  # folded value -> column label
        self._index: dict[str, set[str]] = {}  # first MIN_CHARS chars -> folded values
        self._shown: OrderedDict[str, None] = OrderedDict()  # values the model saw openly
        self._sent = ""  # the latest text sent to the model (folded)

    def __len__(self) -> int:
        return len(self._values)

    def add(
        self,
        values: Iterable[object],
        column: str,
        *,
        known_text: str = "",
        known: Iterable[str] = (),
    ) -> None:
        """Remember the non-null ``values`` of ``column`` (a label such as ``customers.email``),
        except those the model had before: found in the text already sent to it, in
        ``known_text`` (the statement it wrote) or equal to one of ``known`` (folded: the
        schema's names and types). A value remembered earlier stays remembered."""
        fresh: dict[str, None] = {}
        for value in values:
            folded = _fold(value)
            if folded is not None and folded not in self._values:
                fresh[folded] = None
            elif folded is not None:
                self._values.move_to_end(folded)
        if not fresh:
            return
        excluded = set(known) & fresh.keys()
        excluded |= _found_in(fresh.keys() - excluded, [self._sent, known_text.casefold()])
        escaped = {_json_form(v): v for v in fresh.keys() - excluded if _NEEDS_ESCAPE.search(v)}
        excluded |= {escaped[e] for e in _found_in(escaped, [self._sent])}  # payloads are JSON
        for folded in fresh:
            if folded in excluded:
                continue
            self._remember(folded, column)
            if _NEEDS_ESCAPE.search(folded):  # as it appears inside a JSON payload
                self._remember(_json_form(folded), column)

    def sent(self, text: str) -> None:
        """``text`` went to the model (a request that passed the last check): the values in it
        were no secret to the model before a protected result showed them. Payloads repeat the
        history, so the latest one (bounded) stands for all before it."""
        self._sent = text[-MAX_SENT_CHARS:].casefold()

    def allow(self, values: Iterable[object]) -> None:
        """Values the model was shown in an unprotected column: they are no secret to it, even
        when a column that mixes protected and unprotected sources (a ``UNION`` of names and
        emails) had them too."""
        for value in values:
            if value is None or isinstance(value, bool):
                continue
            folded = str(value).strip().casefold()
            if len(folded) < MIN_CHARS:
                continue
            forms = [folded]
            if _NEEDS_ESCAPE.search(folded):
                forms.append(json.dumps(folded, ensure_ascii=False)[1:-1])
            for form in forms:
                self._shown[form] = None
                self._shown.move_to_end(form)
            while len(self._shown) > self.max_values:
                self._shown.popitem(last=False)

    def _remember(self, folded: str, column: str) -> None:
        if folded in self._values:
            self._values.move_to_end(folded)
            return
        self._values[folded] = column
        self._index.setdefault(folded[:_KEY], set()).add(folded)
        if len(self._values) > self.max_values:
            old, _ = self._values.popitem(last=False)
            bucket = self._index.get(old[:_KEY])
            if bucket is not None:
                bucket.discard(old)
                if not bucket:
                    del self._index[old[:_KEY]]

    def matches(self, text: str) -> dict[str, str]:
        """Every remembered value found in ``text`` (case-insensitive), with its column."""
        if not self._values or len(text) < MIN_CHARS:
            return {}
        folded = text.casefold()
        index = self._index
        found: dict[str, str] = {}
        for i in range(len(folded) - _KEY + 1):
            bucket = index.get(folded[i : i + _KEY])
            if bucket is None:
                continue
            for value in bucket:
                if value not in found and value not in self._shown and folded.startswith(value, i):
                    found[value] = self._values[value]
        return found

    def find(self, text: str) -> list[str]:
        """The columns (labels, sorted) whose values occur in ``text``; never the values."""
        return sorted(set(self.matches(text).values()))

    def scrub(self, text: str, replacement: str = "[protected]") -> str:
        """``text`` with every remembered value replaced (case-insensitive)."""
        found = self.matches(text)
        for value in sorted(found, key=len, reverse=True):
            text = re.sub(re.escape(value), replacement, text, flags=re.IGNORECASE)
        return text


def _scrub_any(value: Any, store: ProtectedValues) -> Any:
    if isinstance(value, str):
        return store.scrub(value)
    if isinstance(value, dict):
        return {k: _scrub_any(v, store) for k, v in value.items()}  # pyright: ignore[reportUnknownVariableType]
    if isinstance(value, list | tuple):
        return type(value)(_scrub_any(v, store) for v in value)  # pyright: ignore[reportUnknownVariableType, reportUnknownArgumentType]
    return value


def scrub_messages(messages: list[Any], store: ProtectedValues) -> list[Any]:
    """``messages`` (a copy the caller may change) with every remembered value replaced in
    what a provider sends: text parts (or a plain string content) and tool-call arguments."""
    for message in messages:
        content = getattr(message, "content", None)
        if isinstance(content, str):
            message.content = store.scrub(content)
            continue
        for part in content or []:
            text = getattr(part, "text", None)
            if isinstance(text, str):
                part.text = store.scrub(text)
            if hasattr(part, "arguments"):
                part.arguments = _scrub_any(part.arguments, store)
    return messages
