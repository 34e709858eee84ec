"""What a column lineage is: ``Source``, ``ColumnLineage``, ``Lineage``, and the exception the
tracer raises when it cannot follow a statement (:class:`LineageUnknown`).

The tracer lives in :mod:`.lineage_tracer`; :func:`~pi_notebook.database.lineage.trace` is the
entry point.
"""

from __future__ import annotations

from dataclasses import dataclass

__all__ = ["ColumnLineage", "Lineage", "LineageUnknown", "Source"]

Source = tuple[str, str]
"""(table, column) of a base table, both case-folded."""


@dataclass(frozen=True, kw_only=True)
class ColumnLineage:
    """One output column: its name in the statement and the base columns it derives from."""

    name: str
    sources: frozenset[Source] = frozenset()
    stored: Source | None = None
    """The base column whose values this column is, unchanged (``SELECT email``), if any."""


@dataclass(frozen=True, kw_only=True)
class Lineage:
    """The lineage of every output column, or ``columns=None`` and the ``reason`` it is unknown."""

    columns: tuple[ColumnLineage, ...] | None
    reason: str | None = None
    rows: frozenset[Source] = frozenset()
    """The base columns that decide how many rows the result has (already among every
    column's sources): a value shown as a row count is derived from them."""

    @property
    def known(self) -> bool:
        """Whether the lineage could be established."""
        return self.columns is not None


class LineageUnknown(Exception):
    """Lineage cannot be established (the message says why); :func:`trace` turns it into an
    unknown :class:`Lineage`."""
