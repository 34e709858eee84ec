"""Payload handling (S29): redaction, truncation, and non-JSON values converted, never dropped."""

from __future__ import annotations

import dataclasses
import datetime as dt
import decimal
import enum
import hashlib
import json
import math
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import pytest
from pydantic import BaseModel

from pi_notebook.audit import AuditLog, RedactionPattern, Redactor, to_jsonable


@pytest.fixture
def log(tmp_path: Path) -> Iterator[AuditLog]:
    audit = AuditLog(f"sqlite:///{tmp_path / 'audit.sqlite'}")
    yield audit
    audit.close()


def stored(log: AuditLog) -> list[dict[str, Any]]:
    return list(log.to_dataframe()["payload"])


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("postgresql://u:secret@h/db", "postgresql://u:***@h/db"),
        (
            "postgresql+psycopg://alice:p@ss:w0rd@db.example.com:5432/x",
            "postgresql+psycopg://alice:***@db.example.com:5432/x",
        ),
        ("mysql://root:@localhost/x", "mysql://root:@localhost/x"),  # no password, nothing to hide
        ("key sk-abcdefghijklmnopqrstuvwx end", "key *** end"),
        ("sk-proj-AbCdEfGhIjKlMnOpQrStUv", "***"),
        ("ANTHROPIC=sk-ant-api03-AbCdEfGhIjKl", "ANTHROPIC=***"),
        ("aws AKIAIOSFODNN7EXAMPLE here", "aws *** here"),
        ("Authorization: Bearer eyJhbGciOiJIUzI1NiJ9.payload.sig", "Authorization: Bearer ***"),
        ("password=hunter2&user=bob", "password=***&user=bob"),
        ("ALTER USER bob PASSWORD 'hunter2'", "ALTER USER bob PASSWORD ***"),
        ('{"api_key": "abc123"}', '{"api_key": ***}'),
        ("ghp_abcdefghijklmnopqrstuvwxyz0123456789", "***"),
        (
            "SELECT name, total FROM orders WHERE id = 3",
            "SELECT name, total FROM orders WHERE id = 3",
        ),
    ],
)
def test_s29_default_patterns(text: str, expected: str) -> None:
    assert Redactor().redact_text(text) == expected


def test_s29_secret_keys_are_masked_whole_and_other_keys_kept() -> None:
    value = {
        "password": "x",
        "db_password": "y",
        "api_key": 5,
        "max_tokens": 512,
        "token": None,
        "nested": [{"client_secret": "z", "ok": "fine"}],
    }
    assert Redactor().redact(value) == {
        "password": "***",
        "db_password": "***",
        "api_key": "***",
        "max_tokens": 512,
        "token": None,
        "nested": [{"client_secret": "***", "ok": "fine"}],
    }


def test_s29_patterns_are_configurable() -> None:
    custom = Redactor().extend(
        RedactionPattern(name="employee", regex=r"EMP-\d{6}", triggers=("emp-",))
    )
    assert (
        custom.redact_text("id EMP-123456, postgresql://u:pw@h") == "id ***, postgresql://u:***@h"
    )
    bare = Redactor(patterns=(), secret_keys=None)
    assert bare.redact({"password": "pw"}) == {"password": "pw"}
    anchored = Redactor(patterns=(RedactionPattern(name="whole", regex=r"^secret-\w+$"),))
    assert anchored.redact({"a": "secret-abc"}) == {"a": "***"}


def test_s29_the_store_never_holds_a_credential(log: AuditLog) -> None:
    secrets = [
        "hunter2",
        "sk-ant-api03-AbCdEfGhIjKl",
        "AKIAIOSFODNN7EXAMPLE",
        "eyJhbGciOiJIUzI1NiJ9",
    ]
    log.record(
        "x",
        {
            "url": "postgresql://bob:hunter2@h/db",
            "env": {"KEY": secrets[1]},
            "note": f"keys {secrets[2]}",
            "headers": [f"Authorization: Bearer {secrets[3]}"],
            "escaped": 'quote " then password=hunter2',
        },
    )
    log.record("approval", {"sql": "select 1"}, durable=True)
    with log.engine.connect() as conn:
        dump = "\n".join(
            str(tuple(r)) for r in conn.exec_driver_sql("SELECT * FROM pi_audit_records")
        )
    for secret in secrets:
        assert secret not in dump
    assert log.verify().ok  # redaction happens before hashing


