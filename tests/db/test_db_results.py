"""Result shaping (D7): a capped DataFrame in details, a bounded preview for the model."""

from __future__ import annotations

import pandas as pd

from pi_notebook.sql.backend import DatabaseBackend, render_preview

SERIES = "WITH RECURSIVE c(x) AS (SELECT 1 UNION ALL SELECT x + 1 FROM c WHERE x < {n}) SELECT x, 'row ' || x AS label FROM c"


async def test_d7_row_cap_stops_one_row_past_the_cap_and_says_more_than() -> None:
    backend = DatabaseBackend("sqlite://", row_cap=1_000, progress_every=5_000)
    try:
        out = await backend.run("r", SERIES.format(n=12_000))
    finally:
        backend.dispose()
    details = out.details()
    assert isinstance(details["dataframe"], pd.DataFrame) and len(details["dataframe"]) == 1_000
    assert details["row_count"] == 1_001 and details["row_count_exact"] is False
    assert details["truncated"] is True and details["statement_kind"] == "read"
    assert details["columns"] == ["x", "label"] and details["dialect"] == "sqlite"
    assert out.preview.startswith("More than 1,000 rows, 2 column(s)")
    assert "count_rows=true" in out.preview


async def test_d7_count_rows_counts_every_row_with_progress() -> None:
    backend = DatabaseBackend("sqlite://", row_cap=1_000, progress_every=5_000)
    seen: list[int] = []
    try:
        out = await backend.run("r", SERIES.format(n=12_000), on_progress=seen.append,
                                count_rows=True)  # fmt: skip
    finally:
        backend.dispose()
    details = out.details()
    assert len(details["dataframe"]) == 1_000 and details["dataframe"]["x"].iloc[-1] == 1_000
    assert details["row_count"] == 12_000 and details["row_count_exact"] is True
    assert details["truncated"] is True and details["duration_ms"] > 0
    assert seen and seen[-1] >= 10_000  # progress reported the rows fetched so far
    assert out.preview.startswith("12,000 rows, 2 column(s); the DataFrame keeps the first 1,000")


async def test_d7_preview_respects_row_and_character_budgets() -> None:
    backend = DatabaseBackend("sqlite://")
    try:
        out = await backend.run("r", "SELECT x, printf('%.500c', 'y') AS wide FROM ("
                                + SERIES.format(n=300) + ")")  # fmt: skip
    finally:
        backend.dispose()
    assert len(out.preview) <= 4_000
    assert out.row_count == 300 and not out.truncated and len(out.dataframe) == 300
    assert "[preview shows" in out.preview and "of 300 rows" in out.preview


def test_d7_preview_of_small_result_is_complete() -> None:
    text = render_preview(["a", "b"], [(1, None), (2, "x|y")], row_count=2, row_count_exact=True,
                          truncated=False, has_rows=True)  # fmt: skip
    assert text.splitlines() == ["2 row(s), 2 column(s).", "a | b", "1 | NULL", "2 | x\\|y"]


def test_d7_preview_of_statement_without_rows() -> None:
    text = render_preview(
        [], [], row_count=3, row_count_exact=True, truncated=False, has_rows=False
    )
    assert text == "Statement executed; 3 row(s) affected."
