"""The per-session hash chain: how a record's hash is computed, and how a store is verified.

A record's hash is SHA-256 over a canonical JSON object of all its fields except ``id`` (the
store's own counter), including ``prev_hash``; the first record of a session links to
``GENESIS``. ``verify_session`` walks one session's records in sequence order and reports
the first altered, inserted or removed record, then resynchronises so one tampering is not
reported as a cascade. The head (count and last hash, D11) catches a removed last record.
"""

from __future__ import annotations

import datetime as dt
import hashlib
import json
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

import orjson

__all__ = [
    "GENESIS",
    "Linkable",
    "SessionHasher",
    "VerifyReport",
    "format_ts",
    "record_hash",
    "record_hasher",
    "verify_session",
]

GENESIS = "0" * 64
# Built once: json.dumps with options builds a new encoder on every call.
_CANONICAL = json.JSONEncoder(sort_keys=True, separators=(",", ":"), ensure_ascii=False)


@dataclass(kw_only=True)
class VerifyReport:
    """The outcome of ``AuditLog.verify``.

    Attributes:
        ok: True only when every checked session's chain is intact.
        problems: One line per problem, in chain order within each session; each names the
            session, the sequence number and what happened (altered, inserted, removed).
        sessions: How many sessions were checked.
        records: How many records were checked.
    """

    ok: bool = True
    problems: list[str] = field(default_factory=list)
    sessions: int = 0
    records: int = 0

    def __bool__(self) -> bool:
        return self.ok


def format_ts(ts: dt.datetime) -> str:
    """The canonical text of a timestamp: UTC, microseconds, ``Z`` (naive means UTC)."""
    if ts.tzinfo is dt.UTC:  # what the log stamps: no conversion, the fields as they are
        # The text of isoformat(timespec="microseconds") without "+00:00", at 2/3 of its cost
        # (years are 1..9999: four digits, as isoformat pads them).
        return "%04d-%02d-%02dT%02d:%02d:%02d.%06dZ" % (  # noqa: UP031 (faster than f"")
            ts.year,
            ts.month,
            ts.day,
            ts.hour,
            ts.minute,
            ts.second,
            ts.microsecond,
        )
    if ts.tzinfo is not None:
        ts = ts.astimezone(dt.UTC).replace(tzinfo=None)
    # isoformat is C code and, with timespec, always prints the microseconds (strftime is
    # several times slower, and this runs once per record written and verified).
    return ts.isoformat(timespec="microseconds") + "Z"


def record_hash(
    *,
    session_id: str,
    seq: int,
    ts: str,
    kind: str,
    tool_call_id: str | None,
    tool_name: str | None,
    user: str | None,
    policy_version: str | None,
    payload: str,
    prev_hash: str,
) -> str:
    """SHA-256 (hex) of the canonical JSON of a record's fields; ``ts`` from ``format_ts``.

    The canonical JSON is ``json.dumps(fields, sort_keys=True, separators=(",", ":"),
    ensure_ascii=False)``; it is written out here key by key in that sorted order (the same
    text at a third of the cost: this runs once per record written and verified).
    """
    if type(seq) is not int:  # only the int path is spelled out; anything else as before
        return _record_hash_slow(
            session_id=session_id,
            seq=seq,
            ts=ts,
            kind=kind,
            tool_call_id=tool_call_id,
            tool_name=tool_name,
            user=user,
            policy_version=policy_version,
            payload=payload,
            prev_hash=prev_hash,
        )
    canonical = (
        f'{{"kind":{_s(kind)},"payload":{_s(payload)},"policy_version":{_s(policy_version)},'
        f'"prev_hash":{_s(prev_hash)},"seq":{seq},"session_id":{_s(session_id)},'
        f'"tool_call_id":{_s(tool_call_id)},"tool_name":{_s(tool_name)},"ts":{_s(ts)},'
        f'"user":{_s(user)}}}'
    )
    return hashlib.sha256(canonical.encode("utf-8")).hexdigest()


def record_hasher(session_id: str, user: str | None) -> SessionHasher:
    """``record_hash`` for one session's writer: ``hasher(seq, ts, kind, tool_call_id,
    tool_name, policy_version, payload, prev_hash)`` (positional) is the very same digest, and
    ``hasher.link`` chains a whole batch.

    The parts of the canonical text that are the same for every record of the session
    (``session_id``, ``user``) and the JSON text of the few kinds, tool names and policy
    versions are built once instead of per record (the writer hashes every record).
    """
    return SessionHasher(session_id, user)


