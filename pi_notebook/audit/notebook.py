"""The audit's view of a notebook file: the digest that stamps a run record, and its check.

A settled ``%%pi`` run leaves a display output whose ``metadata["pi_notebook"]`` names the run,
its calls and their audit hashes; the notebook writes a durable ``notebook_output`` record
(``records.NotebookOutput``) holding the digest of the output's data and the same calls, and
stamps the record's hash into the output as ``record_hash``. The record also holds the
digest of the cell's prompt (``prompt_digest``), so an edited prompt is detected.
``verify_notebook`` checks a shared ``.ipynb`` against the store: every stamped output must
have its record, unchanged data, its own prompt, a run id no other output claims, and calls
whose hashes are those of their last records; an output that looks like a record (its HTML
carries :data:`RECORD_CLASS`, or its text starts as a record's does) but has no stamp is
named too, and so is a settled run of the file's sessions that no output of the file carries
(a deleted record), keyed by session and run id, so a renamed copy verifies the same. A
provisional record (a run that had not settled when the file was saved: its kernel stopped) is
checked as far as the audit allows (``.provisional``) and counted apart, never as a settled
run. What does not belong here: rendering or writing the outputs (the notebook package does).
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import sqlalchemy as sa

from .notebook_calls import check_call
from .notebook_read import (
    PROVISIONAL_CLASS,
    RECORD_CLASS,
    NotebookRead,
    Stamp,
    malformed_stamp,
    output_digest,
    prompt_body,
    prompt_digest,
    read_notebook,
)
from .provisional import check_provisional, malformed_provisional
from .schema import records, verify_store

if TYPE_CHECKING:
    from .log import AuditLog

__all__ = [
    "CALL_STAMP_FIELDS",
    "PROVISIONAL_CLASS",
    "RECORD_CLASS",
    "NotebookReport",
    "output_digest",
    "prompt_body",
    "prompt_digest",
    "verify_notebook",
]

CALL_STAMP_FIELDS = (
    "tool_call_id",
    "tool_name",
    "args_hash",
    "decision",
    "outcome",
    "rows",
    "audit_hash",
)
"""The fields of each stamped call, in the output's metadata and in its record alike."""


@dataclass(kw_only=True)
class NotebookReport:
    """The outcome of ``verify_notebook``.

    Attributes:
        ok: True only when every stamped output matches the store (and their chains hold).
        problems: One line per problem, each naming the cell and output index and what is
            wrong (altered, unknown, or a broken chain).
        outputs: How many stamped outputs (records of settled runs) were checked.
        calls: How many stamped calls were checked.
        provisional: How many provisional records (runs that had not settled when the file
            was saved) were checked; they are not settled runs.
    """

    ok: bool = True
    problems: list[str] = field(default_factory=list)
    outputs: int = 0
    calls: int = 0
    provisional: int = 0

    def __bool__(self) -> bool:
        return self.ok

    def __str__(self) -> str:
        """A short text for a person: the verdict first, then one line per problem."""
        if self.ok:
            extra = (
                f"; {self.provisional} provisional record(s) of runs that did not settle "
                "agree with it"
                if self.provisional
                else ""
            )
            return (
                f"OK: {self.outputs} stamped output(s) and {self.calls} call(s) match the "
                f"audit{extra}."
            )
        lines = [f"NOT OK: {len(self.problems)} problem(s) in {self.outputs} stamped output(s):"]
        return "\n".join([*lines, *(f"- {p}" for p in self.problems)])


def _load(
    conn: sa.Connection, sessions: Iterable[str]
) -> tuple[
    dict[tuple[str, str], dict[str, Any]], dict[tuple[str, str], list[tuple[str, Any, str]]]
]:
    """The notebook_output records by (session, hash), in chain order, and each call's (kind,
    payload, hash) records in chain order by (session, call id)."""
    c = records.c
    outputs: dict[tuple[str, str], dict[str, Any]] = {}
    calls: dict[tuple[str, str], list[tuple[str, Any, str]]] = {}
    for sid in sorted(set(sessions)):
        rows = conn.execute(
            sa.select(c.kind, c.tool_call_id, c.payload, c.hash)
            .where(c.session_id == sid)
            .where(sa.or_(c.kind == "notebook_output", c.tool_call_id.is_not(None)))
            .order_by(c.seq)
        )
        for kind, call_id, payload, digest in rows:
            try:
                value = json.loads(payload)
            except ValueError:
                value = {}
            if kind == "notebook_output" and call_id is None:
                outputs[(sid, digest)] = value if isinstance(value, dict) else {}
            if call_id is not None:
                calls.setdefault((sid, call_id), []).append((kind, value, digest))
    return outputs, calls


