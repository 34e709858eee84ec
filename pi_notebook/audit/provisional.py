"""The audit's check of a provisional record: a run that had not settled when the file was saved.

A ``%%pi`` run keeps a provisional record in its cell until its final record replaces it
(``pi_notebook.notebook.provisional``): if the kernel stops first, the file keeps what was
known, ending "interrupted: nothing ran after this point". Its ``metadata["pi_notebook"]`` is
``{"provisional": true, "run_id", "session_id", "prompt_digest", "calls"}`` and no audit
record holds its digest (it changes with every event), so :func:`check_provisional` checks
what can be checked against the store: the prompt it names is its cell's; its run did not
settle (else the file lost or hid the final record); and each call it names says no less than
the audit about what ran: a call it shows as waiting for a person or not yet gated has no
approval, grant use or end in the audit, a call it shows as ended ended the same way with the
same rows, and its arguments hash is the one the audit bound. A call the audit does not know
is not a problem: records written in the moment the kernel stopped may be lost with it.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, TypeGuard

from .notebook_calls import recorded_args_hash

__all__ = ["PROVISIONAL_FIELDS", "check_provisional", "is_provisional", "malformed_provisional"]

PROVISIONAL_FIELDS = ("run_id", "session_id", "prompt_digest")
"""The string fields every provisional stamp has (besides ``provisional`` and ``calls``)."""

_NOT_RUN = ("awaiting approval", "queued")
_RAN_KINDS = ("approval", "grant_use", "tool_execution_end")


def is_provisional(meta: Any) -> TypeGuard[dict[str, Any]]:
    """Whether an output's ``pi_notebook`` metadata is a provisional record's."""
    return isinstance(meta, dict) and meta.get("provisional") is True  # pyright: ignore[reportUnknownMemberType]


def malformed_provisional(meta: Mapping[str, Any]) -> str | None:
    """What is wrong with a provisional stamp's shape, or ``None``."""
    for key in PROVISIONAL_FIELDS:
        if not isinstance(meta.get(key), str):
            return f"its provisional stamp has no {key}"
    calls = meta.get("calls")
    if not isinstance(calls, list) or not all(isinstance(c, Mapping) for c in calls):  # pyright: ignore[reportUnknownVariableType]
        return "its provisional stamp's calls are not a list of objects"
    return None


def _said_ran(where: str, call: Mapping[str, Any], chain: list[tuple[str, Any, str]]) -> list[str]:
    call_id = call.get("tool_call_id")
    state = call.get("state")
    payloads = [(k, p) for k, p, _ in chain if isinstance(p, dict)]
    if state in _NOT_RUN:
        later = [k for k, _ in payloads if k in _RAN_KINDS]
        if later:
            return [
                f"{where}: behind the audit (call {call_id!r} reads {state!r}, but the audit "
                f"recorded its {later[-1]}: the record was written before it, or altered)"
            ]
        return []
    ends = [p for k, p in payloads if k == "tool_execution_end"]
    outcome = call.get("outcome")
    if not ends or outcome not in ("ok", "error"):
        return []
    problems: list[str] = []
    failed = ends[-1].get("is_error")
    if isinstance(failed, bool) and (outcome == "ok") == failed:
        problems.append(
            f"{where}: call {call_id!r} is altered (outcome {outcome!r}, the audit "
            f"recorded {'an error' if failed else 'success'})"
        )
    result = ends[-1].get("result")
    details = result.get("details") if isinstance(result, dict) else None
    rows = details.get("row_count") if isinstance(details, dict) else None
    if call.get("rows") is not None and isinstance(rows, int) and call.get("rows") != rows:
        problems.append(
            f"{where}: call {call_id!r} is altered (rows {call.get('rows')!r}, the "
            f"audit recorded {rows})"
        )
    return problems


def check_provisional(
    where: str,
    meta: Mapping[str, Any],
    data: Any,
    prompt: str | None,
    settled_runs: set[tuple[str, str]],
    calls: Mapping[tuple[str, Any], list[tuple[str, Any, str]]],
) -> list[str]:
    """The problems of one provisional record (an empty list: it agrees with the audit).

    Args:
        where: ``cell C output O``, for the messages.
        meta: the output's ``pi_notebook`` metadata (a provisional stamp).
        data: the output's MIME bundle.
        prompt: the digest of its cell's prompt (``None``: the cell is not a ``%%pi`` cell).
        settled_runs: ``(session id, run id)`` of every run with a ``notebook_output`` record.
        calls: each call's ``(kind, payload, hash)`` records by ``(session id, call id)``.
    """
    bad = malformed_provisional(meta)
    if bad is not None:
        return [f"{where}: unknown output ({bad})"]
    sid, run_id = meta["session_id"], meta["run_id"]
    page = data.get("text/html") if isinstance(data, Mapping) else None  # pyright: ignore[reportUnknownMemberType]
    page = "".join(page) if isinstance(page, list) else page  # pyright: ignore[reportUnknownArgumentType]
    if not isinstance(page, str) or f"data-run='{run_id}'" not in page:
        return [
            f"{where}: altered (its stamp is a provisional record's, its content is not "
            f"run {run_id[:12]}…'s)"
        ]
    problems: list[str] = []
    if prompt != meta["prompt_digest"]:
        problems.append(f"{where}: altered (its cell's prompt is not the prompt that ran)")
    if (sid, run_id) in settled_runs:
        problems.append(
            f"{where}: stale (run {run_id[:12]}… settled with a record in the audit, "
            "but this file holds its provisional record instead)"
        )
    for call in meta["calls"]:
        chain = calls.get((sid, call.get("tool_call_id")))
        if not chain:
            continue
        recorded = recorded_args_hash(chain)
        shown = call.get("args_hash")
        if recorded is not None and shown is not None and shown != recorded:
            problems.append(
                f"{where}: call {call.get('tool_call_id')!r} is altered (args_hash "
                "differs from the audit)"
            )
        problems.extend(_said_ran(where, call, chain))
    return problems