class Linkable(Protocol):
    """What ``SessionHasher.link`` reads of a record (the writer's queued records)."""

    @property
    def ts(self) -> dt.datetime: ...
    @property
    def kind(self) -> str: ...
    @property
    def tool_call_id(self) -> str | None: ...
    @property
    def tool_name(self) -> str | None: ...
    @property
    def policy_version(self) -> str | None: ...
    @property
    def payload(self) -> str: ...


class SessionHasher:
    """The record hashes of one session; see ``record_hasher``."""

    def __init__(self, session_id: str, user: str | None) -> None:
        self.session_id, self.user = session_id, user
        self._middle = f',"session_id":{_s(session_id)},"tool_call_id":'
        self._end = f',"user":{_s(user)}}}'
        self._known: dict[str | None, str] = {}  # kind, tool_name, policy_version -> JSON

    def _text_of(self, value: str | None) -> str:
        known = self._known
        found = known.get(value)
        if found is None:
            found = _s(value)
            if len(value or "") <= 64:  # ids of a few kinds; a long one is not kept
                if len(known) >= 256:
                    known.clear()
                known[value] = found
        return found

    def __call__(
        self,
        seq: int,
        ts: str,
        kind: str,
        tool_call_id: str | None,
        tool_name: str | None,
        policy_version: str | None,
        payload: str,
        prev_hash: str,
    ) -> str:
        if (
            type(seq) is not int
            or type(payload) is not str
            or type(ts) is not str
            or type(prev_hash) is not str
        ):
            return record_hash(
                session_id=self.session_id,
                seq=seq,
                ts=ts,
                kind=kind,
                tool_call_id=tool_call_id,
                tool_name=tool_name,
                user=self.user,
                policy_version=policy_version,
                payload=payload,
                prev_hash=prev_hash,
            )
        get, text_of, encode = self._known.get, self._text_of, _encode_str
        canonical = (
            f'{{"kind":{get(kind) or text_of(kind)},"payload":{encode(payload)},'
            f'"policy_version":{get(policy_version) or text_of(policy_version)},"prev_hash":'
            f'{encode(prev_hash)},"seq":{seq}{self._middle}'
            f'{"null" if tool_call_id is None else encode(tool_call_id)},"tool_name":'
            f'{get(tool_name) or text_of(tool_name)},"ts":{encode(ts)}{self._end}'
        )
        return hashlib.sha256(canonical.encode("utf-8")).hexdigest()

    def link(
        self, seq: int, prev_hash: str, records: Sequence[Linkable]
    ) -> tuple[list[str], list[str]]:
        """Chain ``records`` after the record ``seq`` whose hash is ``prev_hash``: their
        timestamps' ``format_ts`` texts and their hashes, in order (what ``__call__`` gives
        one at a time, with the loop's per-record work cut: no call per record, a timestamp's
        date and time formatted once per second, and the canonical text written by
        ``orjson``, whose text of strings, integers and null is the canonical encoder's,
        character for character, at a fraction of the cost)."""
        stamps: list[str] = []
        hashes: list[str] = []
        sha256, dumps, utc = hashlib.sha256, orjson.dumps, dt.UTC
        session_id, user = self.session_id, self.user
        low = high = _NEVER  # the second [low, high) whose text is ``second``
        second = ""
        for item in records:
            seq += 1
            ts, payload = item.ts, item.payload
            if ts.tzinfo is utc and low <= ts < high:
                stamp = f"{second}{ts.microsecond:06d}Z"
            elif ts.tzinfo is utc:
                low = ts.replace(microsecond=0)
                high = low + _SECOND if low.year < 9999 else low  # (no 10000-01-01)
                stamp = format_ts(ts)
                second = stamp[:-7]
            else:
                stamp = format_ts(ts)
            try:
                if type(payload) is not str:  # only the writer's text takes the short way
                    raise TypeError
                canonical = dumps(
                    {  # keys in sorted order, as the canonical text has them
                        "kind": item.kind,
                        "payload": payload,
                        "policy_version": item.policy_version,
                        "prev_hash": prev_hash,
                        "seq": seq,
                        "session_id": session_id,
                        "tool_call_id": item.tool_call_id,
                        "tool_name": item.tool_name,
                        "ts": stamp,
                        "user": user,
                    }
                )
            except TypeError:  # text orjson refuses (a lone surrogate), or another type
                prev_hash = self(
                    seq,
                    stamp,
                    item.kind,
                    item.tool_call_id,
                    item.tool_name,
                    item.policy_version,
                    payload,
                    prev_hash,
                )
            else:
                prev_hash = sha256(canonical).hexdigest()
            stamps.append(stamp)
            hashes.append(prev_hash)
        return stamps, hashes