def test_s29_large_payloads_are_truncated_with_a_note(tmp_path: Path) -> None:
    with AuditLog(f"sqlite:///{tmp_path / 'a.sqlite'}", max_payload_bytes=1000) as log:
        log.record("tool_execution_end", {"is_error": False, "text": "x" * 5000})
        log.record("big", {"rows": [{"n": i, "name": f"row {i}"} for i in range(500)]})
        log.record("small", {"text": "y" * 100})
        one, two, three = stored(log)
        with log.engine.connect() as conn:
            sizes = [
                len(r[0].encode())
                for r in conn.exec_driver_sql("SELECT payload FROM pi_audit_records ORDER BY seq")
            ]
    assert all(size <= 1000 for size in sizes)
    assert one["_truncated"] is True and one["original_bytes"] > 5000
    assert one["is_error"] is False and one["text"].startswith("xxx")
    assert two["_truncated"] is True and two["original_bytes"] > 1000 and "preview" in two
    assert three == {"text": "y" * 100}


class Color(enum.Enum):
    RED = "red"


class Model(BaseModel):
    sql: str
    when: dt.datetime


@dataclasses.dataclass
class Point:
    x: int
    y: Any


class Unknown:
    def __repr__(self) -> str:
        return "<Unknown thing>"


def test_s29_non_json_payloads_are_converted_never_dropped(log: AuditLog) -> None:
    when = dt.datetime(2025, 1, 2, 3, 4, 5, tzinfo=dt.UTC)
    cyclic: list[Any] = []
    cyclic.append(cyclic)
    payload = {
        "frame": pd.DataFrame({"a": [1, 2], "b": ["x", "y"]}),
        "series": pd.Series([1.5], name="s"),
        "bytes": b"\x00\x01",
        "when": when,
        "date": dt.date(2025, 1, 2),
        "delta": dt.timedelta(seconds=3),
        "error": ValueError("bad value"),
        "model": Model(sql="select 1", when=when),
        "point": Point(1, {2, 1}),
        "decimal": decimal.Decimal("1.10"),
        "uuid": uuid.UUID(int=1),
        "path": Path("/tmp/x"),
        "enum": Color.RED,
        "nan": math.nan,
        "np": np.int64(7),
        "array": np.zeros((2, 3)),
        "set": {"b", "a"},
        "tuple": (1, 2),
        "object": Unknown(),
        "cycle": cyclic,
        3: "int key",
    }
    log.record("odd", payload)
    log.record("not a mapping", ["a", "list"])  # type: ignore[arg-type]
    log.record("none")
    first, second, third = stored(log)
    assert first == {
        "frame": {
            "_type": "DataFrame",
            "shape": [2, 2],
            "columns": ["a", "b"],
            "dtypes": ["int64", str(pd.DataFrame({"b": ["x"]})["b"].dtype)],
        },
        "series": {"_type": "Series", "length": 1, "name": "s", "dtype": "float64"},
        "bytes": {"_type": "bytes", "length": 2, "sha256": hashlib.sha256(b"\x00\x01").hexdigest()},
        "when": "2025-01-02T03:04:05+00:00",
        "date": "2025-01-02",
        "delta": {"_type": "timedelta", "seconds": 3.0},
        "error": {"_type": "exception", "type": "ValueError", "message": "bad value"},
        "model": {"sql": "select 1", "when": "2025-01-02T03:04:05Z"},
        "point": {"x": 1, "y": [1, 2]},
        "decimal": "1.10",
        "uuid": "00000000-0000-0000-0000-000000000001",
        "path": "/tmp/x",
        "enum": "red",
        "nan": "nan",
        "np": 7,
        "array": {"_type": "ndarray", "shape": [2, 3], "dtype": "float64"},
        "set": ["a", "b"],
        "tuple": [1, 2],
        "object": {"_type": f"{__name__}.Unknown", "repr": "<Unknown thing>"},
        "cycle": [{"_type": "list", "_note": "cycle"}],
        "3": "int key",
    }
    assert second == {"value": ["a", "list"]}
    assert third == {}
    assert log.verify().ok


def test_s29_to_jsonable_never_raises() -> None:
    class Hostile:
        def __getattribute__(self, name: str) -> Any:
            raise RuntimeError(name)

    out = to_jsonable({"h": Hostile(), "deep": _nested(100)})
    json.dumps(out)  # plain JSON, whatever came in


