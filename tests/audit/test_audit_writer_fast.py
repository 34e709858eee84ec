"""The audit write path's shortcuts give what the plain way gives: the batch hasher, the
clean-text regex of redaction, the C encoder made once; and the chain they write verifies."""

from __future__ import annotations

import collections
import dataclasses
import datetime as dt
import decimal
import enum
import json
import math
import random
import threading
import time
import uuid
from pathlib import Path, PurePosixPath
from typing import Any

import pytest
import sqlalchemy as sa

from pi_notebook.audit import AuditLog
from pi_notebook.audit.chain import GENESIS, format_ts, record_hash, record_hasher
from pi_notebook.audit.payload import _ENCODER_CONVERTING, encode_payload  # pyright: ignore[reportPrivateUsage]
from pi_notebook.audit.redact import Redactor, dumps
from pi_notebook.audit.schema import records


@dataclasses.dataclass
class Item:
    ts: dt.datetime
    kind: str
    tool_call_id: str | None
    tool_name: str | None
    policy_version: str | None
    payload: Any


def test_link_gives_record_hash_across_seconds_zones_and_odd_fields() -> None:
    """``SessionHasher.link`` (one call per batch, a second's text formatted once) gives the
    very stamps and hashes of ``format_ts`` and ``record_hash``, record by record: across
    second and day boundaries, for other zones and naive times, for text that needs escaping,
    and after a head that needs escaping."""
    utc, east = dt.UTC, dt.timezone(dt.timedelta(hours=5, minutes=30))
    base = dt.datetime(2026, 12, 31, 23, 59, 58, 999_998, tzinfo=utc)
    steps = [0, 1, 2, 500_000, 1_000_000, 1_000_001, 2_000_000, 2_000_000, 3_600_000_000]
    items = [
        Item(
            base + dt.timedelta(microseconds=s),
            "tool_call",
            f"call_{i}",
            "q",
            None,
            json.dumps({"sql": f"SELECT {i}", "q": 'a "b" \\ é'}),
        )
        for i, s in enumerate(steps)
    ]
    items += [
        Item(base.astimezone(east), 'k"ind', 'id "é"\n', "tool\u2028", "v1", "{}"),
        Item(base.replace(tzinfo=None), "k", None, None, None, "{}"),
        Item(dt.datetime.max.replace(tzinfo=utc), "k", None, None, None, "{}"),
        Item(base - dt.timedelta(microseconds=1), "k", None, None, None, "{}"),
    ]
    for session_id, user in (("s1", "ada"), ('s"2', None)):
        hasher = record_hasher(session_id, user)
        for seq, prev in ((0, GENESIS), (41, 'not "hex"'), (7, "f" * 64)):
            stamps, hashes = hasher.link(seq, prev, items)
            assert len(stamps) == len(hashes) == len(items)
            for i, item in enumerate(items):
                assert stamps[i] == format_ts(item.ts), item
                assert hashes[i] == record_hash(
                    session_id=session_id,
                    seq=seq + i + 1,
                    ts=stamps[i],
                    kind=item.kind,
                    tool_call_id=item.tool_call_id,
                    tool_name=item.tool_name,
                    user=user,
                    policy_version=item.policy_version,
                    payload=item.payload,
                    prev_hash=prev if i == 0 else hashes[i - 1],
                )


def test_the_clean_text_regex_finds_what_the_literals_find() -> None:
    """The clean-text shortcut's one regex search (the literals as a trie) says "clean"
    exactly when no literal is in the lower-cased text."""
    redactor = Redactor()
    literals = redactor._clean_literals  # pyright: ignore[reportPrivateUsage]
    found = redactor._clean_re  # pyright: ignore[reportPrivateUsage]
    assert literals and found is not None
    rng = random.Random(11)
    pieces = [*literals, *(lit[:-1] for lit in literals), *(lit[1:] for lit in literals)]
    pieces += ["a", "s", "-", "_", ":", "/", "x", "SELECT id FROM t", " ", '"', "K", "ſ"]
    for _ in range(20000):
        text = "".join(rng.choice(pieces) for _ in range(rng.randint(0, 6))).lower()
        assert (found.search(text) is not None) == any(lit in text for lit in literals), text
    custom = Redactor().extend(
        *[dataclasses.replace(p, triggers=("zz.q", "zz", "z+")) for p in Redactor().patterns[:1]]
    )
    assert custom._clean_re is not None  # pyright: ignore[reportPrivateUsage]
    assert custom._clean_re.search("a zz b")  # pyright: ignore[reportPrivateUsage]
    assert custom._clean_re.search("z+")  # pyright: ignore[reportPrivateUsage]
    assert not custom._clean_re.search("z.q z")  # pyright: ignore[reportPrivateUsage]


