"""The small numeric result's DataFrame is exactly the one ``from_records`` gives."""

from __future__ import annotations

import random
from typing import Any

import pandas as pd
import pytest

from pi_notebook.readers import pandas_internals
from pi_notebook.sql.backend.frames import FrameBuilder, _numeric_frame, column_labels

_VALUES: list[Any] = [
    0,
    1,
    -1,
    2**53,
    2**53 + 1,
    -(2**53) - 1,
    2**63 - 1,
    -(2**63),
    2**63,
    2**64,
    1.5,
    float("nan"),
    float("inf"),
    -0.0,
    None,
    True,
    False,
    "a",
    b"x",
]


def _reference(rows: list[tuple[Any, ...]], labels: pd.Index) -> pd.DataFrame:
    frame = pd.DataFrame.from_records(rows, coerce_float=True)
    frame.columns = labels
    return frame


def _same(got: pd.DataFrame, ref: pd.DataFrame) -> None:
    pd.testing.assert_frame_equal(got, ref, check_exact=True)
    assert list(got.dtypes) == list(ref.dtypes)
    assert got.columns.dtype == object and type(got.index) is type(ref.index)


@pytest.mark.parametrize("blocks", [True, False], ids=["block-manager", "public-constructor"])
def test_numeric_fast_path_matches_from_records_on_random_results(
    blocks: bool, monkeypatch: pytest.MonkeyPatch
) -> None:
    if blocks:
        assert pandas_internals.using_internals().manager is not None  # the pinned pandas passes
    else:
        monkeypatch.setattr(pandas_internals, "_INTERNALS", pandas_internals.Internals())
    rng = random.Random(16)
    taken = 0
    for _ in range(6_000):
        width = rng.randint(1, 3)
        pools = [rng.sample(_VALUES, rng.randint(1, 3)) for _ in range(width)]
        rows = [tuple(rng.choice(pool) for pool in pools) for _ in range(rng.randint(1, 4))]
        labels = column_labels(tuple(f"c{i}" for i in range(width)))
        got = _numeric_frame(rows, labels)
        if got is not None:
            taken += 1
            _same(got, _reference(rows, labels))
    assert taken > 500  # the fast path is really exercised


@pytest.mark.parametrize(
    ("rows", "fast"),
    [
        ([(1,)], True),
        ([(1, 2), (3, 4)], True),
        ([(1.5, None), (2, 3.0)], True),
        ([(True,), (False,)], True),
        ([(1, None)], False),  # a column of NULLs only stays object
        ([(True,), (None,)], False),  # booleans with NULLs stay object
        ([(1, 2.5)], False),  # int64 and float64 columns: from_records itself
        ([(2**63,)], False),
        ([(2**53 + 1, 0.5)], False),
        ([("a",)], False),
    ],
)
def test_which_results_take_the_fast_path(rows: list[tuple[Any, ...]], fast: bool) -> None:
    labels = column_labels(tuple(f"c{i}" for i in range(len(rows[0]))))
    got = _numeric_frame(rows, labels)
    assert (got is not None) == fast
    builder = FrameBuilder(list(labels))
    builder.add(rows)
    _same(builder.build(), _reference(rows, labels))


def test_duplicate_column_names_keep_their_order() -> None:
    builder = FrameBuilder(["x", "x", "y"])
    builder.add([(1, 2, 3)])
    frame = builder.build()
    assert list(frame.columns) == ["x", "x", "y"] and frame.iloc[0].tolist() == [1, 2, 3]


def _built(columns: list[str], rows: list[tuple[Any, ...]]) -> pd.DataFrame:
    builder = FrameBuilder(columns)
    builder.add(rows)
    return builder.build()


@pytest.mark.parametrize("rows", [[(1, 2)], [("a", 2)]], ids=["numeric", "from-records"])
def test_results_share_no_index_a_user_can_rename(rows: list[tuple[Any, ...]]) -> None:
    """The labels and row numbers are built once and reused, each frame with its own view:
    naming one result's columns or index, or changing its cells, leaves the next alone."""
    first, second = _built(["x", "y"], rows), _built(["x", "y"], rows)
    first.columns.name, first.index.name = "renamed", "row"
    first.iloc[0, 1] = 99
    assert second.columns.name is None and second.index.name is None
    assert second.iloc[0, 1] == 2 and list(second.columns) == ["x", "y"]
    third = _built(["x", "y"], rows)
    assert third.columns.name is None and third.index.name is None
