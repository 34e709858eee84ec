"""Tables and settings that are not plain reads although reading them changes nothing.

Reading them reaches past the data: configuration files on the server host, stored
credentials (password hashes, connection strings with passwords), other sessions'
statement text (which may carry passwords), raw pages that keep deleted rows, or a host
file that DuckDB opens when a dotted name is not a table. A person approves such a read.

Names are lower case. An entry ``schema.name`` matches only with that schema written (a
bare ``user`` or ``servers`` is an ordinary table name); an entry ending in ``*`` matches
every name it begins.
"""

from __future__ import annotations

from functools import cache

__all__ = [
    "DUCKDB_FILE_SUFFIXES",
    "HOST_FILE_TABLES",
    "SECRET_SETTINGS",
    "SECRET_TABLES",
    "SETTINGS_TABLES",
    "is_listed",
]


def _names(text: str) -> frozenset[str]:
    return frozenset(text.split())


_WAREHOUSES_NONE: dict[str, frozenset[str]] = {
    name: frozenset() for name in ("spark", "trino", "snowflake", "bigquery")
}
"""The warehouse dialects judge their catalogues in their own modules (``spark.py``...)."""

HOST_FILE_TABLES: dict[str, frozenset[str]] = {
    "postgres": _names("pg_file_settings pg_hba_file_rules pg_ident_file_mappings"),
    "mysql": frozenset(),
    "sqlite": frozenset(),
    "duckdb": frozenset(),
    "clickhouse": frozenset(),
    **_WAREHOUSES_NONE,
}
"""Catalog views that read configuration files on the server host when queried."""

SECRET_TABLES: dict[str, frozenset[str]] = {
    "postgres": _names(
        """pg_authid pg_shadow pg_user_mapping pg_user_mappings pg_subscription
        pg_db_role_setting information_schema.user_mapping_options user_mapping_options"""
    ),
    "mysql": _names(
        """mysql.user mysql.global_priv global_priv mysql.servers mysql.slave_master_info
        slave_master_info mysql.password_reuse_check_history password_reuse_check_history
        mysql.general_log general_log mysql.slow_log slow_log"""
    ),
    "sqlite": _names("sqlite_dbpage"),
    "duckdb": frozenset(),
    "clickhouse": frozenset(),
    **_WAREHOUSES_NONE,
}
"""Tables holding secrets: password hashes (``pg_authid``, ``mysql.user``,
``mysql.global_priv``, MariaDB's password history), stored connection passwords
(``pg_subscription.subconninfo``, ``pg_user_mappings`` and its information-schema view,
``mysql.servers``, MySQL's
replication ``slave_master_info``), per-role settings, the statement logs (every past
statement, ``IDENTIFIED BY`` passwords included), raw pages with deleted rows (SQLite's
``sqlite_dbpage``). Live activity views (``pg_stat_activity``, the process list) are
monitoring reads: they show statements while they run, as every DBA tool does."""

SETTINGS_TABLES: dict[str, frozenset[str]] = {
    "postgres": _names("pg_settings"),
    "mysql": frozenset(),
    "sqlite": frozenset(),
    "duckdb": frozenset(),
    "clickhouse": frozenset(),
    **_WAREHOUSES_NONE,
}
"""Views listing every setting with its value, secret ones included (PostgreSQL shows
``primary_conninfo`` with its password to a superuser): a read only when its query keeps
rows by literal setting names (``WHERE name = 'work_mem'``)."""

SECRET_SETTINGS: dict[str, frozenset[str]] = {
    "postgres": _names(
        """primary_conninfo ssl_passphrase_command archive_command restore_command
        archive_cleanup_command recovery_end_command all"""
    ),
    "mysql": frozenset(),
    "sqlite": frozenset(),
    "duckdb": _names(
        """s3_secret_access_key s3_session_token s3_access_key_id azure_storage_connection_string
        azure_account_key hf_token"""
    ),
    "clickhouse": frozenset(),
    **_WAREHOUSES_NONE,
}
"""Settings whose value holds a password or a command (``SHOW x``, ``current_setting('x')``;
PostgreSQL's ``SHOW ALL`` lists them all)."""

DUCKDB_FILE_SUFFIXES: frozenset[str] = _names(
    """
    csv tsv txt text json jsonl ndjson parquet gz gzip zst zstd bz2 xz lz4 snappy br
    db duckdb ddb sqlite sqlite3 xlsx xls avro arrow feather ipc orc geojson shp gpkg
    fgb kml gpx xml tbl dat psv iceberg delta lance vortex
    """
)
"""Last parts of a dotted table name that DuckDB may open as a file: when ``x.csv`` is
not a table, DuckDB 2 reads the file ``x.csv`` (and ``x.db`` as a database, and installs
an extension for ``x.xlsx``)."""


@cache
def _prefixes(names: frozenset[str]) -> tuple[str, ...]:
    return tuple(entry[:-1] for entry in names if entry.endswith("*"))


def is_listed(names: frozenset[str], schema: str, name: str) -> bool:
    """Whether ``name`` (lower case, with its lower-case ``schema`` or "") is in ``names``."""
    qualified = f"{schema}.{name}" if schema else name
    return name in names or qualified in names or qualified.startswith(_prefixes(names))
