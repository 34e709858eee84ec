"""The base of the typed audit records: ``AuditRecord``, the ids every record may carry beside
its payload, and the payload as the record's fields by name (a field a record names in
``omitted_at_default`` left out while it holds its default).

Every kind is a small frozen dataclass deriving from it (:mod:`.records` lists them and who
writes each).
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Any, ClassVar

__all__ = ["AuditRecord"]

_IDS = frozenset({"tool_call_id", "tool_name", "policy_version"})
_MISSING: Any = dataclasses.MISSING
_PAYLOAD_FIELDS: dict[type, tuple[tuple[str, Any], ...]] = {}
"""Per record class: each payload field's name, and the default it is left out at (or
``dataclasses.MISSING`` for a field always present)."""


@dataclass(frozen=True, kw_only=True)
class AuditRecord:
    """Base of the typed records: the ids every record may carry beside its payload."""

    kind: ClassVar[str] = ""
    """The record kind stored in the ``kind`` column."""
    durable: ClassVar[bool] = False
    """Whether the fact authorises something, so it must be committed before that happens."""
    omitted_at_default: ClassVar[tuple[str, ...]] = ()
    """Fields left out of the payload while they hold their default (``None``, or ``0`` for a
    count): a record written before the field existed, and one without it, read alike."""

    tool_call_id: str | None = None
    """The call this record belongs to, if any."""
    tool_name: str | None = None
    """The tool of that call."""
    policy_version: str | None = None
    """The version of the policy that decided, where one did."""

    def payload(self) -> dict[str, Any]:
        """The payload: every field but the ids, by name (values as given; encoded later),
        less those of ``omitted_at_default`` that hold their default."""
        fields = _PAYLOAD_FIELDS.get(type(self))
        if fields is None:
            fields = _payload_fields(type(self))
            _PAYLOAD_FIELDS[type(self)] = fields
        out: dict[str, Any] = {}
        for name, left_out_at in fields:
            value = getattr(self, name)
            if left_out_at is _MISSING or not _is_default(value, left_out_at):
                out[name] = value
        return out


def _payload_fields(cls: type[AuditRecord]) -> tuple[tuple[str, Any], ...]:
    """``cls``'s payload fields in order, each with the default it is left out at; a name in
    ``omitted_at_default`` that is no field with a default is a mistake in ``cls``."""
    fields = {f.name: f for f in dataclasses.fields(cls) if f.name not in _IDS}
    for name in cls.omitted_at_default:
        if name not in fields or fields[name].default is _MISSING:
            raise TypeError(f"{cls.__name__}.omitted_at_default: {name!r} has no default")
    return tuple(
        (name, f.default if name in cls.omitted_at_default else _MISSING)
        for name, f in fields.items()
    )


def _is_default(value: Any, default: Any) -> bool:
    return value is None if default is None else type(value) is type(default) and value == default
