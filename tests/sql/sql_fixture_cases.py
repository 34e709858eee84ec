"""Reading the fixture files under tests/fixtures/sql (one case per line)."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

FIXTURES = Path(__file__).resolve().parent.parent / "fixtures" / "sql"
DIALECTS = ("postgres", "mysql", "sqlite", "duckdb")


@dataclass(frozen=True)
class Case:
    dialect: str
    expected: str
    sql: str
    line: int

    @property
    def id(self) -> str:
        return f"{self.dialect}:{self.line}"


def load_cases() -> list[Case]:
    """Every case: ``verdict | statement``; blank lines and ``#`` lines are skipped."""
    cases: list[Case] = []
    for dialect in DIALECTS:
        path = FIXTURES / f"{dialect}.txt"
        for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
            if not line.strip() or line.lstrip().startswith("#"):
                continue
            expected, sep, sql = line.partition(" | ")
            if not sep or expected.strip() not in ("read", "write", "reject"):
                raise ValueError(f"{path}:{number}: malformed case {line!r}")
            cases.append(Case(dialect, expected.strip(), sql, number))
    return cases
