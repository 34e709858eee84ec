"""The database's schema, read with SQLAlchemy's inspector and cached per extension.

:func:`inspect_schema` reads tables and views of the default schema: columns with their
types, primary and foreign keys, comments where the engine keeps them (PostgreSQL, MySQL/
MariaDB and DuckDB do; SQLite has none) and view definitions (the data policy traces lineage
through them). DuckDB is read from its ``duckdb_*()`` catalog functions, because its SQLAlchemy
dialect borrows PostgreSQL catalog queries that DuckDB cannot answer.

:class:`SchemaCache` inspects once, off the event loop, and again after :meth:`invalidate`
(the extension calls it after an approved DDL statement) or when ``ttl_s`` has passed.
What does not belong here: rendering for the model (:mod:`.describe`), descriptions from the
semantic file (:mod:`.semantic`).
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable, Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal, Protocol

import sqlalchemy as sa
from sqlalchemy.engine import URL
from sqlalchemy.engine.reflection import Inspector

from pi_notebook.ai.abort import AbortSignal
from pi_notebook.errors import QueryAborted, QueryError
from pi_notebook.sql.backend import describe_error

__all__ = [
    "ColumnInfo",
    "ForeignKeyInfo",
    "SchemaCache",
    "SchemaInfo",
    "TableInfo",
    "inspect_schema",
    "matching_tables",
]

TableKind = Literal["table", "view"]

MAX_TABLES = 2_000
"""Tables and views read at most (a larger schema is cut, and says so)."""


@dataclass(frozen=True, kw_only=True)
class ColumnInfo:
    name: str
    type: str
    nullable: bool = True
    comment: str | None = None


@dataclass(frozen=True, kw_only=True)
class ForeignKeyInfo:
    columns: tuple[str, ...]
    referred_table: str
    referred_columns: tuple[str, ...]


@dataclass(frozen=True, kw_only=True)
class TableInfo:
    """One table or view. ``definition`` is a view's SQL when the engine gives it."""

    name: str
    kind: TableKind = "table"
    columns: tuple[ColumnInfo, ...] = ()
    primary_key: tuple[str, ...] = ()
    foreign_keys: tuple[ForeignKeyInfo, ...] = ()
    comment: str | None = None
    definition: str | None = None

    def column(self, name: str) -> ColumnInfo | None:
        folded = name.casefold()
        return next((c for c in self.columns if c.name.casefold() == folded), None)

    def foreign_key_of(self, column: str) -> ForeignKeyInfo | None:
        return next((fk for fk in self.foreign_keys if column in fk.columns), None)


@dataclass(frozen=True, kw_only=True)
class SchemaInfo:
    """Tables and views of the default schema, in name order."""

    dialect: str
    default_schema: str | None = None
    tables: tuple[TableInfo, ...] = ()
    truncated: bool = False
    _by_name: dict[str, TableInfo] = field(default_factory=dict[str, TableInfo], repr=False)

    def __post_init__(self) -> None:
        self._by_name.update({t.name.casefold(): t for t in self.tables})

    def table(self, name: str) -> TableInfo | None:
        """The table or view called ``name`` (case-insensitive), if any."""
        return self._by_name.get(name.casefold())

    def column_types(self) -> dict[str, object]:
        """``{table: {column: type}}``, the mapping sqlglot's optimizer takes as a schema."""
        return {t.name: {c.name: c.type for c in t.columns} for t in self.tables}


def _text(value: Any) -> str | None:
    return value if isinstance(value, str) and value.strip() else None


def _optional(call: Any, default: Any) -> Any:
    """An inspector call an engine may not implement (comments on SQLite)."""
    try:
        return call()
    except NotImplementedError:
        return default


