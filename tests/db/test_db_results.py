"""Result shaping (D7): a capped DataFrame in details, a bounded preview for the model."""

from __future__ import annotations

from decimal import Decimal

import pandas as pd
import pytest

from pi_notebook.sql.backend import DatabaseBackend, render_preview
from pi_notebook.sql.backend.results import format_value

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
        out = await backend.run(
            "r", SERIES.format(n=12_000), on_progress=seen.append, count_rows=True
        )
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
        out = await backend.run(
            "r", "SELECT x, printf('%.500c', 'y') AS wide FROM (" + SERIES.format(n=300) + ")"
        )
    finally:
        backend.dispose()
    assert len(out.preview) <= 4_000
    assert out.row_count == 300 and not out.truncated and len(out.dataframe) == 300
    assert "[preview shows" in out.preview and "of 300 rows" in out.preview


def test_d7_preview_of_small_result_is_complete() -> None:
    text = render_preview(
        ["a", "b"],
        [(1, None), (2, "x|y")],
        row_count=2,
        row_count_exact=True,
        truncated=False,
        has_rows=True,
    )
    assert text.splitlines() == ["2 row(s), 2 column(s).", "a | b", "1 | NULL", "2 | x\\|y"]


def test_d7_preview_of_statement_without_rows() -> None:
    text = render_preview(
        [], [], row_count=3, row_count_exact=True, truncated=False, has_rows=False
    )
    assert text == "Statement executed; 3 row(s) affected."


async def test_d7_preview_of_a_wide_result_keeps_to_its_budget() -> None:
    """300 columns of 500-character values (72 KB a row) still fit 4,000 chars."""
    backend = DatabaseBackend("sqlite://")
    columns = ", ".join(f"printf('%.500c', 'v') AS c{i}" for i in range(300))
    try:
        # Forced read: 150 KB of built text a row is past the classifier's size budget (rightly).
        out = await backend._run_as("read", f"SELECT {columns} FROM ({SERIES.format(n=30)})")  # pyright: ignore[reportPrivateUsage]
    finally:
        backend.dispose()
    assert len(out.dataframe.columns) == 300 and len(out.dataframe) == 30
    assert len(out.preview) <= 4_000
    lines = out.preview.splitlines()
    assert lines[0] == "30 row(s), 300 column(s)."
    assert lines[1].startswith("c0 | c1 | ") and lines[1].count(" | ") == 39  # 40 columns shown
    assert len(lines) - 4 >= 5  # head, names, >= 5 rows, the two notes
    assert lines[-1].startswith("[260 more column(s) not shown: c40, c41,")
    assert "[preview shows" in lines[-2]


def test_d7_preview_budget_holds_for_any_shape() -> None:
    for n_cols, width, n_rows in [(1, 10_000, 50), (2_000, 3, 1), (50, 200, 20), (0, 0, 5)]:
        cols = [f"column_with_a_long_name_{i}" for i in range(n_cols)]
        rows = [tuple("x" * width for _ in cols) for _ in range(n_rows)]
        for budget in (4_000, 500):
            text = render_preview(
                cols,
                rows,
                row_count=n_rows,
                row_count_exact=True,
                truncated=False,
                has_rows=True,
                max_chars=budget,
            )
            assert len(text) <= budget, (n_cols, width, budget)
            assert text.startswith(f"{n_rows} row(s), {n_cols} column(s).")


@pytest.mark.parametrize(
    ("value", "column", "shown"),
    [
        (1234567, "amount", "1,234,567"),
        (9999, "amount", "9999"),
        (2024, "year", "2024"),
        (1234567, "customer_id", "1234567"),
        (12300000000.0, "revenue", "12,300,000,000"),
        (1234.5678, "price", "1,234.5678"),
        (0.370000, "ratio", "0.37"),
        (3.14159265, "pi", "3.14159265"),
        (0.000123456, "p", "0.000123456"),
        (2.0, "x", "2"),
        (-45678.9, "delta", "-45,678.9"),
        (float("nan"), "x", "NaN"),
        (1e20, "x", "1e+20"),
        (Decimal("1234.50"), "total", "1,234.50"),
        (Decimal("98765.4321"), "total", "98,765.4321"),
        (Decimal("0.12345678901"), "rate", "0.12345678901"),
        (70131.16, "revenue", "70,131.16"),
        (0.125, "share", "0.125"),
        (1e-7, "tiny", "1e-07"),
        (12345678901234, "big", "12,345,678,901,234"),
        (12345678901234.0, "big", "12,345,678,901,234"),
        (9007199254740993, "big", "9,007,199,254,740,993"),
        (10001.0, "customer_id", "10001"),
        (2024.0, "n", "2024"),
        (Decimal("1234567.89"), "amount", "1,234,567.89"),
        (Decimal("70131.10"), "price", "70,131.10"),
        (Decimal("1E-7"), "tiny", "0.0000001"),
        (Decimal("2024"), "n", "2024"),
        (Decimal("123456789012345678901234.5"), "huge", "123,456,789,012,345,678,901,234.5"),
        (Decimal("NaN"), "x", "NaN"),
        (None, "x", "NULL"),
        (True, "flag", "true"),
        (b"\x00\x01", "blob", "<2 bytes>"),
    ],
)
def test_d7_numbers_are_formatted_for_people(value: object, column: str, shown: str) -> None:
    assert format_value(value, column) == shown


def test_d7_preview_formats_numbers_in_cells() -> None:
    text = render_preview(
        ["n", "amount"],
        [(12345678, 1234567.891)],
        row_count=1,
        row_count_exact=True,
        truncated=False,
        has_rows=True,
    )
    assert text.splitlines()[2] == "12,345,678 | 1,234,567.891"


def test_d7_a_wide_preview_cuts_text_but_never_a_number() -> None:
    columns = [f"c{i}" for i in range(40)]
    row = (Decimal("123456789012345678901234.5"), 1234567.891, "x" * 60, *range(37))
    text = render_preview(
        columns, [row], row_count=1, row_count_exact=True, truncated=False, has_rows=True
    )
    cells = text.splitlines()[2].split(" | ")
    assert cells[:2] == ["123,456,789,012,345,678,901,234.5", "1,234,567.891"]
    assert cells[2].endswith("…") and len(cells[2]) < 60


@pytest.mark.postgres
@pytest.mark.parametrize(
    "sql",
    [
        "SELECT 1 AS one;",
        "SELECT 1 AS one -- a comment",
        "  (SELECT 1 AS one)",
        "VALUES (1)",
        "WITH w AS (SELECT 1 AS one) SELECT * FROM w",
        "SHOW server_version",
    ],
)
async def test_postgres_read_shapes_through_the_server_cursor(pg_url: str, sql: str) -> None:
    backend = DatabaseBackend(pg_url)
    try:
        out = await backend.run("r", sql)
    finally:
        backend.dispose()
    assert out.row_count == 1 and len(out.dataframe) == 1 and out.row_count_exact


async def test_d7_a_result_of_exactly_the_cap_is_complete() -> None:
    """Counting must never stop before a capped read's extra row (cap == count limit)."""
    backend = DatabaseBackend("sqlite://", row_cap=100, count_limit=100)
    try:
        exact = await backend.run("r1", SERIES.format(n=100))
        more = await backend.run("r2", SERIES.format(n=101))
    finally:
        backend.dispose()
    assert exact.row_count == 100 and exact.row_count_exact and not exact.truncated
    assert more.row_count == 101 and not more.row_count_exact and more.truncated