def _nested(depth: int) -> Any:
    value: Any = "leaf"
    for _ in range(depth):
        value = {"d": value}
    return value


def test_s29_the_payload_is_a_snapshot_taken_at_record_time(log: AuditLog) -> None:
    args = {"sql": "SELECT 1"}
    log.record("tool_call", {"input": args})
    args["sql"] = "DROP TABLE x"
    assert stored(log) == [{"input": {"sql": "SELECT 1"}}]


def test_s29_a_dataframe_is_summarised_with_its_dtypes() -> None:
    import pandas as pd

    from pi_notebook.audit import to_jsonable

    frame = pd.DataFrame(
        {
            "a": [1, 2],
            "b": ["x", "y"],
            "c": [1.5, None],
            "d": pd.to_datetime(["2024-01-01", "2024-01-02"], utc=True),
        }
    )
    assert to_jsonable(frame) == {
        "_type": "DataFrame",
        "shape": [2, 4],
        "columns": ["a", "b", "c", "d"],
        "dtypes": [str(t) for t in frame.dtypes],
    }


def test_s29_every_default_secret_key_holds_a_shortcut_literal() -> None:
    """The clean-text shortcut of ``redact_json`` is sound for keys: whatever key
    ``DEFAULT_SECRET_KEYS`` matches holds one of ``DEFAULT_SECRET_KEY_LITERALS`` in lower case
    (every alternative of the regex, every separator, any prefix, any ASCII case; and random
    keys built from the regex's own pieces)."""
    import random
    import re

    from pi_notebook.audit.redact import DEFAULT_SECRET_KEY_LITERALS, DEFAULT_SECRET_KEYS

    body = DEFAULT_SECRET_KEYS.split("(?:", 2)[2].rsplit(")$", 1)[0]
    names: list[str] = []
    for alternative in body.split("|"):
        optional = r"[_\-]?"
        for sep in ("", "_", "-") if optional in alternative else ("",):
            names.append(alternative.replace(optional, sep).replace("s?", "s"))
            names.append(alternative.replace(optional, sep).replace("s?", ""))
    assert "client-secret" in names and "credential" in names and "set_cookie" in names
    key_re = re.compile(DEFAULT_SECRET_KEYS)
    rng = random.Random(7)
    for name in names:
        for prefix in ("", "x_", "db-", "my_app_"):
            key = "".join(c.upper() if rng.random() < 0.5 else c for c in prefix + name)
            assert key_re.match(key), key
            assert any(lit in key.lower() for lit in DEFAULT_SECRET_KEY_LITERALS), key
    pieces = [*names, "_", "-", "a", "k", "ey", "x", "S", "T"]
    for _ in range(20000):
        key = "".join(rng.choice(pieces) for _ in range(rng.randint(1, 4)))
        if key_re.match(key):
            assert any(lit in key.lower() for lit in DEFAULT_SECRET_KEY_LITERALS), key


def test_s29_the_clean_text_shortcut_changes_no_outcome() -> None:
    """``redact_json`` with its clean-text shortcut and without it gives the same text for
    clean payloads and for every kind of secret (patterns, keys in any case, escapes)."""
    import json

    from pi_notebook.audit.redact import dumps

    fast = Redactor()
    slow = Redactor()
    slow._clean_literals = None  # pyright: ignore[reportPrivateUsage]
    assert fast._clean_literals  # pyright: ignore[reportPrivateUsage]
    payloads: list[dict[str, Any]] = [
        {"input": {"sql": f"SELECT id FROM orders WHERE id = {i}", "limit": 100}, "attempt": 1}
        for i in range(3)
    ] + [
        {"Password": "hunter2"},
        {"DB_PASSWD": 5},
        {"x": {"Api-Key": "k"}},
        {"AUTHORIZATION": "b"},
        {"set-cookie": "c"},
        {"Credentials": "c"},
        {"PRIVATE_KEY": "k"},
        {"my_token": "t"},
        {"note": "use Bearer abcdefghijkl"},
        {"url": "postgresql://u:pw@h/db"},
        {"k": "sk-ant-abcdefghijk"},
        {"k": "AKIAABCDEFGHIJKLMNOP"},
        {"k": "ghp_" + "a" * 24},
        {"k": "password=x"},
        {"pass\\word": "x"},
        {"k": "line\\nBearer abcdefghijkl"},
        {"é": "token abcdefghijkl"},
        {"sql": "SELECT 'it''s' -- high"},
        {"author": "ada", "apiary": 1},
    ]
    for payload in payloads:
        text = dumps(payload)
        got, want = fast.redact_json(text), slow.redact_json(text)
        assert got[0] == want[0], payload
        assert json.loads(got[0]) == (want[1] if want[1] is not None else json.loads(text))
    assert fast.redact_json(dumps(payloads[0]))[0] == dumps(payloads[0])
    assert "hunter2" not in fast.redact_json(dumps({"Password": "hunter2"}))[0]


