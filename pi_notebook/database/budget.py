"""A read budget for ``query_database``: the engine's estimate decides whether a
read runs at once or asks a person.

``database_extension(url=..., read_budget={"bytes": N, "rows": M})``: before a read runs,
the engine estimates what it scans (:func:`pi_notebook.sql.engines.estimate_read`; ClickHouse:
``EXPLAIN ESTIMATE``; PostgreSQL and DuckDB: ``EXPLAIN (FORMAT JSON)``). A read whose estimate passes either bound is put to the person through
the approval gate, with the estimate in the request's reasons ("scans about 1.2 GB"); the
decision is committed to the audit before anything runs. Every read's result carries
``details["estimate"]`` (``rows``, ``bytes``, ``source``); a read whose estimate cannot be
had runs as it would without a budget, and its ``source`` says so.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from pi_notebook.approvals import (
    ApprovalDecided,
    ApprovalEntry,
    ApprovalRequest,
    ask,
    commit_record,
)
from pi_notebook.approvals.tools import unrecorded
from pi_notebook.database.views import query_call_view
from pi_notebook.errors import AbortError
from pi_notebook.sql import POLICY_VERSION
from pi_notebook.sql.backend import DatabaseBackend, query_args_hash
from pi_notebook.sql.engines import ReadEstimate, estimate_read

if TYPE_CHECKING:
    from pi_notebook.extensions import ExtensionAPI

__all__ = ["TITLE", "ReadBudget", "install_read_budget"]

TITLE = "Large database read"
TOOL_NAME = "query_database"
_NO_UI = "A read over the read budget requires interactive approval."


@dataclass(frozen=True, kw_only=True)
class ReadBudget:
    """Bounds on what a read may scan before a person is asked (``None``: no bound)."""

    rows: int | None = None
    bytes: int | None = None

    @classmethod
    def of(cls, value: ReadBudget | Mapping[str, Any]) -> ReadBudget:
        """A budget from ``{"rows": M, "bytes": N}`` (either may be left out).

        Raises:
            ValueError: an unknown key, or a bound that is not a positive integer.
        """
        if isinstance(value, ReadBudget):
            return value
        unknown = sorted(set(value) - {"rows", "bytes"})
        if unknown:
            raise ValueError(f"read_budget takes 'rows' and 'bytes', not {', '.join(unknown)}")
        for key in ("rows", "bytes"):
            bound = value.get(key)
            if bound is not None and (type(bound) is not int or bound <= 0):
                raise ValueError(f"read_budget[{key!r}] must be a positive integer")
        if value.get("rows") is None and value.get("bytes") is None:
            raise ValueError("read_budget needs 'rows' or 'bytes'")
        return cls(rows=value.get("rows"), bytes=value.get("bytes"))

    def passed(self, estimate: ReadEstimate) -> list[str]:
        """Why ``estimate`` passes the budget (empty when it stays within it, or is unknown)."""
        found: list[str] = []
        if self.rows is not None and estimate.rows is not None and estimate.rows > self.rows:
            found.append(
                f"the engine estimates this read scans about {estimate.rows:,} rows, "
                f"over the read budget of {self.rows:,} rows"
            )
        if self.bytes is not None and estimate.bytes is not None and estimate.bytes > self.bytes:
            found.append(
                f"the engine estimates this read scans about {size(estimate.bytes)}, "
                f"over the read budget of {size(self.bytes)}"
            )
        return found


def size(n: int) -> str:
    """``1234567`` -> ``"1.2 MB"`` (decimal units, as warehouses bill)."""
    value = float(n)
    for unit in ("bytes", "kB", "MB", "GB", "TB"):
        if value < 1000 or unit == "TB":
            return f"{n:,} bytes" if unit == "bytes" else f"{value:.1f} {unit}"
        value /= 1000
    raise AssertionError("unreachable")  # pragma: no cover


def install_read_budget(
    pi: ExtensionAPI, backend: DatabaseBackend, budget: ReadBudget, *, approval_timeout_s: float
) -> None:
    """Register the budget's ``tool_call`` handler (after the write gate) and the handler that
    puts each read's estimate in its result's details."""
    estimates: dict[str, ReadEstimate] = {}

    async def on_call(event: Any, ctx: Any) -> dict[str, Any] | None:
        if event.tool_name != TOOL_NAME:
            return None
        sql = getattr(event.input, "sql", None)
        if not isinstance(sql, str) or backend.classify(sql).kind != "read":
            return None
        signal = getattr(ctx, "signal", None)
        try:
            estimate = await estimate_read(backend, sql, signal=signal)
        except AbortError:
            return {
                "block": True,
                "reason": "Not run: the run was aborted while the read was estimated.",
            }
        except Exception as exc:  # the estimate is advice: the read's own limits still hold
            estimate = ReadEstimate(rows=None, bytes=None, source=f"the estimate failed: {exc}")
        estimates[event.tool_call_id] = estimate
        reasons = tuple(budget.passed(estimate))
        if not reasons:
            return None
        return await _ask(
            pi, ctx, event.tool_call_id, sql, backend.dialect, reasons, approval_timeout_s
        )

    def on_result(event: Any, _ctx: Any) -> dict[str, Any] | None:
        estimate = estimates.pop(event.tool_call_id, None)
        if estimate is None or event.tool_name != TOOL_NAME:
            return None
        details = dict(event.details) if isinstance(event.details, dict) else {}
        details["estimate"] = estimate.details()
        return {"details": details}

    pi.on("tool_call", on_call)
    pi.on("tool_result", on_result)
    pi.on("tool_execution_end", lambda event, _ctx: estimates.pop(event.tool_call_id, None))


async def _ask(
    pi: ExtensionAPI,
    ctx: Any,
    tool_call_id: str,
    sql: str,
    dialect: str,
    reasons: tuple[str, ...],
    approval_timeout_s: float,
) -> dict[str, Any] | None:
    """Put a read over the budget to the person (``reasons`` say which bound it passes),
    commit the decision, and block the call unless it was approved and recorded."""
    args_hash = query_args_hash(sql, dialect)
    request = ApprovalRequest(
        tool_call_id=tool_call_id,
        tool_name=TOOL_NAME,
        title=TITLE,
        args={"sql": sql},
        args_hash=args_hash,
        view=query_call_view({"sql": sql}),
        reasons=reasons,
        editable=False,
        timeout_s=approval_timeout_s,
    )
    answer = await ask(request, ctx, message=sql, no_ui_reason=_NO_UI)
    entry = ApprovalEntry(
        decision=answer.decision,
        args_hash=args_hash,
        args={"sql": sql},
        reasons=reasons,
        reason=None if answer.approved else answer.reason,
        approver=answer.outcome.approver if answer.outcome else None,
        via=answer.via,
        waited_ms=answer.waited_ms,
        timeout_s=approval_timeout_s,
        problem=answer.problem,
    ).showing(request.view)
    audit = getattr(ctx, "audit", None) or getattr(pi, "audit", None)
    try:
        await commit_record(
            audit,
            ApprovalDecided(
                entry=entry,
                tool_call_id=tool_call_id,
                tool_name=TOOL_NAME,
                policy_version=POLICY_VERSION,
            ),
        )
    except Exception as exc:  # a decision we cannot record is no approval
        return {"block": True, "reason": unrecorded(exc)}
    return None if answer.approved else {"block": True, "reason": answer.reason}
