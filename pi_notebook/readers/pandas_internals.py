"""Every use of pandas' private API in the package, each behind a self-check.

Two hot paths go around pandas' public API, because there it costs more than the work itself:

* :func:`frame_2d` builds a small all-numeric result's DataFrame from one 2-D block straight
  into pandas' block manager (the public constructor's checks and inference run some 30
  Python functions: about 20 µs of a small query's call inside a session);
* :func:`column_dtypes` reads a DataFrame's per-column dtypes from its block manager (a
  fifth of what ``frame.dtypes`` costs; the audit summarises every result a call returns);
* :func:`column_arrays` takes a DataFrame's column arrays without a Series each (``items()``
  costs about 20 µs a column), and :func:`frame_of_arrays` builds one from such arrays
  without the constructor's inference: a result crossing from an engine's worker process;
* :func:`first_labels` reads text column labels (pandas' Arrow-backed ``str`` dtype, the
  default from pandas 3) from their Arrow array at once (iterating the index costs several
  times the rest of a small frame's summary).

Each is checked once, when this module is imported, against the public API on a sample
(:func:`self_check`); a pandas whose internals moved or build anything else fails the check
and the public API serves, with the same results. Nothing else in the package names pandas'
internals.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import lru_cache
from typing import Any

import numpy as np
import pandas as pd

__all__ = [
    "Internals",
    "column_arrays",
    "column_dtypes",
    "first_labels",
    "frame_2d",
    "frame_of_arrays",
    "self_check",
    "using_internals",
]

_INDEX_CACHE = 257  # row counts whose index is kept (small results: at most 256 rows)


@dataclass(frozen=True)
class Internals:
    """The private pieces that passed :func:`self_check` (``None`` where one failed)."""

    new_block: Any = None
    manager: Any = None
    dtypes: bool = False
    labels: bool = False
    arrays: bool = False


def frame_2d(values: np.ndarray[Any, Any], labels: pd.Index) -> pd.DataFrame:
    """``pd.DataFrame(values, columns=labels, copy=False)``: one 2-D block, rows numbered
    ``0..n-1``, through the block manager when it passed the check."""
    internals = _INTERNALS
    if internals.manager is None:
        return pd.DataFrame(values, columns=labels, copy=False)
    return _from_blocks(values, labels, internals)


def column_dtypes(frame: pd.DataFrame) -> list[Any]:
    """``list(frame.dtypes)``, from the block manager when it passed the check."""
    if _INTERNALS.dtypes:
        try:
            found = list(frame._mgr.get_dtypes())  # pyright: ignore[reportAttributeAccessIssue, reportUnknownMemberType, reportUnknownArgumentType]
            if len(found) == frame.shape[1]:  # pyright: ignore[reportUnknownArgumentType]
                return found  # pyright: ignore[reportUnknownVariableType]
        except Exception:  # a frame the check did not foresee: the public way
            pass
    return list(frame.dtypes)


def first_labels(frame: pd.DataFrame, count: int) -> list[Any]:
    """``list(frame.columns[:count])``, text labels without a missing value read from their
    Arrow array when that passed the check."""
    columns = frame.columns
    if _INTERNALS.labels:
        try:
            if isinstance(columns.dtype, pd.StringDtype):
                array = columns._values._pa_array  # pyright: ignore[reportAttributeAccessIssue, reportUnknownMemberType]
                if array.null_count == 0:  # pyright: ignore[reportUnknownMemberType]
                    names = array.slice(0, count).to_pylist()  # pyright: ignore[reportUnknownMemberType]
                    if len(names) == min(len(columns), count):  # pyright: ignore[reportUnknownArgumentType]
                        return names  # pyright: ignore[reportUnknownVariableType]
        except Exception:  # another storage: the plain way
            pass
    return list(columns[:count])


def column_arrays(frame: pd.DataFrame) -> list[Any]:
    """Each column's values: a NumPy array, or pandas' own (ExtensionArray) for a string,
    nullable or zoned column; without a Series each when that passed the check."""
    if _INTERNALS.arrays:
        try:
            return list(frame._iter_column_arrays())  # pyright: ignore[reportPrivateUsage]
        except Exception:  # a frame the check did not foresee: the public way
            pass
    return [_public_array(frame.iloc[:, i]) for i in range(frame.shape[1])]


def frame_of_arrays(arrays: list[Any], labels: pd.Index, rows: int) -> pd.DataFrame:
    """The DataFrame of :func:`column_arrays`' ``arrays`` under ``labels``, rows numbered
    ``0..rows-1``, each column keeping its array's dtype. A small result whose columns are
    NumPy numbers of one dtype (a count, ``SELECT 1``) is one 2-D block, as :func:`frame_2d`
    builds it (a third of the cost)."""
    internals = _INTERNALS
    if internals.manager is not None and arrays and rows < _INDEX_CACHE:
        first = arrays[0]
        if (
            isinstance(first, np.ndarray)
            and first.dtype.kind in "iufb"
            and all(isinstance(a, np.ndarray) and a.dtype == first.dtype for a in arrays)
        ):
            return _from_blocks(np.column_stack(arrays), labels, internals)
    if internals.arrays:
        try:
            return pd.DataFrame._from_arrays(  # pyright: ignore[reportPrivateUsage]
                arrays, columns=labels, index=pd.RangeIndex(rows), verify_integrity=False
            )
        except Exception:  # arrays the check did not foresee: the public way
            pass
    frame = pd.DataFrame(
        {i: pd.Series(array, copy=False) for i, array in enumerate(arrays)},
        index=pd.RangeIndex(rows),
        copy=False,
    )
    frame.columns = labels
    return frame


def _public_array(column: pd.Series) -> Any:
    if isinstance(column.dtype, np.dtype):
        return column.to_numpy(copy=False)
    return column.array


def using_internals() -> Internals:
    """What the check at import let through."""
    return _INTERNALS


def self_check() -> Internals:
    """Which private pieces this pandas has and uses exactly as the public API would: each
    builds, on a sample of every dtype it serves, what the public API gives."""
    return Internals(
        *_check_blocks(), dtypes=_check_dtypes(), labels=_check_labels(), arrays=_check_arrays()
    )


def _from_blocks(
    values: np.ndarray[Any, Any], labels: pd.Index, internals: Internals
) -> pd.DataFrame:
    rows, width = values.shape
    block = internals.new_block(values.T, placement=_placement(width), ndim=2)
    manager = internals.manager((block,), [labels, _row_index(rows)], verify_integrity=False)
    return pd.DataFrame._from_mgr(manager, axes=[])  # pyright: ignore[reportPrivateUsage, reportAttributeAccessIssue, reportUnknownMemberType, reportUnknownVariableType]


def _row_index(rows: int) -> pd.Index:
    """The index ``0..rows-1``: a view of one built once (a new one costs three times as
    much), each frame its own."""
    return _row_indexes(rows).view()


@lru_cache(maxsize=_INDEX_CACHE)
def _row_indexes(rows: int) -> pd.RangeIndex:
    return pd.RangeIndex(rows)


@lru_cache(maxsize=64)
def _placement(width: int) -> Any:
    from pandas._libs.internals import BlockPlacement  # pyright: ignore[reportMissingModuleSource]

    return BlockPlacement(slice(0, width))


_SAMPLE_DTYPES = (np.dtype(np.int64), np.dtype(np.float64), np.dtype(np.bool_))


def _check_blocks() -> tuple[Any, Any]:
    try:
        from pandas.core.internals.blocks import new_block
        from pandas.core.internals.managers import BlockManager

        found = Internals(new_block, BlockManager)
        labels = pd.Index(["a", "b"], dtype=object)
        for dtype in _SAMPLE_DTYPES:
            values = np.array([(1, 0), (0, 1), (1, 1)], dtype=dtype)
            ours = _from_blocks(values, labels, found)
            theirs = pd.DataFrame(values.copy(), columns=labels, copy=False)
            if not (
                ours.equals(theirs)
                and ours.index.equals(theirs.index)
                and list(ours.dtypes) == list(theirs.dtypes)
            ):
                return None, None
        return new_block, BlockManager
    except Exception:  # another pandas: its public constructor serves
        return None, None


def _check_dtypes() -> bool:
    try:
        sample = pd.DataFrame(
            {
                "i": np.arange(2),
                "f": [0.5, None],
                "s": ["a", None],
                "o": [object(), None],
                "t": pd.to_datetime(["2024-01-01", None], utc=True),
                "b": [True, False],
            }
        )
        sample.insert(1, "i2", np.arange(2))  # blocks out of column order
        found = list(sample._mgr.get_dtypes())  # pyright: ignore[reportAttributeAccessIssue, reportUnknownMemberType, reportUnknownArgumentType]
        return found == list(sample.dtypes)  # pyright: ignore[reportUnknownVariableType]
    except Exception:  # another pandas: frame.dtypes serves
        return False


def _check_labels() -> bool:
    try:
        columns = pd.DataFrame({"a": [1], "b ü": [2], "": [3]}).columns
        if not isinstance(columns.dtype, pd.StringDtype):
            return False  # labels this pandas does not make text: nothing to read fast
        array = columns._values._pa_array  # pyright: ignore[reportAttributeAccessIssue, reportUnknownMemberType]
        return array.to_pylist() == list(columns)  # pyright: ignore[reportUnknownMemberType]
    except Exception:  # another pandas: the plain way serves
        return False


def _check_arrays() -> bool:
    try:
        sample = pd.DataFrame(
            {
                "i": np.arange(2),
                "f": [0.5, None],
                "s": pd.array(["a", None], dtype="string"),
                "n": pd.array([1, None], dtype="Int64"),
                "t": pd.to_datetime(["2024-01-01", None], utc=True),
                "d": pd.to_datetime(["2024-01-01", None]),
                "b": [True, False],
            }
        )
        ours = list(sample._iter_column_arrays())  # pyright: ignore[reportPrivateUsage]
        theirs = [_public_array(sample.iloc[:, i]) for i in range(sample.shape[1])]
        if [getattr(a, "dtype", None) for a in ours] != [a.dtype for a in theirs]:
            return False
        rebuilt = pd.DataFrame._from_arrays(  # pyright: ignore[reportPrivateUsage]
            ours, columns=sample.columns, index=pd.RangeIndex(2), verify_integrity=False
        )
        return bool(rebuilt.equals(sample)) and list(rebuilt.dtypes) == list(sample.dtypes)
    except Exception:  # another pandas: the public way serves
        return False


_INTERNALS = self_check()
