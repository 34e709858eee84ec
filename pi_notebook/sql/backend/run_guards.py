"""What must hold before a statement's result leaves the worker: the approval's bounds on the
rows a write changes (:class:`Bounds`, else :class:`DriftError`) and the commit of the record
that must precede the statement (:func:`wait_audited`, else :class:`AuditBlocked`).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

__all__ = ["AuditBlocked", "Bounds", "DriftError", "wait_audited"]


@dataclass(frozen=True, kw_only=True)
class Bounds:
    """What an approval allows: exactly ``expected_rows`` and at most ``max_rows`` changed."""

    expected_rows: int | None = None
    max_rows: int | None = None

    @property
    def active(self) -> bool:
        return self.expected_rows is not None or self.max_rows is not None

    def allows(self, rows: int) -> bool:
        if self.expected_rows is not None and rows != self.expected_rows:
            return False
        return self.max_rows is None or rows <= self.max_rows


class DriftError(Exception):
    """The write would change a number of rows its approval does not allow.

    ``actual`` is ``None`` when the rows could not be counted (then ``why`` says why).
    """

    def __init__(self, actual: int | None, why: str | None = None) -> None:
        super().__init__(f"actual rows: {actual}")
        self.actual = actual
        self.why = why


class AuditBlocked(Exception):
    """The record that must precede the statement (its final arguments) was not committed:
    a write did not run; a read's rows (or its error) are withheld. Fail closed."""


def wait_audited(wait: Callable[[], object]) -> None:
    """Wait for the record that must precede the statement; ``AuditBlocked`` if it failed."""
    try:
        wait()
    except BaseException as exc:
        raise AuditBlocked(str(exc)) from exc
