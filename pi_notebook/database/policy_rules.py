"""The data policy's rules: which columns are protected and how (``DataPolicy``), read from a
mapping or a YAML/JSON file (:func:`load_policy`).

Actions, from the weakest: ``hash``, ``mask``, ``drop`` (see :mod:`.policy` for what each shows
the model). A column derived from several protected columns gets the strongest of their
actions. The version is the file's, else a digest of the rules.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal, cast

from pi_notebook.errors import ConfigurationError

from .files import load_document
from .lineage import Source
from .schema import SchemaInfo

__all__ = ["ACTIONS", "Action", "DataPolicy", "load_policy"]

Action = Literal["mask", "hash", "drop"]
ACTIONS: tuple[Action, ...] = ("hash", "mask", "drop")  # weakest to strongest


@dataclass(frozen=True, kw_only=True)
class DataPolicy:
    """Protected columns and their actions. Keys are case-folded ``(table, column)``;
    ``column`` may be ``"*"`` (every column of the table)."""

    rules: Mapping[tuple[str, str], Action]
    version: str

    def action_for(self, table: str, column: str) -> Action | None:
        key = (table.casefold(), column.casefold())
        return self.rules.get(key) or self.rules.get((key[0], "*"))

    def strongest(self, sources: Iterable[Source]) -> tuple[Action | None, list[str]]:
        """The action for a column derived from ``sources``, and the protected ones among them."""
        best: Action | None = None
        named: list[str] = []
        for table, column in sorted(sources):
            action = self.action_for(table, column)
            if action is None:
                continue
            named.append(f"{table}.{column}")
            if best is None or ACTIONS.index(action) > ACTIONS.index(best):
                best = action
        return best, named

    @property
    def tables(self) -> set[str]:
        """The tables some rule protects (case-folded)."""
        return {table for table, _ in self.rules}

    def describe(self) -> str:
        """``customers.email (mask), customers.phone (drop)``."""
        return ", ".join(f"{t}.{c} ({a})" for (t, c), a in sorted(self.rules.items()))

    def problems(self, schema: SchemaInfo) -> list[str]:
        """Rules naming a table or column the database does not have (protection that would
        silently do nothing)."""
        out: list[str] = []
        for table, column in sorted(self.rules):
            info = schema.table(table)
            if info is None:
                out.append(f"no table {table}")
            elif column != "*" and info.column(column) is None:
                out.append(f"no column {table}.{column}")
        return out


def _rules_from(data: Any, where: str) -> tuple[dict[tuple[str, str], Action], str | None]:
    version: str | None = None
    if isinstance(data, Mapping) and "columns" in data:
        values = cast(Mapping[str, Any], data)
        unknown = set(values) - {"columns", "version"}
        if unknown:
            raise ConfigurationError(
                f"{where}: unknown keys {sorted(unknown)} (use columns, version)"
            )
        version = None if values.get("version") is None else str(values["version"])
        data = values["columns"]
    if not isinstance(data, Mapping):
        raise ConfigurationError(
            f"{where}: expected a mapping of 'table.column' to mask, hash or drop"
        )
    rules: dict[tuple[str, str], Action] = {}
    for key, action in cast(Mapping[Any, Any], data).items():
        parts = [p.strip().strip('"`') for p in str(key).split(".")]
        if len(parts) not in (2, 3) or not all(parts):
            raise ConfigurationError(
                f"{where}: {key!r} is not 'table.column' (or 'schema.table.column')"
            )
        if action not in ACTIONS:
            raise ConfigurationError(
                f"{where}: {key!r} has action {action!r}; use mask, hash or drop"
            )
        rules[(parts[-2].casefold(), parts[-1].casefold())] = cast(Action, action)
    if not rules:
        raise ConfigurationError(f"{where}: no columns are protected")
    return rules, version


def load_policy(source: DataPolicy | Mapping[str, Any] | str | Path) -> DataPolicy:
    """A policy from a mapping, a YAML/JSON file path or an existing policy.

    Raises:
        ConfigurationError: unreadable file, unknown action, a key that is not
            ``table.column``, or no rule at all.
    """
    if isinstance(source, DataPolicy):
        return source
    data, where = load_document(source, "data policy", inline="data_policy")
    rules, version = _rules_from(data, where)
    if version is None:
        canonical = json.dumps(
            sorted([list(k), v] for k, v in rules.items()), separators=(",", ":")
        )
        version = "sha256:" + hashlib.sha256(canonical.encode()).hexdigest()[:12]
    return DataPolicy(rules=rules, version=version)
