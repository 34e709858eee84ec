"""The data policy: which columns' values the model must not see, and what it sees instead.

``DataPolicy`` holds the rules (``"customers.email": "mask"``, ``"customers.phone": "drop"``,
``"customers.*": "hash"``), from a dict or a YAML/JSON file, and a version (given in the file,
else a digest of the rules): :mod:`.policy_rules`, re-exported here. :class:`LineagePolicy` is the database extension's
``ContentPolicy``: for each result it traces every output column to its source columns
(:mod:`.lineage`) and, in the preview the model reads, masks, hashes or drops the values of any
column derived from a protected one; the analyst's DataFrame in ``details`` is untouched.
Where lineage cannot be established the model gets only the result's shape and the reason
(SQL run from a string, ``query_to_xml('SELECT ...')``, is such a case), without the row count
when the statement may read a protected table. Where which rows the result has derives from a
protected column (a table function over it, ``LIMIT``/``OFFSET``, an order it decides, a
condition relating it to another source: see :mod:`.lineage`), the row count is a derived
value too, and the model gets the column names only.
The values it protected are remembered (:mod:`.protected_values`) for the last check on
outgoing payloads (not the ones the model had before: literals of its own statement, the
schema's names and types, what it was already sent). When a statement that may read protected
data fails, :meth:`LineagePolicy.model_error` gives the model the error's class and a hint,
never the database's message (which can quote a value: ``error(email)``, a failed cast).

Actions, from the weakest: ``hash`` (a stable, per-session salted digest: equal values look
equal), ``mask`` (nothing of the value), ``drop`` (not even the column). A column derived from
several protected columns gets the strongest of their actions. ``hash`` applies only to a
column that is the hashed column's values as stored (``SELECT email``); anything computed from
it (a length, a letter, a rank, an order) is masked, since equal digests of few possible values
give them away (a ``UNION`` with a guess compares digests).
"""

from __future__ import annotations

import hashlib
import hmac
import re
import secrets
from collections.abc import Mapping
from dataclasses import dataclass, field
from decimal import Decimal
from typing import Any

import pandas as pd
import sqlglot
from sqlglot import exp

from pi_notebook.database.content import ModelContent
from pi_notebook.sql.backend import QueryOutcome, render_preview

from .lineage import Source, referenced_tables, trace
from .policy_rules import ACTIONS, Action, DataPolicy, load_policy
from .protected_values import ProtectedValues
from .schema import SchemaCache, SchemaInfo

__all__ = [
    "ACTIONS",
    "MASK",
    "PREVIEW_ROWS",
    "Action",
    "DataPolicy",
    "LineagePolicy",
    "generic_error",
    "load_policy",
]

MASK = "[masked]"
PREVIEW_ROWS = 20