@pytest.mark.parametrize(
    "text",
    ["paſſword=hunter2&user=bob", "PAſSWORD=hunter2", "pıssword=x password=hunter2"],
)
def test_the_trigger_shortcut_folds_case_as_the_patterns_do(text: str) -> None:
    """The patterns are ``(?i)``: they match ``ſ`` as ``s`` (and ``K``, ``ı``, ``İ`` alike); the
    substring shortcut that skips them must fold the same way, or such text skips redaction."""
    import json

    redactor = Redactor()
    assert "hunter2" not in redactor.redact_text(text)
    payload = json.dumps({"note": text}, ensure_ascii=False)
    assert "hunter2" not in redactor.redact_json(payload, None)[0]


def test_s29_text_with_escapes_takes_the_shortcut_only_when_it_is_sound() -> None:
    """The clean-text shortcut on JSON text with escapes (``\\n``, ``\\"``, ``\\u0001``...)
    and on non-ASCII text gives what the long way gives, for random payloads whose secrets
    sit next to, or are broken by, characters the encoder escapes, or are spelt with the
    characters a (?i) pattern takes for ASCII letters (``ſ``, ``K``, ``İ``, ``ı``); an escape
    of another kind (``\\u0070`` for ``p``) and a pattern whose trigger holds an escaped
    character take the long way."""
    import json
    import random

    from pi_notebook.audit.redact import RedactionPattern, dumps

    fast = Redactor()
    slow = Redactor()
    slow._clean_literals = None  # pyright: ignore[reportPrivateUsage]
    assert fast._escapes_ok  # pyright: ignore[reportPrivateUsage]
    pieces = [
        "\n",
        "\t",
        '"',
        "\\",
        "\x01",
        "\x1f",
        "é",
        " ",
        "=",
        ":",
        "x",
        "pass",
        "word",
        "password=hunter2",
        "Bearer abcdefghijkl",
        "sk-ant-abcdefghijk",
        "api_key",
        "tok",
        "en",
        "postgresql://u:pw@h/db",
        "AKIAABCDEFGHIJKLMNOP",
        "1 row\n\n| 1 |",
        "…",
        "ß",
        "paſſword=hunter2",
        "cooKie",
        "İ",
        "ı",
        "Bearer abcdefghİjkl",
        "ſecret",
        "TOKEN",
    ]
    rng = random.Random(16)
    for _ in range(3000):
        words = ["".join(rng.choice(pieces) for _ in range(rng.randint(0, 5))) for _ in range(4)]
        payload = {words[0]: words[1], "text": words[2], "n": {words[3]: 1}}
        text = dumps(payload)
        got, want = fast.redact_json(text), slow.redact_json(text)
        assert got[0] == want[0], payload
    clean = dumps({"text": '1 row\n\n| "a" |\t\\ \x01 Querying…', "row_count": 1})
    assert fast.redact_json(clean) == (clean, None)
    assert "hunter2" not in fast.redact_json(dumps({"paſſword": "hunter2"}))[0]
    # ``p`` escaped: not an escape the encoder writes; the long way finds the key.
    sneaky = '{"\\u0070assword":"hunter2","x":"\\u0070assword=hunter2"}'
    assert "hunter2" not in fast.redact_json(sneaky)[0]
    assert json.loads(fast.redact_json(sneaky)[0]) == {"password": "***", "x": "password=***"}
    # A trigger with a newline in it: escaped text never takes the shortcut.
    custom = Redactor((RedactionPattern(name="nl", regex="a\nb", triggers=("a\nb",)),))
    assert not custom._escapes_ok  # pyright: ignore[reportPrivateUsage]
    assert json.loads(custom.redact_json(dumps({"x": "1 a\nb 2"}))[0]) == {"x": "1 *** 2"}


