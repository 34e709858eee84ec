"""``CardMap``: an immutable, insertion-ordered map of tool cards that shares structure.

The store's reducer returns a new state per event. Copying a dict of every card per event
made a run with n calls cost O(n²); a ``CardMap`` instead keeps its cards in fixed-size
chunks, and ``set`` copies only the chunk that changed plus the (short) tuple of chunks.

Positions are looked up in an index that all versions derived from one map share and only
ever add to. A version checks that the card at the indexed position really has the id asked
for (two versions forked from one state may have put different cards at the same
position), and falls back to a scan in that rare case, so every version stays correct.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from typing import Any, Generic, Protocol, TypeVar

__all__ = ["Card", "CardMap"]

_CHUNK = 32


class Card(Protocol):
    """What a map holds: anything with the id of its tool call (the store's ``C``)."""

    @property
    def tool_call_id(self) -> str: ...


C = TypeVar("C", bound=Card)


class CardMap(Mapping[str, C], Generic[C]):
    """Cards by ``tool_call_id``, in the order they were first set. Immutable."""

    __slots__ = ("_chunks", "_index", "_len")

    def __init__(self) -> None:
        self._chunks: tuple[tuple[C, ...], ...] = ()
        self._len = 0
        self._index: dict[str, int] = {}

    @classmethod
    def _make(
        cls, chunks: tuple[tuple[C, ...], ...], length: int, index: dict[str, int]
    ) -> CardMap[C]:
        new = cls.__new__(cls)
        new._chunks, new._len, new._index = chunks, length, index
        return new

    def _at(self, pos: int) -> C:
        return self._chunks[pos // _CHUNK][pos % _CHUNK]

    def _position(self, call_id: str) -> int | None:
        pos = self._index.get(call_id)
        if pos is None:
            return None  # the shared index knows every id any version ever held
        if pos < self._len and self._at(pos).tool_call_id == call_id:
            return pos
        for i, card in enumerate(self.values()):  # a forked version: rare, still correct
            if card.tool_call_id == call_id:
                return i
        return None

    def __getitem__(self, call_id: str) -> C:
        pos = self._position(call_id)
        if pos is None:
            raise KeyError(call_id)
        return self._at(pos)

    def get(self, call_id: str, default: Any = None) -> Any:
        pos = self._position(call_id)
        return default if pos is None else self._at(pos)

    def __contains__(self, call_id: object) -> bool:
        return isinstance(call_id, str) and self._position(call_id) is not None

    def __len__(self) -> int:
        return self._len

    def __iter__(self) -> Iterator[str]:
        for card in self.values():
            yield card.tool_call_id

    def values(self) -> list[C]:  # type: ignore[override]
        """The cards in order (a list: cheap to build, safe to keep)."""
        out: list[C] = []
        for chunk in self._chunks:
            out.extend(chunk)
        return out

    def ids(self) -> tuple[str, ...]:
        """The call ids in order."""
        return tuple(card.tool_call_id for card in self.values())

    def set(self, card: C) -> CardMap[C]:
        """A map with ``card`` replacing the card of its id, or appended if the id is new."""
        pos = self._position(card.tool_call_id)
        if pos is None:
            pos = self._len
            self._index.setdefault(card.tool_call_id, pos)
            length = self._len + 1
        else:
            length = self._len
        which, offset = divmod(pos, _CHUNK)
        if which < len(self._chunks):
            old = self._chunks[which]
            chunk = (*old[:offset], card, *old[offset + 1 :])
            chunks = (*self._chunks[:which], chunk, *self._chunks[which + 1 :])
        else:
            chunks = (*self._chunks, (card,))
        return self._make(chunks, length, self._index)

    def __repr__(self) -> str:
        return f"CardMap({list(self)!r})"