def _inspect_generic(engine: sa.Engine, dialect: str) -> SchemaInfo:
    inspector: Inspector = sa.inspect(engine)
    schema = inspector.default_schema_name
    table: TableKind = "table"
    view: TableKind = "view"
    names: list[tuple[str, TableKind]] = [(n, table) for n in inspector.get_table_names()]
    names.extend((n, view) for n in inspector.get_view_names())
    names.sort()
    truncated = len(names) > MAX_TABLES
    tables: list[TableInfo] = []
    for name, kind in names[:MAX_TABLES]:
        columns = tuple(
            ColumnInfo(
                name=c["name"],
                type=str(c["type"]),
                nullable=bool(c.get("nullable", True)),
                comment=_text(c.get("comment")),
            )
            for c in inspector.get_columns(name)
        )
        primary: tuple[str, ...] = ()
        foreign: tuple[ForeignKeyInfo, ...] = ()
        comment = definition = None
        if kind == "table":
            primary = tuple(inspector.get_pk_constraint(name).get("constrained_columns") or ())
            foreign = tuple(
                ForeignKeyInfo(
                    columns=tuple(fk["constrained_columns"]),
                    referred_table=fk["referred_table"],
                    referred_columns=tuple(fk["referred_columns"]),
                )
                for fk in inspector.get_foreign_keys(name)
            )
            comment = _text(
                _optional(lambda n=name: inspector.get_table_comment(n), {}).get("text")
            )
        else:
            definition = _text(_optional(lambda n=name: inspector.get_view_definition(n), None))
        tables.append(
            TableInfo(
                name=name,
                kind=kind,
                columns=columns,
                primary_key=primary,
                foreign_keys=foreign,
                comment=comment,
                definition=definition,
            )
        )
    return SchemaInfo(
        dialect=dialect, default_schema=schema, tables=tuple(tables), truncated=truncated
    )


_DUCKDB_COLUMNS = (
    "SELECT table_name, column_name, data_type, is_nullable, comment FROM duckdb_columns() "
    "WHERE schema_name = current_schema() AND database_name = current_database() AND NOT internal "
    "ORDER BY table_name, column_index"
)
_DUCKDB_CONSTRAINTS = (
    "SELECT table_name, constraint_type, constraint_column_names, referenced_table, "
    "referenced_column_names FROM duckdb_constraints() WHERE schema_name = current_schema() "
    "AND database_name = current_database() AND constraint_type IN ('PRIMARY KEY', 'FOREIGN KEY')"
)
_DUCKDB_TABLES = (
    "SELECT table_name, 'table', comment, NULL FROM duckdb_tables() WHERE schema_name = "
    "current_schema() AND database_name = current_database() AND NOT internal UNION ALL "
    "SELECT view_name, 'view', comment, sql FROM duckdb_views() WHERE schema_name = "
    "current_schema() AND database_name = current_database() AND NOT internal"
)


def _inspect_duckdb(engine: sa.Engine) -> SchemaInfo:
    with engine.connect() as conn:
        schema = conn.exec_driver_sql("SELECT current_schema()").scalar()
        objects: list[tuple[Any, ...]] = sorted(
            tuple(r) for r in conn.exec_driver_sql(_DUCKDB_TABLES)
        )
        columns: dict[str, list[ColumnInfo]] = {}
        for table, name, type_, nullable, comment in conn.exec_driver_sql(_DUCKDB_COLUMNS):
            columns.setdefault(table, []).append(
                ColumnInfo(name=name, type=type_, nullable=bool(nullable), comment=_text(comment))
            )
        primary: dict[str, tuple[str, ...]] = {}
        foreign: dict[str, list[ForeignKeyInfo]] = {}
        for table, kind, cols, referred, referred_cols in conn.exec_driver_sql(_DUCKDB_CONSTRAINTS):
            if kind == "PRIMARY KEY":
                primary[table] = tuple(cols)
            else:
                foreign.setdefault(table, []).append(
                    ForeignKeyInfo(
                        columns=tuple(cols),
                        referred_table=referred,
                        referred_columns=tuple(referred_cols),
                    )
                )
    tables = tuple(
        TableInfo(
            name=name,
            kind=kind,
            columns=tuple(columns.get(name, ())),
            primary_key=primary.get(name, ()),
            foreign_keys=tuple(foreign.get(name, ())),
            comment=_text(comment),
            definition=_text(sql),
        )
        for name, kind, comment, sql in objects[:MAX_TABLES]
    )
    return SchemaInfo(
        dialect="duckdb", default_schema=schema, tables=tables, truncated=len(objects) > MAX_TABLES
    )


class Offload(Protocol):
    """Runs a blocking read off the loop, released by ``signal`` (``DatabaseBackend.offload``)."""

    def __call__(
        self, fn: Callable[..., Any], *args: Any, signal: AbortSignal | None = None
    ) -> Awaitable[Any]: ...


class SchemaSource(Protocol):
    """An engine outside SQLAlchemy that lists its own catalog (chDB's, see
    :mod:`pi_notebook.sql.engines`): tables as ``(name, kind, comment)``, columns as
    ``(table, name, type, nullable, comment, in_primary_key)`` in each table's order."""

    url: URL
    dialect: str

    def catalog(
        self,
    ) -> tuple[
        Sequence[tuple[str, str, str | None]],
        Sequence[tuple[str, str, str, bool, str | None, bool]],
    ]: ...


