"""The classifier's answer: a kind and the reasons a person reads.

Only the value type lives here; how a verdict is reached is in ``classify.py``.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

VerdictKind = Literal["read", "write", "reject"]

POLICY_VERSION = "sql-policy/6"
"""Version of the classification rules. Approval records store it (D3), so a decision
taken under older rules can be told apart. Bump it whenever a rule changes a verdict."""


@dataclass(frozen=True, slots=True)
class Verdict:
    """What a statement may do, and why.

    Attributes:
        kind: ``"read"`` (one pure read, safe to run without asking), ``"write"``
            (may change data, schema, session or server state, or touch the host:
            needs approval) or ``"reject"`` (must never run: unparseable, more than
            one statement, or an escape out of the database).
        reasons: short human-readable explanations; never empty for ``write`` and
            ``reject``.
    """

    kind: VerdictKind
    reasons: tuple[str, ...] = ()

    @property
    def is_read(self) -> bool:
        """True when the statement may run without approval."""
        return self.kind == "read"


def read(reason: str = "a single statement made only of pure read constructs") -> Verdict:
    """A ``read`` verdict with its reason."""
    return Verdict("read", (reason,))


def write(*reasons: str) -> Verdict:
    """A ``write`` verdict; duplicate reasons are dropped, order kept."""
    return Verdict("write", tuple(dict.fromkeys(reasons)))


def reject(*reasons: str) -> Verdict:
    """A ``reject`` verdict; duplicate reasons are dropped, order kept."""
    return Verdict("reject", tuple(dict.fromkeys(reasons)))