def _check(stamp: Stamp, outputs: dict[Any, Any], calls: dict[Any, Any]) -> list[str]:
    meta, where = stamp.meta, stamp.where
    bad = malformed_stamp(meta)
    if bad is not None:
        return [f"{where}: unknown output ({bad})"]
    sid = meta["session_id"]
    record = outputs.get((sid, meta["record_hash"]))
    if record is None:
        return [
            f"{where}: unknown output (no notebook_output record {meta['record_hash'][:12]}… "
            f"in session {sid})"
        ]
    problems: list[str] = []
    if record.get("run_id") != meta["run_id"]:
        problems.append(f"{where}: altered (its run_id is not the record's)")
    digest = output_digest(stamp.data) if isinstance(stamp.data, Mapping) else None
    if digest != record.get("output_digest") or meta["output_digest"] != record.get(
        "output_digest"
    ):
        problems.append(f"{where}: altered (its content does not match its audit record)")
    recorded_calls = record.get("calls") if isinstance(record.get("calls"), list) else []
    stamped = [{k: c.get(k) for k in CALL_STAMP_FIELDS} for c in meta["calls"]]
    on_record = [
        {k: c.get(k) for k in CALL_STAMP_FIELDS} for c in recorded_calls if isinstance(c, dict)
    ]
    if stamped != on_record:
        problems.append(f"{where}: altered (its calls differ from those its record holds)")
    recorded_prompt = record.get("prompt_digest")
    if isinstance(recorded_prompt, str):
        body = prompt_body(stamp.source)
        if body is None or prompt_digest(body) != recorded_prompt:
            problems.append(f"{where}: altered (its cell's prompt is not the prompt that ran)")
    for call in meta["calls"]:
        problems.extend(check_call(where, call, calls.get((sid, call.get("tool_call_id")))))
    return problems


def _missing_runs(read: NotebookRead, outputs: dict[tuple[str, str], dict[str, Any]]) -> list[str]:
    """The settled runs of the file's sessions that no output of the file carries.

    A run is found by its session and run id, wherever it sits in the file (a renamed or
    moved copy verifies the same). Re-running a cell replaces its output, so a run is not
    named when a later run of its session with the same prompt is in the file, as long as
    every ``%%pi`` cell with that prompt carries a run (else a deleted record of one of two
    cells with one prompt would pass as a re-run). A run whose output is in the file with its
    stamp removed is named as unstamped already."""
    present: set[tuple[str, str]] = set()
    for stamp in read.provisional:  # a provisional record of a settled run is named as stale
        if malformed_provisional(stamp.meta) is None:
            present.add((stamp.meta["session_id"], stamp.meta["run_id"]))
    carried: dict[str, int] = {}  # prompt digest -> stamped outputs of cells with that prompt
    for stamp in read.stamps:
        if malformed_stamp(stamp.meta) is None:
            present.add((stamp.meta["session_id"], stamp.meta["run_id"]))
            body = prompt_body(stamp.source)
            if body is not None:
                digest = prompt_digest(body)
                carried[digest] = carried.get(digest, 0) + 1
    cells: dict[str, int] = {}
    for digest in read.prompts:
        cells[digest] = cells.get(digest, 0) + 1
    runs: dict[str, list[tuple[str, Any]]] = {}  # session -> (run id, prompt digest), in order
    for (sid, _hash), record in outputs.items():
        run_id = record.get("run_id")
        if isinstance(run_id, str) and all(r != run_id for r, _ in runs.get(sid, [])):
            runs.setdefault(sid, []).append((run_id, record.get("prompt_digest")))
    problems: list[str] = []
    for sid, ordered in runs.items():
        for i, (run_id, prompt) in enumerate(ordered):
            if (sid, run_id) in present or _record_of(outputs, sid, run_id).get(
                "output_digest"
            ) in read.unstamped_digests:
                continue
            replaced = (
                isinstance(prompt, str)
                and any(p == prompt and (sid, r) in present for r, p in ordered[i + 1 :])
                and cells.get(prompt, 0) <= carried.get(prompt, 0)
            )
            if not replaced:
                problems.append(
                    f"missing: run {run_id[:12]}… of session {sid} settled with a record in "
                    "the audit, but no output of this file carries it (deleted, or its cell "
                    "re-run with another prompt)"
                )
    return problems


def _record_of(
    outputs: dict[tuple[str, str], dict[str, Any]], sid: str, run_id: str
) -> dict[str, Any]:
    """The last notebook_output record of ``run_id`` in session ``sid``."""
    found: dict[str, Any] = {}
    for (session, _hash), record in outputs.items():
        if session == sid and record.get("run_id") == run_id:
            found = record
    return found


