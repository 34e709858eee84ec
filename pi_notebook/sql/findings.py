"""What one check found, and how findings add up to a verdict.

A check never decides alone: it reports findings, and :func:`verdict_of` turns the
findings of a whole statement into a :class:`~pi_notebook.sql.verdict.Verdict`
(any ``reject`` wins, then any ``write``; no finding at all means ``read``).
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import Literal

from pi_notebook.sql.verdict import Verdict, read, reject, write


@dataclass(frozen=True, slots=True)
class Finding:
    """One reason a statement is not a pure read.

    Attributes:
        kind: ``"write"`` (needs approval) or ``"reject"`` (must never run).
        reason: short text for the person who approves.
        when_executed: True when the effect happens only if the statement is executed
            (a DML statement, a lock, ``SELECT ... INTO``); False when merely planning
            it can already have the effect (a function call the planner may fold, a
            file a table function opens while binding). Plain ``EXPLAIN`` drops the
            former and keeps the latter.
    """

    kind: Literal["write", "reject"]
    reason: str
    when_executed: bool = True


def writes(reason: str, *, when_executed: bool = True) -> Finding:
    """A finding that needs approval."""
    return Finding("write", reason, when_executed)


def rejects(reason: str) -> Finding:
    """A finding that must never run; it survives ``EXPLAIN`` too."""
    return Finding("reject", reason, when_executed=False)


def verdict_of(findings: Iterable[Finding], read_reason: str | None = None) -> Verdict:
    """Fold findings into a verdict: reject beats write beats read."""
    rejected: list[str] = []
    written: list[str] = []
    for finding in findings:
        (rejected if finding.kind == "reject" else written).append(finding.reason)
    if rejected:
        return reject(*rejected)
    if written:
        return write(*written)
    return read(read_reason) if read_reason else read()
