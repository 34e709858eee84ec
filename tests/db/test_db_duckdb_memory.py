"""DuckDB runs inside the kernel: its memory limit turns a huge aggregate into an error."""

from __future__ import annotations

from pathlib import Path

import pytest

from pi_notebook.sql.backend import DatabaseBackend, QueryError

HUGE = "SELECT length(string_agg(repeat('x', 100), ',')) AS n FROM range(30000000)"


async def test_a_huge_aggregate_fails_at_the_memory_limit(tmp_path: Path) -> None:
    backend = DatabaseBackend(f"duckdb:///{tmp_path / 'm.duckdb'}")
    try:
        limit = await backend._run_as("read", "SELECT current_setting('memory_limit') AS m")  # pyright: ignore[reportPrivateUsage]
        assert limit.dataframe["m"].iloc[0].replace(" ", "") in {"953.6MiB", "1.0GiB", "1GB"}
        # ~3 GB of string without the limit; the engine refuses instead.
        with pytest.raises(QueryError, match=r"(?i)out of memory"):
            await backend._run_as("read", HUGE)  # pyright: ignore[reportPrivateUsage]
    finally:
        backend.dispose()


async def test_the_limit_can_be_raised(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PI_NOTEBOOK_DUCKDB_MEMORY_LIMIT", "2GB")
    backend = DatabaseBackend(f"duckdb:///{tmp_path / 'm.duckdb'}")
    try:
        out = await backend._run_as("read", "SELECT current_setting('memory_limit') AS m")  # pyright: ignore[reportPrivateUsage]
    finally:
        backend.dispose()
    assert out.dataframe["m"].iloc[0].replace(" ", "") in {"1.8GiB", "1.9GiB", "2GB"}
