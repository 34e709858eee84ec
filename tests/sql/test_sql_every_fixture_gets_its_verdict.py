"""D1: every fixture case gets its expected verdict."""

from __future__ import annotations

from collections import Counter

import pytest
from sql_fixture_cases import Case, load_cases

from pi_notebook.sql import classify

CASES = load_cases()


@pytest.mark.parametrize("case", CASES, ids=[case.id for case in CASES])
def test_d1_fixture_case(case: Case) -> None:
    verdict = classify(case.sql, case.dialect)
    assert verdict.kind == case.expected, (case.sql, verdict.reasons)
    assert verdict.reasons, "every verdict carries a reason"


def test_d1_fixture_volume() -> None:
    counts = Counter((case.dialect, case.expected) for case in CASES)
    assert len(CASES) >= 300
    for dialect in ("postgres", "mysql", "sqlite", "duckdb"):
        assert counts[dialect, "read"] >= 40
        assert counts[dialect, "write"] >= 30
        assert counts[dialect, "reject"] >= 5
