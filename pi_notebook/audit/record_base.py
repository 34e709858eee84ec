"""The base of the typed audit records: ``AuditRecord``, the ids every record may carry beside
its payload, and the payload as the record's fields by name.

Every kind is a small frozen dataclass deriving from it (:mod:`.records` lists them and who
writes each).
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Any, ClassVar

__all__ = ["AuditRecord"]

_IDS = frozenset({"tool_call_id", "tool_name", "policy_version"})
_PAYLOAD_FIELDS: dict[type, tuple[str, ...]] = {}


@dataclass(frozen=True, kw_only=True)
class AuditRecord:
    """Base of the typed records: the ids every record may carry beside its payload."""

    kind: ClassVar[str] = ""
    """The record kind stored in the ``kind`` column."""
    durable: ClassVar[bool] = False
    """Whether the fact authorises something, so it must be committed before that happens."""

    tool_call_id: str | None = None
    """The call this record belongs to, if any."""
    tool_name: str | None = None
    """The tool of that call."""
    policy_version: str | None = None
    """The version of the policy that decided, where one did."""

    def payload(self) -> dict[str, Any]:
        """The payload: every field but the ids, by name (values as given; encoded later)."""
        names = _PAYLOAD_FIELDS.get(type(self))
        if names is None:
            names = tuple(f.name for f in dataclasses.fields(self) if f.name not in _IDS)
            _PAYLOAD_FIELDS[type(self)] = names
        return {name: getattr(self, name) for name in names}