class Model:
    def model_dump(self, mode: str = "python") -> dict[str, Any]:
        return {"b": 2, "a": [1.5, None]}


def test_the_encoder_made_once_gives_the_encoders_text() -> None:
    """``encode_payload`` through the C encoder made once gives the text of the standard
    encoder, converting what it does not know; NaN and cycles still take the slow way."""
    import pandas as pd

    cyclic: dict[str, Any] = {"a": 1}
    cyclic["self"] = cyclic
    plain: list[dict[str, Any]] = [
        {},
        {"z": 1, "a": {"y": [1, 2.5, True, None], "b": 'é " \\ \n \u2028'}},
        {"model": Model(), "when": dt.datetime(2026, 1, 2, tzinfo=dt.UTC), "set": {3, 1}},
        {"frame": pd.DataFrame({"x": [1, 2]}), "bytes": b"abc"},
    ]
    redactor = Redactor(patterns=())
    for payload in plain:
        assert encode_payload(payload, redactor, 1 << 20) == _ENCODER_CONVERTING.encode(payload)
    assert json.loads(encode_payload({"x": float("nan")}, redactor, 1 << 20)) == {"x": "nan"}
    found = json.loads(encode_payload(cyclic, redactor, 1 << 20))
    assert found == {"a": 1, "self": {"_type": "dict", "_note": "cycle"}}
    assert encode_payload({"password": "hunter2"}, Redactor(), 1 << 20) == dumps(
        {"password": "***"}
    )


class Colour(enum.Enum):
    RED = "red"


class Level(enum.IntEnum):
    HIGH = 3


class Tag(str):
    def __str__(self) -> str:  # the encoders write the text itself, not this
        return "not the text"


class Count(int):
    def __repr__(self) -> str:
        return "not the number"


@dataclasses.dataclass
class Point:
    x: int
    label: str


def _random_text(rng: random.Random) -> str:
    alphabet = ['"', "\\", "\n", "\x00", "\x1f", "\x7f", "\u2028", "é", "\U0001f600", "a", "Z", " "]
    return "".join(rng.choice(alphabet) for _ in range(rng.randint(0, 8)))


def _random_value(rng: random.Random, depth: int = 0) -> Any:
    import numpy as np

    leaves: list[Any] = [
        lambda: _random_text(rng),
        lambda: rng.randint(-(2**70), 2**70),  # beyond 64 bits now and then: the slow way
        lambda: rng.randint(-5, 5),
        lambda: rng.choice([True, False]),
        lambda: dt.datetime(2026, 1, 2, 3, 4, 5, rng.randint(0, 999_999), tzinfo=dt.UTC),
        lambda: dt.date(2026, 12, 3),
        lambda: uuid.UUID(int=rng.getrandbits(128)),
        lambda: decimal.Decimal("1.10"),
        lambda: Colour.RED,
        lambda: Level.HIGH,
        lambda: Tag("tagged"),
        lambda: Count(rng.randint(0, 9)),
        lambda: Point(rng.randint(0, 9), _random_text(rng)),
        lambda: np.int64(rng.randint(-9, 9)),
        lambda: {rng.randint(0, 9), rng.randint(0, 9)},
        lambda: b"bytes",
        lambda: PurePosixPath("/tmp/x"),
    ]
    if depth < 3 and rng.random() < 0.4:
        if rng.random() < 0.5:
            keys: list[Any] = [_random_text(rng) for _ in range(rng.randint(0, 4))]
            if rng.random() < 0.2:  # keys that are not text, all of one type (orjson refuses)
                keys = rng.choice([[rng.randint(-20, 20) for _ in keys], [None], [True, False]])
            made = {k: _random_value(rng, depth + 1) for k in keys}
            return collections.OrderedDict(made) if rng.random() < 0.2 else made
        items = [_random_value(rng, depth + 1) for _ in range(rng.randint(0, 4))]
        return tuple(items) if rng.random() < 0.3 else items
    return rng.choice(leaves)()


def test_orjson_writes_the_canonical_encoders_text() -> None:
    """A payload without null takes orjson: the text is the standard encoder's, character
    for character, converting what it does not know alike (dates, dataclasses, enums,
    subclasses, sets, NumPy values, bytes); what orjson refuses (keys that are not text,
    integers past 64 bits) is the C encoder's text as before; with a float, it parses to the
    same value; NaN and infinities are still written as text, not null."""
    redactor = Redactor(patterns=())
    rng = random.Random(7)
    for _ in range(3000):
        payload = {_random_text(rng): _random_value(rng) for _ in range(rng.randint(0, 4))}
        assert encode_payload(payload, redactor, 1 << 24) == _ENCODER_CONVERTING.encode(payload)
    for value in (2.5, 1e-05, 2.5e-07, 1e16, -0.0, 5e-324, 1.5e300):
        assert json.loads(encode_payload({"x": value}, redactor, 1 << 20)) == {"x": value}
    for value, text in ((math.nan, "nan"), (math.inf, "inf"), (-math.inf, "-inf")):
        assert json.loads(encode_payload({"x": [value]}, redactor, 1 << 20)) == {"x": [text]}


