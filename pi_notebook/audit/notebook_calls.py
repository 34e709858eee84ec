"""The audit's check of one stamped call of a notebook output against that call's records.

A call's records in a session are its ``(kind, payload, hash)`` tuples in chain order.
:func:`check_call` names a call the audit does not know, one whose ``audit_hash`` is not the
hash of its last record, and one whose arguments hash, decision, outcome or rows differ from
what its records hold; :func:`recorded_args_hash` is the arguments hash the records bound.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

__all__ = ["check_call", "recorded_args_hash"]


def recorded_args_hash(chain: list[tuple[str, Any, str]]) -> str | None:
    final = [p.get("args_hash") for k, p, _ in chain if k == "final_args" and isinstance(p, dict)]
    if final and final[-1]:
        return final[-1]
    approved = [p.get("args_hash") for k, p, _ in chain if k == "approval" and isinstance(p, dict)]
    return approved[-1] if approved and approved[-1] else None


def check_call(
    where: str, call: Mapping[str, Any], chain: list[tuple[str, Any, str]] | None
) -> list[str]:
    call_id = call.get("tool_call_id")
    if not chain:
        return [f"{where}: unknown call {call_id!r} (no audit record of it in that session)"]
    problems: list[str] = []
    if call.get("audit_hash") != chain[-1][2]:
        problems.append(
            f"{where}: call {call_id!r} is altered (its audit_hash is not the hash of its last "
            "audit record)"
        )
    recorded = recorded_args_hash(chain)
    if recorded is not None and call.get("args_hash") != recorded:
        problems.append(f"{where}: call {call_id!r} is altered (args_hash differs from the audit)")
    problems.extend(_check_told(where, call, chain))
    return problems


def _check_told(
    where: str, call: Mapping[str, Any], chain: list[tuple[str, Any, str]]
) -> list[str]:
    """The stamp's decision, outcome and rows against the call's own records."""
    call_id = call.get("tool_call_id")
    payloads = [(k, p) for k, p, _ in chain if isinstance(p, dict)]
    approvals = [p.get("decision") for k, p in payloads if k == "approval"]
    recorded = approvals[-1] if approvals else None
    if recorded is None and any(k == "grant_use" for k, _ in payloads):
        recorded = "granted"
    problems: list[str] = []
    if recorded is not None and call.get("decision") != recorded:
        problems.append(
            f"{where}: call {call_id!r} is altered (decision "
            f"{call.get('decision')!r}, the audit recorded {recorded!r})"
        )
    ends = [p for k, p in payloads if k == "tool_execution_end"]
    if not ends:
        return problems
    failed = ends[-1].get("is_error")
    outcome = call.get("outcome")
    if isinstance(failed, bool) and outcome is not None and (outcome == "ok") == failed:
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