_NEVER = dt.datetime.max.replace(tzinfo=dt.UTC)
_SECOND = dt.timedelta(seconds=1)


def _s(value: str | None) -> str:
    return "null" if value is None else _encode_str(value)


_encode_str = json.encoder.encode_basestring  # what the canonical encoder uses for str


def _record_hash_slow(**fields: Any) -> str:
    canonical = _CANONICAL.encode(fields)
    return hashlib.sha256(canonical.encode("utf-8")).hexdigest()


def verify_session(
    session_id: str, rows: Iterable[Any], head: tuple[int, str] | None, report: VerifyReport
) -> None:
    """Check one session's records (ordered by seq) against the chain and the head.

    ``rows`` have attributes session_id, seq, ts, kind, tool_call_id, tool_name, user,
    policy_version, payload, prev_hash, hash. Problems are appended to ``report``.
    """
    where = f"session {session_id}"
    if head is None:
        _check_headless(where, rows, report)
        return
    expected_seq = 1
    prev_hash = GENESIS
    last_seq = 0
    last_hash: str | None = None
    problems_before = len(report.problems)
    for row in rows:
        report.records += 1
        seq = int(row.seq)
        _check_row(where, row, seq, expected_seq, prev_hash, head[0], report)
        expected_seq = max(expected_seq, seq + 1)
        prev_hash = row.hash
        last_seq, last_hash = seq, row.hash
    _check_head(where, head, last_seq, last_hash, len(report.problems) > problems_before, report)


def _check_headless(where: str, rows: Iterable[Any], report: VerifyReport) -> None:
    """A session without a head: the writer creates the head with the first batch, so its
    records were forged."""
    seqs = [int(row.seq) for row in rows]
    report.records += len(seqs)
    if seqs:
        span = f"seq {min(seqs)}" if len(seqs) == 1 else f"seq {min(seqs)}..{max(seqs)}"
        report.problems.append(
            f"{where} {span}: inserted (no head entry: the audit never wrote this session)"
        )


def _check_row(
    where: str,
    row: Any,
    seq: int,
    expected_seq: int,
    prev_hash: str,
    head_count: int,
    report: VerifyReport,
) -> None:
    """One record against the chain: its place (a gap, a repeat), its hash (altered, or
    inserted past the head's count) and its link to the record before it."""
    computed = record_hash(
        session_id=row.session_id,
        seq=seq,
        ts=format_ts(row.ts),
        kind=row.kind,
        tool_call_id=row.tool_call_id,
        tool_name=row.tool_name,
        user=row.user,
        policy_version=row.policy_version,
        payload=row.payload,
        prev_hash=row.prev_hash,
    )
    if seq > expected_seq:
        missing = (
            f"seq {expected_seq}" if seq == expected_seq + 1 else f"seq {expected_seq}..{seq - 1}"
        )
        report.problems.append(
            f"{where} {missing}: removed (the chain jumps from seq {expected_seq - 1} to seq {seq})"
        )
    elif seq < expected_seq:
        report.problems.append(f"{where} seq {seq}: inserted (sequence number repeats)")
    if computed != row.hash:
        what = "inserted" if seq > head_count else "altered"
        report.problems.append(f"{where} seq {seq}: {what} (its content does not match its hash)")
    elif row.prev_hash != prev_hash and seq == expected_seq:
        if seq == 1:
            report.problems.append(f"{where} seq 1: altered (does not start the chain)")
        else:
            # This record is self-consistent but links elsewhere: its predecessor was
            # rewritten and re-hashed, or this record was forged with a valid hash.
            report.problems.append(
                f"{where} seq {seq - 1}: altered (seq {seq} links to a different hash)"
            )


def _check_head(
    where: str,
    head: tuple[int, str] | None,
    last_seq: int,
    last_hash: str | None,
    found_already: bool,
    report: VerifyReport,
) -> None:
    if head is None:
        return
    count, head_hash = head
    if last_seq < count:
        missing = f"seq {last_seq + 1}" if last_seq + 1 == count else f"seq {last_seq + 1}..{count}"
        report.problems.append(
            f"{where} {missing}: removed (the head records {count} records, "
            f"the store ends at seq {last_seq})"
        )
    elif last_seq > count:
        extra = f"seq {count + 1}" if count + 1 == last_seq else f"seq {count + 1}..{last_seq}"
        report.problems.append(
            f"{where} {extra}: inserted (beyond the {count} records the head counts)"
        )
    elif last_hash != head_hash and not found_already:
        report.problems.append(
            f"{where} seq {last_seq}: altered (does not match the head's last hash)"
        )
