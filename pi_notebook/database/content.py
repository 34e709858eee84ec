"""What the model is shown of a result: the content policy's protocol and its answer.

The database tool asks a :class:`ContentPolicy` (the data policy is one) for the model's view
of each result; the analyst's DataFrame is never touched.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Protocol

from pi_notebook.sql.backend import QueryOutcome

__all__ = ["ContentPolicy", "ModelContent"]


@dataclass(frozen=True, kw_only=True)
class ModelContent:
    """What the model is shown of one result, as a content policy decided.

    Attributes:
        text: the preview text for the model.
        protected: output column name to the action applied (``mask``, ``hash``, ``drop``,
            or ``withheld`` when lineage could not be established).
        note: why values were withheld, when they were.
    """

    text: str
    protected: dict[str, str] = field(default_factory=dict[str, str])
    note: str | None = None


class ContentPolicy(Protocol):
    """Decides what the model sees of a result (the analyst's DataFrame is untouched)."""

    def model_content(self, sql: str, dialect: str, outcome: QueryOutcome) -> ModelContent: ...
