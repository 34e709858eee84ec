"""D1: the function allow-lists stay reviewed as sqlglot evolves."""

from __future__ import annotations

from sqlglot import exp

from pi_notebook.sql import classify
from pi_notebook.sql.functions import (
    HOST_ACCESS_FUNCTIONS,
    IMPURE_FUNCTION_CLASSES,
    PURE_FUNCTION_CLASSES,
    PURE_FUNCTIONS,
    REJECT_FUNCTIONS,
)


def test_d1_every_sqlglot_function_class_was_reviewed() -> None:
    known = {cls.__name__ for cls in exp.ALL_FUNCTIONS}
    assert known - PURE_FUNCTION_CLASSES - IMPURE_FUNCTION_CLASSES == set()
    assert not PURE_FUNCTION_CLASSES & IMPURE_FUNCTION_CLASSES


def test_d1_dangerous_names_are_never_on_a_pure_list() -> None:
    dangerous = {
        "set_config",
        "nextval",
        "setval",
        "pg_advisory_lock",
        "pg_sleep",
        "pg_terminate_backend",
        "lo_import",
        "lo_export",
        "lo_unlink",
        "dblink",
        "dblink_exec",
        "txid_current",
        "get_lock",
        "sleep",
        "benchmark",
        "load_file",
        "load_extension",
        "read_csv",
        "query",
        "setseed",
        "pg_read_file",
        "release_lock",
        "pg_notify",
    }
    for dialect, names in PURE_FUNCTIONS.items():
        assert not dangerous & names, dialect
        # SQLite's glob(pattern, text) is string matching, DuckDB's glob() lists files.
        assert not HOST_ACCESS_FUNCTIONS & names - {"glob"}, dialect
        assert not REJECT_FUNCTIONS[dialect] & names, dialect


def test_d1_unknown_function_needs_approval_in_every_dialect() -> None:
    for dialect in PURE_FUNCTIONS:
        verdict = classify("SELECT totally_unknown_fn(1)", dialect)
        assert verdict.kind == "write"
        assert "totally_unknown_fn" in verdict.reasons[0]
