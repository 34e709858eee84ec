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
"""

from __future__ import annotations

import json
import re
from collections import OrderedDict
from collections.abc import Iterable

__all__ = ["MAX_VALUES", "MIN_CHARS", "ProtectedValues"]

MIN_CHARS = 4
MAX_VALUES = 50_000
_KEY = MIN_CHARS
_NEEDS_ESCAPE = re.compile(r'[\x00-\x1f"\\]')  # what json.dumps(ensure_ascii=False) changes


class ProtectedValues:
    """A bounded set of protected values with the column each came from."""

    def __init__(self, *, max_values: int = MAX_VALUES) -> None:
        self.max_values = max_values
        self._values: OrderedDict[str, str] = OrderedDict()  # folded value -> column label
        self._index: dict[str, set[str]] = {}  # first MIN_CHARS chars -> folded values
        self._shown: OrderedDict[str, None] = OrderedDict()  # values the model saw openly

    def __len__(self) -> int:
        return len(self._values)

    def add(self, values: Iterable[object], column: str) -> None:
        """Remember the non-null ``values`` of ``column`` (a label such as ``customers.email``)."""
        for value in values:
            if value is None or isinstance(value, bool):
                continue
            folded = str(value).strip().casefold()
            if len(folded) < MIN_CHARS or folded in ("nan", "none", "null", "nat"):
                continue
            self._remember(folded, column)
            if _NEEDS_ESCAPE.search(folded):  # as it appears inside a JSON payload
                self._remember(json.dumps(folded, ensure_ascii=False)[1:-1], column)

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
