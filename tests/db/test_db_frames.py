"""Large results are assembled in Arrow chunks, with the DataFrame a small result would get."""

from __future__ import annotations

import datetime as dt
from decimal import Decimal
from typing import Any

import pandas as pd
import pytest

from pi_notebook.sql.backend.frames import ARROW_AFTER, HAVE_PYARROW, FrameBuilder

pytestmark = pytest.mark.skipif(not HAVE_PYARROW, reason="pyarrow is not installed")

N = ARROW_AFTER * 3 + 17
UTC = dt.UTC


def _row(i: int) -> tuple[Any, ...]:
    return (
        i,
        None if i % 7 == 0 else i * 3,
        i / 4,
        None if i % 5 == 0 else f"name {i}",
        i % 2 == 0,
        dt.datetime(2024, 1, 1) + dt.timedelta(minutes=i),
        dt.datetime(2024, 1, 1, tzinfo=UTC) + dt.timedelta(seconds=i),
        dt.date(2024, 1, 1) + dt.timedelta(days=i % 300),
        Decimal(i) / 100,
        bytes([i % 256]),
        {"a": i} if i % 2 else {"b": str(i)},  # JSON objects with different keys
        i if i < N - 10 else f"text {i}",  # SQLite's dynamic typing: text late in the column
        2**70 + i if i == N // 2 else i,  # one integer too big for 64 bits
        None,
        None if i < ARROW_AFTER * 2 else i,  # all NULL in the first chunks, then integers
        i if i < ARROW_AFTER * 2 else i + 0.5,  # integers, then floats
    )


COLUMNS = [
    "id",
    "maybe",
    "quarter",
    "name",
    "even",
    "ts",
    "tstz",
    "day",
    "money",
    "blob",
    "doc",
    "mixed",
    "big",
    "nothing",
    "late",
    "widening",
]


def _build(rows: list[tuple[Any, ...]], *, arrow: bool, chunk: int = 1_000) -> pd.DataFrame:
    builder = FrameBuilder(COLUMNS, arrow=arrow)
    for start in range(0, len(rows), chunk):
        builder.add(rows[start : start + chunk])
    return builder.build()


def test_arrow_chunks_give_the_frame_from_records_gives() -> None:
    rows = [_row(i) for i in range(N)]
    arrow = _build(rows, arrow=True)
    plain = _build(rows, arrow=False)
    assert list(arrow.columns) == COLUMNS and len(arrow) == N
    pd.testing.assert_frame_equal(arrow, plain)
    assert arrow["doc"].iloc[1] == {"a": 1} and arrow["doc"].iloc[2] == {"b": "2"}
    assert arrow["big"].iloc[N // 2] == 2**70 + N // 2
    assert arrow["mixed"].iloc[-1] == f"text {N - 1}"


def test_small_results_and_duplicate_names() -> None:
    builder = FrameBuilder(["a", "a"])
    builder.add([(1, "x"), (2, "y")])
    frame = builder.build()
    assert list(frame.columns) == ["a", "a"] and frame.iloc[:, 1].tolist() == ["x", "y"]
    assert builder.head == [(1, "x"), (2, "y")]
    empty = FrameBuilder(["n"]).build()
    assert list(empty.columns) == ["n"] and len(empty) == 0


def test_many_small_chunks_are_joined_without_changing_the_frame() -> None:
    """Hundreds of chunks per column (joined every 64), across a change of type mid-way."""
    rows = [_row(i) for i in range(N)]
    pd.testing.assert_frame_equal(_build(rows, arrow=True, chunk=7), _build(rows, arrow=False))
