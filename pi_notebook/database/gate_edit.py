"""What may run after the person approves a write: the statement shown, or their edit of it.

An edit gives the statement as ``sql`` and may change only the tool's own arguments, each
validated as the tool's input. Edited SQL is classified again (:func:`edited_final`): a read
runs as it is, a write is previewed again, anything else is refused. An approved edit whose
measured effect the person has not seen (:func:`unseen`) is asked about again, with the
reasons :func:`again_reasons` gives.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any

from pydantic import BaseModel, ValidationError

from pi_notebook.approvals import WritePreview
from pi_notebook.sql.backend import DatabaseBackend, query_args_hash

__all__ = ["Blocked", "Edit", "Final", "again_reasons", "edited_final", "unseen"]


@dataclass(frozen=True, kw_only=True)
class Edit:
    """A statement the person edited before approving (the model is told in the result)."""

    original_sql: str
    original_args_hash: str
    sql: str
    args_hash: str
    kind: str


@dataclass(frozen=True, kw_only=True)
class Final:
    """What may run once the decision is on record."""

    sql: str
    args_hash: str
    kind: str  # "read" or "write"
    preview: WritePreview | None
    reasons: tuple[str, ...] = ()


class Blocked(Exception):
    """The call is blocked with this text (raised inside the gate only)."""


async def edited_final(
    edited: dict[str, Any] | None,
    shown: Final,
    tool_input: BaseModel,
    backend: DatabaseBackend,
    preview: Callable[[str], Awaitable[WritePreview | None]],
) -> tuple[Final, dict[str, Any] | None]:
    """What runs after an approval of ``shown`` with the person's ``edited`` arguments, and
    the tool's other arguments as edited (``None`` when no edit was given): ``shown`` itself,
    or the edit classified again (a write measured by ``preview``).

    Raises:
        Blocked: the edit gives no statement, names arguments the tool does not have, does
            not validate, or is a statement that may not run.
    """
    if edited is None:
        return shown, None
    new_sql = edited.get("sql")
    model = type(tool_input)
    unknown = sorted(set(edited) - set(model.model_fields))
    if unknown or not isinstance(new_sql, str) or not new_sql.strip():
        raise Blocked(
            "Not run: an edit gives the statement as sql (and only the tool's "
            f"own arguments{': not ' + ', '.join(unknown) if unknown else ''})."
        )
    try:
        checked = model.model_validate({**tool_input.model_dump(), **edited})
        others = {k: getattr(checked, k) for k in edited if k != "sql"}
    except ValidationError as exc:
        raise Blocked(
            f"Not run: the edited arguments are not valid ({exc.error_count()} "
            f"problem(s): {exc.errors()[0]['msg']})."
        ) from None
    if new_sql == shown.sql:
        return shown, others
    verdict = backend.classify(new_sql)
    new_hash = query_args_hash(new_sql, backend.dialect)
    if verdict.kind == "read":
        return Final(sql=new_sql, args_hash=new_hash, kind="read", preview=None), others
    if verdict.kind != "write":
        raise Blocked("Refused: the edited statement may not run: " + "; ".join(verdict.reasons))
    final = Final(
        sql=new_sql,
        args_hash=new_hash,
        kind="write",
        preview=await preview(new_sql),
        reasons=tuple(verdict.reasons),
    )
    return final, others


def _rows(preview: WritePreview | None) -> int | None:
    return preview.affected_rows if preview is not None else None


def unseen(final: Final, shown: Final) -> bool:
    """Whether an approved edit is a write whose measured effect the person has not seen: a
    different statement whose previewed row count differs from the count shown."""
    return (
        final.kind == "write"
        and final.sql != shown.sql
        and _rows(final.preview) != _rows(shown.preview)
    )


def again_reasons(final: Final, shown: Final) -> tuple[str, ...]:
    """Why an edit is asked about again: the count it would change, beside the count shown,
    then the edited statement's own reasons."""

    def count(rows: int | None) -> str:
        return "an unknown number of rows" if rows is None else f"{rows} row(s)"

    why = (
        f"you edited the statement: it would change {count(_rows(final.preview))}, "
        f"not {count(_rows(shown.preview))} as shown before; approve it as edited"
    )
    return (why, *final.reasons)
