"""The pragma policy, one table per dialect: the classifier and SQLite's authorizer both read it.

A pragma is listed with how it may be used in a read:

* ``"report"``: it only reports, whatever its argument (a table or index name, a row
  limit, a schema): ``table_info``, ``integrity_check`` (which reads the whole database
  but changes nothing; the statement timeout bounds it);
* ``"setting"``: called bare it reports a setting; given a value it changes the setting
  (``PRAGMA user_version = 5``, ``PRAGMA journal_mode = WAL``).

Anything not listed (``optimize``, ``wal_checkpoint``, ``shrink_memory``,
``incremental_vacuum``, ``writable_schema``, DuckDB's ``enable_profiling``...) is not a
read in any form. The classifier judges the statement forms (``PRAGMA x``, ``PRAGMA
x(arg)``, ``PRAGMA x = v``, the eponymous tables ``pragma_x``); SQLite's authorizer
(``pi_notebook.sql.backend.readonly``) judges the ``SQLITE_PRAGMA`` action it is asked
about, which carries the pragma's name and its argument, with :func:`sqlite_allows`.
A table-valued pragma never sets anything: SQLite takes its only extra argument as a
schema name, and its authorizer call carries no value.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Literal

__all__ = [
    "PRAGMAS",
    "PragmaForm",
    "PragmaUse",
    "pragma_statement_is_read",
    "pragma_table_is_read",
    "sqlite_allows",
]

PragmaUse = Literal["report", "setting"]
PragmaForm = Literal["bare", "call", "assign"]
"""``PRAGMA x``, ``PRAGMA x(arg)``, ``PRAGMA x = value``."""


def _uses(report: str, setting: str = "") -> dict[str, PragmaUse]:
    table: dict[str, PragmaUse] = dict.fromkeys(report.split(), "report")
    table.update(dict.fromkeys(setting.split(), "setting"))
    return table


_SQLITE = _uses(
    report="""collation_list compile_options data_version database_list foreign_key_check
    foreign_key_list freelist_count function_list index_info index_list index_xinfo
    integrity_check module_list page_count pragma_list quick_check table_info table_list
    table_xinfo""",
    setting="""analysis_limit application_id auto_vacuum automatic_index busy_timeout
    cache_size cache_spill cell_size_check checkpoint_fullfsync defer_foreign_keys encoding
    foreign_keys fullfsync hard_heap_limit ignore_check_constraints journal_mode
    journal_size_limit legacy_alter_table locking_mode max_page_count mmap_size page_size
    query_only read_uncommitted recursive_triggers reverse_unordered_selects schema_version
    secure_delete soft_heap_limit synchronous temp_store threads trusted_schema user_version
    wal_autocheckpoint""",
)
_DUCKDB = _uses(
    report="""collations database_list database_size functions metadata_info platform show
    show_databases show_tables show_tables_expanded storage_info table_info user_agent
    version"""
)

PRAGMAS: Mapping[str, Mapping[str, PragmaUse]] = {"sqlite": _SQLITE, "duckdb": _DUCKDB}
"""Per dialect with pragmas (lower-case names): how each listed pragma may be read."""


def pragma_statement_is_read(dialect: str, name: str, form: PragmaForm) -> bool:
    """Whether ``PRAGMA name`` in ``form`` only reports (False for unknown dialects)."""
    use = PRAGMAS.get(dialect, {}).get(name.lower())
    if use is None or form == "assign":
        return False
    return form == "bare" or use == "report"


def pragma_table_is_read(dialect: str, name: str, *, with_arguments: bool) -> bool:
    """Whether the eponymous table ``pragma_<name>`` (or its call form) only reports.

    A setting's table takes no value (SQLite reads an argument as a schema name), but an
    argument to one is refused anyway: it reads like ``PRAGMA x(value)``.
    """
    use = PRAGMAS.get(dialect, {}).get(name.lower())
    return use == "report" or (use == "setting" and not with_arguments)


def sqlite_allows(name: str | None, argument: str | None) -> bool:
    """The authorizer's answer to ``SQLITE_PRAGMA(name, argument)`` outside its own setup:
    a listed pragma, and for a setting, no value (``argument`` is None)."""
    use = _SQLITE.get((name or "").lower())
    return use == "report" or (use == "setting" and argument is None)
