"""The semantic file: what the schema does not say (descriptions, a glossary, example queries).

A YAML (or JSON) file, checked when the extension is built::

    description: A small online shop.          # optional, about the whole database
    tables:
      customers:
        description: People who signed up.
        columns:
          email: Login and contact address.
    glossary:
      AOV: Average order value, revenue divided by the number of orders.
    examples:
      - question: How many customers per country?
        sql: SELECT country, count(*) FROM customers GROUP BY country

Unknown keys are errors (a typo must not silently drop a description). Names of tables and
columns are matched case-insensitively against the database when it is described; names that
match nothing are reported as warnings, not errors (the file may describe more than one
database).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from pi_notebook.errors import ConfigurationError

from .files import load_document
from .schema import SchemaInfo

__all__ = ["Example", "SemanticLayer", "TableSemantics", "load_semantic", "sample_semantic_path"]


def sample_semantic_path() -> Path:
    """The semantic file of the bundled sample database (``pi_notebook/sample_semantic.yaml``)."""
    return Path(__file__).resolve().parents[1] / "sample_semantic.yaml"


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class TableSemantics(_Strict):
    description: str | None = None
    columns: dict[str, str] = Field(default_factory=dict[str, str])


class Example(_Strict):
    question: str
    sql: str


class SemanticLayer(_Strict):
    """Descriptions, glossary and examples, as loaded from the semantic file."""

    description: str | None = None
    tables: dict[str, TableSemantics] = Field(default_factory=dict[str, TableSemantics])
    glossary: dict[str, str] = Field(default_factory=dict[str, str])
    examples: list[Example] = Field(default_factory=list[Example])

    def table(self, name: str) -> TableSemantics | None:
        folded = name.casefold()
        return next((t for n, t in self.tables.items() if n.casefold() == folded), None)

    def column(self, table: str, column: str) -> str | None:
        semantics = self.table(table)
        if semantics is None:
            return None
        folded = column.casefold()
        return next((d for n, d in semantics.columns.items() if n.casefold() == folded), None)

    def examples_for(self, tables: list[str]) -> list[Example]:
        """Examples whose SQL names one of ``tables`` (all examples for an empty list)."""
        if not tables:
            return list(self.examples)
        wanted = [t.casefold() for t in tables]
        return [e for e in self.examples if any(t in e.sql.casefold() for t in wanted)]

    def warnings(self, schema: SchemaInfo) -> list[str]:
        """Tables and columns the file describes that the database does not have."""
        out: list[str] = []
        for name, semantics in self.tables.items():
            table = schema.table(name)
            if table is None:
                out.append(f"semantic file: no table {name!r} in the database")
                continue
            out.extend(
                f"semantic file: no column {name}.{column} in the database"
                for column in semantics.columns
                if table.column(column) is None
            )
        return out


def load_semantic(source: str | Path | SemanticLayer | dict[str, Any]) -> SemanticLayer:
    """A semantic layer from a file path (YAML or JSON), a dict, or an existing layer.

    Raises:
        ConfigurationError: the file is missing or unreadable, or its content does not have
            the shape above (the message names the file and the first problems).
    """
    if isinstance(source, SemanticLayer):
        return source
    data, where = load_document(source, "semantic", inline="semantic layer")
    if data is None:
        data = {}
    try:
        return SemanticLayer.model_validate(data)
    except ValidationError as exc:
        problems = "; ".join(
            f"{'.'.join(str(p) for p in e['loc']) or '(top)'}: {e['msg']}" for e in exc.errors()[:5]
        )
        raise ConfigurationError(f"The {where} is not valid: {problems}") from None
