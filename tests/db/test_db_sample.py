# ruff: noqa: F811 - the engine fixture ``db`` is imported from dbtest_support
"""The sample database: deterministic, created in the data directory, loadable anywhere."""

from __future__ import annotations

import os
from pathlib import Path

import sqlalchemy as sa
from dbtest_support import Scratch, db  # noqa: F401

from pi_notebook.sample_db import create_sample_database, sample_database_url, sample_rows


def test_sample_rows_are_deterministic_and_realistic() -> None:
    first, second = sample_rows(), sample_rows()
    assert first == second
    sizes = {k: len(v) for k, v in first.items()}
    assert sizes["customers"] == 400 and sizes["products"] == 80 and sizes["orders"] == 1500
    assert 2_000 < sizes["order_items"] < 6_000
    assert {p["category"] for p in first["products"]} >= {"Books", "Electronics", "Kitchen"}


def test_sample_database_is_created_in_the_data_dir_once() -> None:
    url = sample_database_url()
    path = Path(sa.make_url(url).database or "")
    assert path.parent == Path(os.environ["PI_NOTEBOOK_DATA_DIR"]) and path.exists()
    mtime = path.stat().st_mtime_ns
    assert sample_database_url() == url and path.stat().st_mtime_ns == mtime


def test_sample_database_loads_into_every_engine(db: Scratch) -> None:
    create_sample_database(db.url)
    assert db.scalar("SELECT count(*) FROM orders") == 1500
    assert db.scalar("SELECT count(DISTINCT category) FROM products") == 6
    db.execute("DROP TABLE order_items")  # leave the shared server databases clean
    db.execute("DROP TABLE orders")
