"""pandas' private API is used only where its self-check passed; a pandas whose internals
moved or build anything else gets the public API, with the same results."""

from __future__ import annotations

import importlib
from typing import Any

import numpy as np
import pandas as pd
import pytest

from pi_notebook.readers import pandas_internals


def _frames() -> list[pd.DataFrame]:
    mixed = pd.DataFrame({"a": [1, 2], "b ü": [0.5, None], "c": ["x", None], "d": [True, False]})
    mixed.insert(1, "e", pd.to_datetime(["2024-01-01", None], utc=True))
    small = np.array([1], dtype=np.uint8)
    counts = pd.DataFrame({"p": small, "q": small * 2})  # one dtype: one 2-D block
    return [
        mixed,
        pd.DataFrame({"x": [1]}),
        pd.DataFrame(np.zeros((2, 3)), columns=[1, 2, 3]),
        counts,
    ]


def _public(frame: pd.DataFrame) -> tuple[list[Any], list[Any]]:
    return list(frame.dtypes), list(frame.columns[:2])


def _ours(frame: pd.DataFrame) -> tuple[list[Any], list[Any]]:
    return pandas_internals.column_dtypes(frame), pandas_internals.first_labels(frame, 2)


def _same_as_public() -> None:
    for frame in _frames():
        assert _ours(frame) == _public(frame)
    labels = pd.Index(["a", "b"], dtype=object)
    for dtype in (np.int64, np.float64, np.bool_):
        values = np.array([(1, 0), (0, 1), (1, 1)], dtype=dtype)
        ours = pandas_internals.frame_2d(values, labels)
        theirs = pd.DataFrame(values.copy(), columns=labels, copy=False)
        pd.testing.assert_frame_equal(ours, theirs, check_exact=True)
        assert type(ours.index) is type(theirs.index)
    for frame in _frames():  # a result's columns crossing a process and rebuilt
        arrays = pandas_internals.column_arrays(frame)
        assert [a.dtype for a in arrays] == list(frame.dtypes)
        rebuilt = pandas_internals.frame_of_arrays(arrays, frame.columns, len(frame))
        pd.testing.assert_frame_equal(rebuilt, frame, check_exact=True)


def _other_pandas(patch: pytest.MonkeyPatch) -> None:
    """Make pandas as another version could have it: a block constructor that lays columns
    out in another order, column arrays in another order, no per-column dtypes method (``frame.dtypes`` finds them its own
    way), column labels that are no text dtype."""
    import pandas.core.internals.blocks as blocks
    import pandas.core.internals.managers as managers

    block = blocks.new_block
    dtypes = managers.BaseBlockManager.get_dtypes

    def other_block(values: Any, placement: Any, ndim: int) -> Any:
        return block(values[::-1], placement=placement, ndim=ndim)

    patch.setattr(blocks, "new_block", other_block)
    patch.delattr(managers.BaseBlockManager, "get_dtypes")
    public = property(lambda f: pd.Series(dtypes(f._mgr), index=f.columns, dtype=object))
    patch.setattr(pd.DataFrame, "dtypes", public)
    patch.setattr(pd, "StringDtype", type("NotText", (), {}))
    columns = pd.DataFrame._iter_column_arrays  # pyright: ignore[reportPrivateUsage]
    patch.setattr(pd.DataFrame, "_iter_column_arrays", lambda f: reversed(list(columns(f))))


def test_this_pandas_passes_the_check_and_its_internals_give_the_public_results() -> None:
    found = pandas_internals.self_check()
    assert found.manager is not None and found.dtypes and found.labels and found.arrays
    assert pandas_internals.using_internals() == found
    _same_as_public()


def test_internals_that_changed_fail_the_check(monkeypatch: pytest.MonkeyPatch) -> None:
    _other_pandas(monkeypatch)
    found = pandas_internals.self_check()
    assert found == pandas_internals.Internals()  # nothing private passes


def test_imported_under_changed_internals_the_public_api_serves(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    try:
        with monkeypatch.context() as patch:
            _other_pandas(patch)
            importlib.reload(pandas_internals)  # the check runs once, at import
        assert pandas_internals.using_internals() == pandas_internals.Internals()
        _same_as_public()  # now with the real internals: the public API gave these
    finally:
        importlib.reload(pandas_internals)
    assert pandas_internals.using_internals().manager is not None