def test_s29_a_dataframe_summary_reads_labels_and_dtypes_as_the_plain_way() -> None:
    """The summary's shortcuts (text labels read from their Arrow array, the text of NumPy's
    built-in dtypes remembered) give what ``list(frame.columns)`` and ``str(dtype)`` give:
    text, object, number, missing and tuple labels, more labels than are kept, every kind of
    dtype, the same dtype again after others."""
    import numpy as np
    import pandas as pd

    from pi_notebook.audit.encode import _key  # pyright: ignore[reportPrivateUsage]

    wide = pd.DataFrame(np.zeros((1, 1200)), columns=[f"c{i}" for i in range(1200)])
    frames = [
        pd.DataFrame({"a": [1], "b": ["x"], "c": [1.5], "d": [True]}),
        pd.DataFrame(np.array([[1, 2]]), columns=pd.Index(["x", "y"], dtype=object)),
        pd.DataFrame(np.array([[1, 2]]), columns=[3, 4]),
        pd.DataFrame(np.array([[1, 2]]), columns=pd.Index(["x", None], dtype="str")),
        pd.DataFrame(np.array([[1, 2]]), columns=pd.MultiIndex.from_tuples([("a", 1), ("a", 2)])),
        pd.DataFrame(
            {
                "t": pd.to_datetime(["2024-01-01"], utc=True),
                "n": pd.array([1], "Int64"),
                "k": pd.Categorical(["a"]),
                "s": pd.array(["x"], dtype="string"),
                "i8": np.array([1], dtype=np.int8),
                "u": np.array([1], dtype=">u4"),
                "o": np.array([(1, 2.0)], dtype=[("a", "i4"), ("b", "f8")]).astype(object),
            }
        ),
        pd.DataFrame(),
        wide,
    ]
    for _ in range(2):  # the second time from what was remembered
        for frame in frames:
            summary = to_jsonable(frame)
            assert summary["columns"] == [_key(c) for c in list(frame.columns)[:1000]]
            assert summary["dtypes"] == [str(t) for t in list(frame.dtypes)[:1000]]
            assert summary["shape"] == list(frame.shape)


def test_s29_a_model_type_seen_before_converts_as_the_first_time() -> None:
    """A pydantic model type that once reached ``model_dump`` goes straight there the next
    time, with the same outcome: plain and nested models, a model that is also a mapping
    (the container way, never remembered), one whose JSON dump fails (the python dump), and
    one nested deeper than the limit (summarised)."""
    from collections.abc import Mapping

    from pi_notebook.audit.encode import _MODEL_TYPES  # pyright: ignore[reportPrivateUsage]

    class Inner(BaseModel):
        n: int = 1

    class Outer(BaseModel):
        sql: str = "SELECT 1"
        inner: Inner = Inner()
        tags: list[str] = ["a"]

    class MappingModel(BaseModel, Mapping[str, int]):  # pyright: ignore[reportIncompatibleMethodOverride, reportIncompatibleVariableOverride]
        a: int = 1

        def __getitem__(self, key: str) -> int:
            return {"a": self.a}[key]

        def __iter__(self) -> Iterator[str]:  # pyright: ignore[reportIncompatibleMethodOverride]
            return iter(["a"])

        def __len__(self) -> int:
            return 1

    class Odd(BaseModel):
        value: object = None

        def model_dump(self, **kwargs: Any) -> dict[str, Any]:  # pyright: ignore[reportIncompatibleMethodOverride]
            if kwargs.get("mode") == "json":
                raise ValueError("no JSON form")
            return {"python": True}

    deep: Any = Outer()
    for _ in range(25):  # the model at depth 25, one past the limit
        deep = [deep]
    values = [Outer(), Inner(n=5), MappingModel(), Odd(), deep, [Outer(), {"m": Inner()}]]
    first = [to_jsonable(v) for v in values]
    assert first[0] == {"sql": "SELECT 1", "inner": {"n": 1}, "tags": ["a"]}
    assert first[2] == {"a": 1} and first[3] == {"python": True}
    innermost = first[4]
    while isinstance(innermost, list):
        innermost = innermost[0]  # pyright: ignore[reportUnknownVariableType]
    assert innermost["_note"] == "nested too deeply" and innermost["_type"].endswith("Outer")
    assert Outer in _MODEL_TYPES and MappingModel not in _MODEL_TYPES
    assert [to_jsonable(v) for v in values] == first
