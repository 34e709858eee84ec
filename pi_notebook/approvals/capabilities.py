"""One-shot capabilities (D4): the approval gate grants, the backend consumes.

A capability is bound to one ``tool_call_id`` and the canonical hash of the arguments the
user approved. It is consumed atomically, exactly once, before it expires; consuming with a
different hash burns it too (a changed statement is treated as tampering, never retried).
A capability dies with the call that earned it: :meth:`CapabilityStore.revoke` (called when
the call ends, however it ends) drops it and burns the id. What does not belong here: deciding
what needs approval, asking the user, or recording the decision (the audit does, see
:mod:`pi_notebook.approvals.records`).
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from dataclasses import dataclass

__all__ = ["CapabilityCheck", "CapabilityStore"]

DEFAULT_TTL_S = 120.0


@dataclass(frozen=True, kw_only=True)
class CapabilityCheck:
    """The outcome of :meth:`CapabilityStore.consume`.

    Attributes:
        ok: True only when a live capability for this call id and this hash was consumed.
        reason: why not, in words the model and the user can act on ("" when ok).
        approved_hash: the hash that was approved for this call id, if any.
        final_hash: the hash presented by the backend.
        expected_rows: the affected-row count the person saw in the preview, if any; the
            backend rolls back and refuses when the statement changes a different number.
        max_rows: the most rows the approval (or the grant behind it) allows, if bounded.
    """

    ok: bool
    reason: str
    approved_hash: str | None
    final_hash: str
    expected_rows: int | None = None
    max_rows: int | None = None


@dataclass(frozen=True)
class _Grant:
    args_hash: str
    expires_at: float
    expected_rows: int | None
    max_rows: int | None


class CapabilityStore:
    """Thread-safe store of one-shot capabilities, keyed by tool call id."""

    def __init__(self, *, clock: Callable[[], float] = time.monotonic) -> None:
        self._clock = clock
        self._lock = threading.Lock()
        self._grants: dict[str, _Grant] = {}
        self._spent: set[str] = set()

    def grant(
        self,
        tool_call_id: str,
        args_hash: str,
        ttl_s: float = DEFAULT_TTL_S,
        *,
        expected_rows: int | None = None,
        max_rows: int | None = None,
    ) -> None:
        """Grant one use of ``args_hash`` to ``tool_call_id`` for ``ttl_s`` seconds.

        ``expected_rows`` binds the approval to the previewed count of affected rows and
        ``max_rows`` to an upper bound (a scoped grant's); the backend enforces both inside
        the write's transaction.

        Raises:
            ValueError: if this call id already used or holds a capability (a call is
                approved once; a second grant would let the same id run twice).
        """
        if ttl_s <= 0:
            raise ValueError("ttl_s must be positive")
        with self._lock:
            self._expire_locked()
            if tool_call_id in self._grants or tool_call_id in self._spent:
                raise ValueError(f"tool call {tool_call_id!r} already has a capability")
            self._grants[tool_call_id] = _Grant(
                args_hash, self._clock() + ttl_s, expected_rows, max_rows
            )

    def consume(self, tool_call_id: str, args_hash: str) -> CapabilityCheck:
        """Use the capability of ``tool_call_id`` for ``args_hash``; it is gone afterwards."""
        with self._lock:
            grant = self._grants.pop(tool_call_id, None)
            spent = tool_call_id in self._spent
            self._spent.add(tool_call_id)
        if grant is None:
            reason = (
                "this call's approval was already used"
                if spent
                else "no approval was granted for this call (writes need the user's approval)"
            )
            return CapabilityCheck(
                ok=False, reason=reason, approved_hash=None, final_hash=args_hash
            )
        if self._clock() >= grant.expires_at:
            return CapabilityCheck(
                ok=False,
                reason="the approval expired before the statement ran",
                approved_hash=grant.args_hash,
                final_hash=args_hash,
            )
        if grant.args_hash != args_hash:
            return CapabilityCheck(
                ok=False,
                reason=(
                    "the statement changed after it was approved (approved hash "
                    f"{grant.args_hash[:12]}…, final hash {args_hash[:12]}…)"
                ),
                approved_hash=grant.args_hash,
                final_hash=args_hash,
            )
        return CapabilityCheck(
            ok=True,
            reason="",
            approved_hash=grant.args_hash,
            final_hash=args_hash,
            expected_rows=grant.expected_rows,
            max_rows=grant.max_rows,
        )

    def revoke(self, tool_call_id: str) -> bool:
        """End the capability of a call that is over (blocked, errored, aborted or finished).

        An unused capability is dropped, and the call id is burnt like a consumed one: it can
        never be granted again, so a later call reusing the id cannot inherit the approval.
        Returns True if the id held or had held a capability (it is burnt now).
        """
        with self._lock:
            held = self._grants.pop(tool_call_id, None) is not None
            if held:
                self._spent.add(tool_call_id)
            return held or tool_call_id in self._spent

    def used(self, tool_call_id: str) -> bool:
        """Whether ``tool_call_id`` holds a capability or already had one (then it is burnt)."""
        with self._lock:
            self._expire_locked()
            return tool_call_id in self._grants or tool_call_id in self._spent

    def __len__(self) -> int:
        with self._lock:
            self._expire_locked()
            return len(self._grants)

    def _expire_locked(self) -> None:
        now = self._clock()
        for key in [k for k, g in self._grants.items() if now >= g.expires_at]:
            del self._grants[key]
            self._spent.add(key)