@dataclass(kw_only=True)
class LineagePolicy:
    """The ``ContentPolicy`` of a database extension with a data policy (one per session).

    ``schema`` must hold a fresh schema when ``model_content`` runs (the extension reads it in
    a ``tool_call`` handler before the query); without one, values are withheld.
    """

    policy: DataPolicy
    schema: SchemaCache
    seen: ProtectedValues = field(default_factory=ProtectedValues)
    salt: bytes = field(default_factory=lambda: secrets.token_bytes(16))
    _views: dict[str, dict[str, frozenset[Source]]] = field(default_factory=dict)
    _views_of: int = 0
    _metadata: frozenset[str] = frozenset()
    _metadata_of: int = 0

    def _hash(self, value: Any) -> str:
        digest = hmac.new(self.salt, str(value).encode("utf-8"), hashlib.sha256).hexdigest()
        return f"h:{digest[:10]}"

    def model_content(self, sql: str, dialect: str, outcome: QueryOutcome) -> ModelContent:
        """The preview the model sees of ``outcome``. Never raises: a failure withholds."""
        try:
            return self._model_content(sql, dialect, outcome)
        except Exception as exc:  # fail closed
            reason = f"the data policy could not be applied ({type(exc).__name__})"
            return self._withhold(outcome, reason, sql, dialect)

    def _model_content(self, sql: str, dialect: str, outcome: QueryOutcome) -> ModelContent:
        schema = self.schema.cached or self.schema.last
        if schema is None:
            return self._withhold(outcome, "the database schema could not be read", sql, dialect)
        if id(schema) != self._views_of:  # view lineage is per schema
            self._views, self._views_of = {}, id(schema)
        known = self._schema_words(schema)
        lineage = trace(sql, dialect, schema, views=self._views)
        frame = outcome.dataframe
        if lineage.columns is None or len(lineage.columns) != frame.shape[1]:
            reason = lineage.reason or "the result's columns do not match the statement"
            return self._withhold(outcome, reason, sql, dialect)
        _, row_sources = self.policy.strongest(lineage.rows)
        if row_sources:
            return self._withhold_rows(outcome, row_sources, sql, known)
        protected: dict[str, str] = {}
        notes: list[str] = []
        keep: list[int] = []
        cells: list[list[Any]] = []
        head = frame.head(PREVIEW_ROWS)
        # The rows as the database returned them (a numeric keeps its digits and scale), as
        # the user's card shows them; the DataFrame's values when the backend kept none.
        exact = outcome.head[:PREVIEW_ROWS]
        if len(exact) != len(head) or any(len(row) != frame.shape[1] for row in exact):
            exact = None
        for i, column in enumerate(lineage.columns):
            label = str(outcome.columns[i]) if i < len(outcome.columns) else column.name
            name = _unique(label, protected)
            action, sources = self.policy.strongest(column.sources)
            if action == "hash" and sources != [".".join(column.stored or ())]:
                action = "mask"  # equal digests of a length, a rank or a letter give it away
            values = [row[i] for row in exact] if exact is not None else head.iloc[:, i].tolist()
            if action is None:
                keep.append(i)
                cells.append(values)
                self.seen.allow(values)  # the model sees them as they are
                continue
            protected[name] = action
            notes.append(f"{name} {_PAST[action]} (from {', '.join(sources)})")
            self.seen.add(frame.iloc[:, i].tolist(), sources[0], known_text=sql, known=known)
            if action != "drop":
                keep.append(i)
                cells.append([self._shown(v, action) for v in values])
        text = self._preview(outcome, [str(outcome.columns[i]) for i in keep], cells)
        if not protected:
            return ModelContent(text=text)
        note = (
            f"[Data policy {self.policy.version}: "
            + "; ".join(notes)
            + ". The user sees the real values in their table.]"
        )
        return ModelContent(text=f"{text}\n{note}", protected=protected, note=note)

    def _shown(self, value: Any, action: Action) -> Any:
        if _null(value):
            return None
        return MASK if action == "mask" else self._hash(value)

    @staticmethod
    def _preview(outcome: QueryOutcome, columns: list[str], cells: list[list[Any]]) -> str:
        if not columns:
            total = (
                f"{outcome.row_count}"
                if outcome.row_count_exact
                else f"at least {outcome.row_count}"
            )
            return f"{total} row(s); every column was dropped by the data policy."
        rows = [list(r) for r in zip(*cells, strict=True)]
        return render_preview(
            columns,
            rows,
            row_count=outcome.row_count,
            row_count_exact=outcome.row_count_exact,
            truncated=outcome.truncated,
            has_rows=True,
        )

    def _schema_words(self, schema: SchemaInfo | None) -> frozenset[str]:
        """Names and types of the schema (folded): what ``DESCRIBE`` or ``SUMMARIZE`` print
        besides values, and what the schema summary already told the model."""
        if schema is None:
            return frozenset()
        if id(schema) != self._metadata_of:
            words: set[str] = set()
            for table in schema.tables:
                words.add(table.name.casefold())
                for column in table.columns:
                    kind = column.type.casefold()
                    words.update((column.name.casefold(), kind, kind.split("(")[0].strip()))
            self._metadata, self._metadata_of = frozenset(words), id(schema)
        return self._metadata

    def touches_protected(self, sql: str, dialect: str) -> bool:
        """Whether ``sql`` may read a protected table: it names one, or a view whose definition
        names one, or a string in it does (DuckDB's ``query('SELECT email FROM customers')``,
        ``query_table('customers')``, PostgreSQL's ``query_to_xml``), or it cannot be parsed."""
        tables = referenced_tables(sql, dialect)
        if tables is None:
            return True
        protected = self.policy.tables
        if tables & protected:
            return True
        if _strings_name(sql, dialect, protected):
            return True
        schema = self.schema.cached or self.schema.last
        for name in tables:
            info = schema.table(name) if schema is not None else None
            if info is not None and info.kind == "view":
                definition = (info.definition or "").casefold()
                if not definition or any(t in definition for t in protected):
                    return True
        return False

    def _withhold(self, outcome: QueryOutcome, reason: str, sql: str, dialect: str) -> ModelContent:
        """Only the shape, and why: no value, not even a column name (PIVOT makes names of
        values), nor the row count when the statement may read a protected table."""
        frame = outcome.dataframe
        touches = self.touches_protected(sql, dialect)
        if touches:  # any column may hold protected values
            schema = self.schema.cached or self.schema.last
            known = self._schema_words(schema)
            numbers = self._protects_numbers(schema)
            for i in range(frame.shape[1]):
                values = frame.iloc[:, i].tolist()
                if not numbers:  # counts, sizes and percentages (SUMMARIZE) are no such value
                    values = [v for v in values if not _numeric(v)]
                self.seen.add(values, "a result without lineage", known_text=sql, known=known)
        total = (
            f"{outcome.row_count}" if outcome.row_count_exact else f"at least {outcome.row_count}"
        )
        # The row count too may derive from protected values (LIMIT, a generator over them).
        shape = (
            f"{frame.shape[1]} column(s)"
            if touches
            else f"{total} row(s), {frame.shape[1]} column(s)"
        )
        note = f"values withheld by the data policy: lineage could not be established ({reason})"
        text = (
            f"{shape}; {note}. The user sees the result as a "
            "table. To see values, select named columns of tables (no views the database "
            "cannot describe, no PIVOT, no table function other than generators and "
            "unnest)."
        )
        # "*": the result's column names may themselves be values (PIVOT), so none is kept.
        return ModelContent(text=text, protected={"*": "withheld"}, note=note)

    def _withhold_rows(
        self, outcome: QueryOutcome, sources: list[str], sql: str, known: frozenset[str]
    ) -> ModelContent:
        """Which rows the result has derives from protected columns (a table function over
        them, ``LIMIT``/``OFFSET``, an order they decide, a condition relating them to
        another source): its row count is a derived value too, so only its columns' names
        are shown."""
        frame = outcome.dataframe
        for i in range(frame.shape[1]):
            self.seen.add(frame.iloc[:, i].tolist(), sources[0], known_text=sql, known=known)
        named = ", ".join(str(c) for c in outcome.columns)
        note = (
            f"values and row count withheld by the data policy {self.policy.version}: which "
            f"rows the result has derives from {', '.join(sources)}"
        )
        text = (
            f"{frame.shape[1]} column(s) ({named}); {note}. The user sees the result as a "
            "table. Counts of rows are shown when the rows do not depend on protected "
            "columns (no table function, LIMIT/OFFSET or ordering over them, no condition "
            "relating them to another table or series)."
        )
        return ModelContent(text=text, protected={"*": "withheld"}, note=note)

    def _protects_numbers(self, schema: SchemaInfo | None) -> bool:
        """Whether a protected column may hold numbers (or the schema cannot say)."""
        if schema is None:
            return True
        for table, column in self.policy.rules:
            info = schema.table(table)
            if info is None:
                return True
            for col in info.columns if column == "*" else [info.column(column)]:
                kind = "" if col is None else col.type.casefold()
                if col is None or not any(t in kind for t in _TEXT_TYPES):
                    return True
        return False

    def model_error(self, sql: str, dialect: str, message: str) -> str | None:
        """What the model sees of the database error ``message`` for ``sql``: ``None`` (the
        message as it is) unless the statement may read protected data or its lineage is
        unknown; then only the error's class and a hint, since the message can quote a
        protected value (``error(email)``, a failed cast, a key in a constraint error)."""
        try:
            if not self._may_carry_values(sql, dialect):
                return None
        except Exception:  # fail closed
            pass
        return generic_error(message)

    def _may_carry_values(self, sql: str, dialect: str) -> bool:
        """Whether a failed ``sql`` may have met a protected value: it may read a protected
        table, or anything outside the inspected schema (a catalog table such as
        ``pg_stats``, a table function, another schema), or cannot be parsed. Short of
        that, an unknown lineage (an unresolved column) cannot involve protected data."""
        if self.touches_protected(sql, dialect):
            return True
        statements = [s for s in sqlglot.parse(sql, read=dialect) if s is not None]
        schema = self.schema.cached or self.schema.last
        if len(statements) != 1 or schema is None:
            return True
        statement = statements[0]
        ctes = {c.alias_or_name.casefold() for c in statement.find_all(exp.CTE)}
        defaults = {d.casefold() for d in (schema.default_schema, "main") if d}
        for table in statement.find_all(exp.Table):
            if not isinstance(table.this, exp.Identifier):
                return True  # a table function
            if table.name.casefold() in ctes and not table.db:
                continue
            if table.catalog or (table.db and table.db.casefold() not in defaults):
                return True
            if schema.table(table.name) is None:
                return True
        return False