def _from_catalog(source: SchemaSource) -> SchemaInfo:
    tables, columns = source.catalog()
    by_table: dict[str, list[ColumnInfo]] = {}
    keys: dict[str, list[str]] = {}
    for table, name, type_, nullable, comment, in_key in columns:
        by_table.setdefault(table, []).append(
            ColumnInfo(name=name, type=type_, nullable=nullable, comment=comment)
        )
        if in_key:
            keys.setdefault(table, []).append(name)
    infos = tuple(
        TableInfo(
            name=name,
            kind="view" if kind == "view" else "table",
            columns=tuple(by_table.get(name, ())),
            primary_key=tuple(keys.get(name, ())),
            comment=comment,
        )
        for name, kind, comment in tables
    )
    return SchemaInfo(dialect=source.dialect, default_schema=None, tables=infos)


def inspect_schema(engine: sa.Engine | SchemaSource, dialect: str) -> SchemaInfo:
    """Read the schema behind ``engine`` (blocking: call it in a worker thread).

    Raises:
        sqlalchemy.exc.SQLAlchemyError: the database cannot be reached or read.
    """
    if not isinstance(engine, sa.Engine):
        return _from_catalog(engine)
    if engine.dialect.name == "duckdb":
        return _inspect_duckdb(engine)
    return _inspect_generic(engine, dialect)


class SchemaCache:
    """The schema of one database, read on first use and kept until invalidated.

    Args:
        engine: the engine to inspect (the backend's).
        dialect: the sqlglot dialect name, kept on the result.
        ttl_s: a cached schema older than this is read again (changes made outside the
            session show up); ``None`` keeps it until :meth:`invalidate`.
    """

    def __init__(
        self,
        engine: sa.Engine | SchemaSource,
        dialect: str,
        *,
        ttl_s: float | None = 600,
        offload: Offload | None = None,
    ) -> None:
        self._engine = engine
        self._offload = offload
        self.dialect = dialect
        self.ttl_s = ttl_s
        self._schema: SchemaInfo | None = None
        self._read_at = 0.0
        self._lock = asyncio.Lock()
        self.reads = 0  # how many times the database was inspected (for tests and tuning)

    def invalidate(self) -> None:
        """Forget the cached schema; the next :meth:`get` reads it again."""
        self._schema = None

    @property
    def cached(self) -> SchemaInfo | None:
        """The cached schema, if it is fresh; never reads the database."""
        if self._schema is None:
            return None
        if self.ttl_s is not None and time.monotonic() - self._read_at > self.ttl_s:
            return None
        return self._schema

    @property
    def last(self) -> SchemaInfo | None:
        """The schema last read, even if older than ``ttl_s`` (``None`` once invalidated)."""
        return self._schema

    async def get(self, *, signal: AbortSignal | None = None) -> SchemaInfo:
        """The schema, read off the event loop when not cached (concurrent callers share one
        read). With an ``offload`` (the backend's), the read runs on the backend's worker,
        bounded by its statement timeout, and ``signal`` releases the caller at once even
        while a connect hangs.

        Raises:
            QueryError: the database could not be read (a short text without credentials);
                ``QueryAborted`` when ``signal`` aborted.
        """
        schema = self.cached
        if schema is not None:
            return schema
        async with self._lock:
            schema = self.cached
            if schema is None:
                try:
                    if self._offload is not None:
                        schema = await self._offload(
                            inspect_schema, self._engine, self.dialect, signal=signal
                        )
                    else:
                        schema = await asyncio.to_thread(inspect_schema, self._engine, self.dialect)
                except QueryAborted:
                    raise
                except Exception as exc:  # short and credential-free: it may reach the model
                    detail = (
                        str(exc)  # already short and scrubbed by the backend
                        if isinstance(exc, QueryError)
                        else describe_error(exc, self._engine.url)
                    )
                    raise QueryError(f"The database schema could not be read. {detail}") from None
                self._schema, self._read_at = schema, time.monotonic()
                self.reads += 1
            return schema


def matching_tables(schema: SchemaInfo, names: Iterable[str]) -> tuple[list[TableInfo], list[str]]:
    """The tables named (case-insensitive, an optional schema prefix ignored), and the names
    that match nothing."""
    found: list[TableInfo] = []
    unknown: list[str] = []
    for raw in names:
        name = raw.strip().strip('"`[]')
        table = schema.table(name) or schema.table(name.rsplit(".", 1)[-1].strip('"`[]'))
        if table is None:
            unknown.append(raw)
        elif table not in found:
            found.append(table)
    return found, unknown