def test_link_gives_record_hash_for_any_text() -> None:
    """The batch hasher's orjson text is the canonical encoder's for every string: random
    text of every kind of character hashes as ``record_hash`` hashes it, and a lone
    surrogate fails alike (the writer then isolates the record)."""
    rng = random.Random(5)
    base = dt.datetime(2026, 12, 3, 17, 0, tzinfo=dt.UTC)
    items = [
        Item(
            base,
            _random_text(rng) or "k",
            _random_text(rng),
            rng.choice([None, "t"]),
            rng.choice([None, _random_text(rng)]),
            _random_text(rng),
        )
        for _ in range(500)
    ]
    hasher = record_hasher('s "é"', _random_text(rng))
    stamps, hashes = hasher.link(0, GENESIS, items)
    for i, item in enumerate(items):
        assert hashes[i] == record_hash(
            session_id='s "é"',
            seq=i + 1,
            ts=stamps[i],
            kind=item.kind,
            tool_call_id=item.tool_call_id,
            tool_name=item.tool_name,
            user=hasher.user,
            policy_version=item.policy_version,
            payload=item.payload,
            prev_hash=GENESIS if i == 0 else hashes[i - 1],
        )
    lone = Item(base, "k", None, None, None, "a\ud800b")
    with pytest.raises(UnicodeEncodeError):
        hasher.link(0, GENESIS, [lone])
    with pytest.raises(UnicodeEncodeError):
        record_hash(
            session_id="s",
            seq=1,
            ts=stamps[0],
            kind="k",
            tool_call_id=None,
            tool_name=None,
            user=None,
            policy_version=None,
            payload=lone.payload,
            prev_hash=GENESIS,
        )


def test_records_from_threads_across_seconds_verify_in_order(tmp_path: Path) -> None:
    """Records written from several threads at once, over more than a second, form one
    intact chain: each thread's records in its own order, every stored timestamp the one
    hashed (the verifier recomputes every hash from the stored row)."""
    url = f"sqlite:///{tmp_path / 'audit.sqlite'}"
    log = AuditLog(url, session_id="threads", linger_s=0.01)
    stop = dt.datetime.now(dt.UTC) + dt.timedelta(seconds=1.2)

    def write(name: str) -> None:
        i = 0
        while dt.datetime.now(dt.UTC) < stop or i < 50:
            log.record("tool_call", {"i": i, "who": name}, tool_call_id=f"{name}-{i}")
            i += 1
            time.sleep(0.0005)  # a few thousand records, not a flood
            if i % 100 == 0:
                log.record("final_args", {"i": i}, tool_call_id=f"{name}-d{i}", durable=True)

    threads = [threading.Thread(target=write, args=(f"t{n}",)) for n in range(3)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    report = log.verify()
    assert report.ok, report.problems
    with log.engine.connect() as conn:
        rows = conn.execute(
            sa.select(records.c.seq, records.c.ts, records.c.payload)
            .where(records.c.session_id == "threads")
            .order_by(records.c.seq)
        ).all()
    log.close()
    assert [r.seq for r in rows] == list(range(1, len(rows) + 1))
    assert len({r.ts.replace(microsecond=0) for r in rows}) >= 2  # more than one second
    last: dict[str, int] = {}
    for row in rows:
        body = json.loads(row.payload)
        if "who" in body:
            assert body["i"] == last.get(body["who"], -1) + 1
            last[body["who"]] = body["i"]
    assert len(last) == 3


@pytest.mark.parametrize("micro", [0, 999_999])
def test_a_stored_sqlite_timestamp_is_the_hashed_one(tmp_path: Path, micro: int) -> None:
    """The SQLite text of a timestamp, cut from the hashed stamp, reads back as that time."""
    log = AuditLog(f"sqlite:///{tmp_path / 'audit.sqlite'}", session_id="ts")
    ts = dt.datetime(2026, 5, 6, 7, 8, 9, micro, tzinfo=dt.UTC)
    log._writer.submit(ts, "k", None, None, None, "{}", durable=True)  # pyright: ignore[reportPrivateUsage]
    log.flush()
    assert log.verify().ok
    with log.engine.connect() as conn:
        stored = conn.execute(sa.select(records.c.ts)).scalar_one()
    log.close()
    assert stored.replace(tzinfo=dt.UTC) == ts