_TEXT_TYPES = ("char", "text", "string", "clob", "json", "uuid", "enum", "xml", "blob", "bytea")
_PREFIX = re.compile(r"^(Database error \([^)]*\)):\s*")
_CLASS = re.compile(r"^([A-Z][A-Za-z]*(?: [A-Z][A-Za-z]*){0,3} Error):")


def generic_error(message: str) -> str:
    """``Database error (duckdb): Conversion Error`` and a hint, without the message."""
    text = (message.strip().splitlines() or [""])[0]
    head = "Database error"
    prefix = _PREFIX.match(text)
    if prefix:
        head, text = prefix.group(1), text[prefix.end() :]
    kind = _CLASS.match(text)
    if kind:
        head = f"{head}: {kind.group(1)}"
    return (
        f"{head}. [The database's message was withheld: the statement may read columns "
        "protected by the data policy, and error messages can quote their values. Check "
        "table and column names with describe_database, and the types that casts and "
        "functions on protected columns expect.]"
    )


def _strings_name(sql: str, dialect: str, tables: set[str]) -> bool:
    """Whether a string literal of ``sql`` mentions one of ``tables`` (SQL run from a string)."""
    try:
        statements = [s for s in sqlglot.parse(sql, read=dialect) if s is not None]
    except Exception:
        return True
    for statement in statements:
        for literal in statement.find_all(exp.Literal):
            if literal.is_string and any(t in literal.name.casefold() for t in tables):
                return True
    return False


def _numeric(value: Any) -> bool:
    if isinstance(value, bool):
        return False
    if isinstance(value, int | float | Decimal):
        return True
    return getattr(getattr(value, "dtype", None), "kind", "") in ("i", "u", "f", "c")


_PAST = {"mask": "masked", "hash": "hashed", "drop": "dropped"}


def _unique(name: str, taken: Mapping[str, str]) -> str:
    if name not in taken:
        return name
    n = 2
    while f"{name}#{n}" in taken:
        n += 1
    return f"{name}#{n}"


def _null(value: Any) -> bool:
    try:
        return value is None or bool(pd.isna(value))
    except (TypeError, ValueError):
        return False