def verify_notebook(
    path: str | os.PathLike[str], audit: AuditLog | str | sa.Engine | None = None
) -> NotebookReport:
    """Check every stamped output of a notebook file against the audit store.

    An output is stamped when its ``metadata["pi_notebook"]`` is set. For each: its
    ``notebook_output`` record (by ``record_hash``, in ``session_id``) must exist, hold its
    run id, and hold the digest of the output's data as it is now; no other output may carry
    the same run id; when the record holds a prompt digest, the cell's prompt must match it;
    its calls must be those the record holds; each call's ``audit_hash`` must be the hash of that call's last record,
    and its ``args_hash`` and approval decision those the records hold. The chains of the
    sessions involved are verified too. An output with no stamp whose HTML carries the
    record's class (:data:`RECORD_CLASS`) or whose text starts as a record's does is named as
    unstamped: a record with its stamp removed, or one pasted by hand. A settled run of those
    sessions that no output carries is named as missing (a run replaced by re-running its
    cell with the same prompt is not; see ``_missing_runs``).

    Args:
        path: the ``.ipynb`` file.
        audit: an ``AuditLog``, a SQLAlchemy URL or Engine of the store; ``None`` means the
            default store (``default_audit_url()``).

    Returns:
        A ``NotebookReport`` naming each altered or unknown output (cell and output index).

    Raises:
        FileNotFoundError: no such file.
        AuditError: the file is not a readable notebook.
    """
    read = read_notebook(path)
    report = NotebookReport(outputs=len(read.stamps), provisional=len(read.provisional))
    engine, owned = _engine_of(audit)
    try:
        sessions = {s.meta["session_id"] for s in read.stamps if malformed_stamp(s.meta) is None}
        sessions |= {
            s.meta["session_id"] for s in read.provisional if malformed_provisional(s.meta) is None
        }
        with engine.connect() as conn:
            outputs, calls = _load(conn, sessions)
        first_of_run: dict[str, str] = {}
        _check_stamps(report, read.stamps, outputs, calls, first_of_run)
        _check_provisional(report, read.provisional, outputs, calls, first_of_run)
        report.problems.extend(
            f"{where}: unstamped (it looks like a pi_notebook record but has no provenance "
            "stamp; removed or forged)"
            for where in read.unstamped
        )
        report.problems.extend(_missing_runs(read, outputs))
        for sid in sorted(sessions):
            chain = verify_store(engine, sid)
            report.problems.extend(f"the audit chain is broken: {p}" for p in chain.problems)
    finally:
        if owned:
            engine.dispose()
    report.ok = not report.problems
    return report


def _check_stamps(
    report: NotebookReport,
    stamps: list[Stamp],
    outputs: dict[tuple[str, str], dict[str, Any]],
    calls: dict[tuple[str, str], list[tuple[str, Any, str]]],
    first_of_run: dict[str, str],
) -> None:
    """Check each stamped output against its record, count its calls, and name a second
    output of one run as duplicated (``first_of_run``: run id to where it was first seen)."""
    for stamp in stamps:
        report.problems.extend(_check(stamp, outputs, calls))
        if malformed_stamp(stamp.meta) is None:
            report.calls += len(stamp.meta["calls"])
            _first(report, stamp.where, stamp.meta["run_id"], first_of_run)


def _check_provisional(
    report: NotebookReport,
    provisional: list[Stamp],
    outputs: dict[tuple[str, str], dict[str, Any]],
    calls: dict[tuple[str, str], list[tuple[str, Any, str]]],
    first_of_run: dict[str, str],
) -> None:
    """Check each provisional record as far as the audit allows (a run that settled since is
    named as stale), and name one that repeats a run already seen as duplicated."""
    settled = {
        (sid, r["run_id"]) for (sid, _h), r in outputs.items() if isinstance(r.get("run_id"), str)
    }
    for stamp in provisional:
        body = prompt_body(stamp.source)
        digest = None if body is None else prompt_digest(body)
        report.problems.extend(
            check_provisional(stamp.where, stamp.meta, stamp.data, digest, settled, calls)
        )
        run_id = stamp.meta.get("run_id")
        if isinstance(run_id, str):
            _first(report, stamp.where, run_id, first_of_run)


def _first(report: NotebookReport, where: str, run_id: str, first_of_run: dict[str, str]) -> None:
    if run_id in first_of_run:
        report.problems.append(
            f"{where}: duplicated (run {run_id[:12]}… is already recorded at "
            f"{first_of_run[run_id]})"
        )
    else:
        first_of_run[run_id] = where


def _engine_of(audit: AuditLog | str | sa.Engine | None) -> tuple[sa.Engine, bool]:
    if isinstance(audit, sa.Engine):
        return audit, False
    if audit is None or isinstance(audit, str):
        from .log import default_audit_url

        return sa.create_engine(audit or default_audit_url()), True
    audit.flush()
    return audit.engine, False
