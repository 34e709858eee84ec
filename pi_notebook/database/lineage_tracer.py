"""The lineage tracer: which base columns each output column of a statement derives from.

:class:`Tracer` follows values (outputs of a scope, expressions, columns, whole rows,
positional columns, counts, base tables and views); the rows and their order come from
:class:`~.lineage_rows.RowSources`. :func:`~pi_notebook.database.lineage.trace` runs it.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from sqlglot import exp
from sqlglot.optimizer.qualify import qualify
from sqlglot.optimizer.scope import Scope, ScopeType, build_scope
from sqlglot.schema import MappingSchema

from .lineage_nodes import (
    CATALOG_COLUMNS,
    OPAQUE,
    VIEW_ROWS,
    alias_columns,
    find_source,
    first_line,
    leftmost,
    output_names,
    reads_only_arguments,
    renamed_index,
    strip_default_schema,
    view_query,
)
from .lineage_result import ColumnLineage, LineageUnknown, Source
from .lineage_rows import RowSources
from .schema import TableInfo
from .set_functions import function_name, set_returning

__all__ = ["Tracer"]


@dataclass
class Tracer(RowSources):
    """One statement's lineage: ``trace(statement)`` gives each output column's sources.

    ``views`` caches the lineage of views (shared between tracers of one schema)."""

    views: dict[str, dict[str, frozenset[Source]]] = field(default_factory=dict)
    result_rows: frozenset[Source] = frozenset()
    """After ``trace``: the base columns that decide the result's row count."""
    _busy: set[tuple[int, str]] = field(default_factory=set)
    _views_busy: set[str] = field(default_factory=set)

    # -- outputs of a scope ----------------------------------------------------------------
    def output(
        self, scope: Scope, name: str | None = None, index: int | None = None
    ) -> set[Source]:
        key = (id(scope.expression), f"{name}:{index}")
        if key in self._busy:  # a recursive CTE reading itself: its other branch has the lineage
            return set()
        self._busy.add(key)
        try:
            return self._output(scope, name, index)
        finally:
            self._busy.discard(key)

    def _output(self, scope: Scope, name: str | None, index: int | None) -> set[Source]:
        node = scope.expression
        if isinstance(node, exp.SetOperation):
            if node.args.get("by_name"):  # DuckDB's UNION [ALL] BY NAME: branches match by name
                if name is None:
                    names = output_names(node)
                    if index is None or index >= len(names):
                        raise LineageUnknown("a set operation BY NAME could not be followed")
                    name = names[index]
                found: set[Source] = set(self.rows(scope)[0])
                for branch in scope.set_operation_scopes:
                    found |= self.output(branch, name=name)
                return found
            if index is None and name is not None:
                index = self._position(node, name)
            found = set(self.rows(scope)[0])
            for branch in scope.set_operation_scopes:
                found |= self.output(branch, name=None if index is not None else name, index=index)
            return found
        if isinstance(node, exp.Select):
            selects = node.selects
            if index is not None:
                if index >= len(selects):
                    raise LineageUnknown("the branches of a set operation have different widths")
                targets = [selects[index]]
            else:
                folded = (name or "").casefold()
                targets = [s for s in selects if s.alias_or_name.casefold() == folded] or selects
            found = set(self.rows(scope)[0])  # every column depends on which rows there are
            for target in targets:
                found |= self.expression(scope, target)
            return found
        return self.expression(scope, node, skip_self=True)  # VALUES, UNNEST, LATERAL, ...

    def _position(self, node: exp.Expr, name: str) -> int:
        node = leftmost(node)
        if not isinstance(node, exp.Select):
            raise LineageUnknown("a set operation could not be followed")
        folded = name.casefold()
        for i, select in enumerate(node.selects):
            if select.alias_or_name.casefold() == folded:
                return i
        raise LineageUnknown(f"column {name} of a set operation could not be found")

    def all_outputs(self, scope: Scope) -> set[Source]:
        node = scope.expression
        if isinstance(node, exp.Select):
            found: set[Source] = set()
            for i in range(len(node.selects)):
                found |= self.output(scope, index=i)
            return found
        if isinstance(node, exp.SetOperation):
            found = set()
            for branch in scope.set_operation_scopes:
                found |= self.all_outputs(branch)
            return found
        return self.expression(scope, node, skip_self=True)

    # -- expressions -------------------------------------------------------------------------
    def expression(self, scope: Scope, root: exp.Expr, *, skip_self: bool = False) -> set[Source]:
        found: set[Source] = set()
        stack: list[exp.Expr] = list(root.iter_expressions()) if skip_self else [root]
        while stack:
            node = stack.pop()
            if isinstance(node, exp.Count):
                found |= self._counted(scope, node)
                continue
            if isinstance(node, OPAQUE):
                raise LineageUnknown(f"{node.key.upper()} hides which columns it reads")
            if isinstance(node, exp.Select | exp.SetOperation):
                inner = self.scopes.get(id(node))
                if inner is None:
                    raise LineageUnknown("a subquery could not be followed")
                found |= self.all_outputs(inner)
                continue
            if isinstance(node, exp.Column):
                found |= self.column(scope, node)
                continue
            if isinstance(node, exp.PositionalColumn):  # DuckDB: SELECT #3 FROM t
                found |= self.positional(scope, node)
                continue
            if isinstance(node, exp.TableColumn):  # DuckDB: SELECT c FROM t c (the whole row)
                found |= self.whole_row(scope, node.name)
                continue
            if isinstance(node, exp.Star):
                raise LineageUnknown("a * could not be expanded")
            stack.extend(node.iter_expressions())
        return found

    def column(self, scope: Scope, column: exp.Column) -> set[Source]:
        if isinstance(column.this, exp.Star):  # t.* inside a function: the whole row
            return self.whole_row(scope, column.table)
        if not column.table:  # not tied to a source by qualify: a whole-row reference, or unknown
            return self.whole_row(scope, column.name)
        owner, source = find_source(scope, column.table)
        if source is None:
            raise LineageUnknown(f"column {column.sql(self.dialect)} could not be resolved")
        renamed = alias_columns(owner, column.table)
        if isinstance(source, Scope):
            canonical = self.canonical(source)
            if canonical is None:
                return set()
            if renamed and isinstance(canonical.expression, exp.Select | exp.SetOperation):
                # FROM x AS y(a, b, c): y's columns are x's outputs by position (VALUES,
                # UNNEST and the like give every column all they read, whatever its name)
                return self.output(
                    canonical,
                    index=renamed_index(output_names(canonical.expression), renamed, column.name),
                )
            return self.output(canonical, name=column.name)
        return self.base_column(owner, source, column.name, renamed=renamed)

    def positional(self, scope: Scope, node: exp.PositionalColumn) -> set[Source]:
        """``#n``: the n-th column of the FROM clause, resolved when it has a single source."""
        position = node.this
        if not (isinstance(position, exp.Literal) and position.is_int):
            raise LineageUnknown("a positional column could not be resolved")
        index = int(position.name) - 1
        if len(scope.selected_sources) != 1 or index < 0:
            raise LineageUnknown("a positional column over several sources could not be resolved")
        [(_, source)] = scope.selected_sources.values()
        if isinstance(source, Scope):
            canonical = self.canonical(source)
            if canonical is None:
                raise LineageUnknown("a positional column could not be resolved")
            if index >= len(output_names(canonical.expression)):
                raise LineageUnknown(f"column #{index + 1} is not in the source")
            return self.output(canonical, index=index)
        if not isinstance(source.this, exp.Identifier):
            raise LineageUnknown("a positional column over a table function could not be resolved")
        self._check_table(source)
        info = self.schema.table(source.name)
        if info is None or index >= len(info.columns):
            raise LineageUnknown(f"column #{index + 1} of {source.name} could not be resolved")
        return self.base_column(scope, source, info.columns[index].name)

    def canonical(self, source: Scope) -> Scope | None:
        """The scope of the tree that ``source`` stands for. A recursive CTE's reference to
        itself gets a stand-in scope from sqlglot: it is mapped to the tree's scope of the same
        query, or (when there is none) carries nothing new, since it only repeats what the
        CTE's branches produce, and those are traced."""
        canonical = self.scopes.get(id(source.expression))
        if canonical is not None:
            return canonical
        if source.scope_type == ScopeType.CTE:
            return None
        raise LineageUnknown("a source of the statement could not be followed")

    def whole_row(self, scope: Scope, alias: str) -> set[Source]:
        owner, source = find_source(scope, alias)
        if source is None:
            raise LineageUnknown(f"{alias} could not be resolved to a column or a table")
        if isinstance(source, Scope):
            canonical = self.canonical(source)
            return set() if canonical is None else self.all_outputs(canonical)
        return self.base_column(owner, source, "*")

    def _counted(self, scope: Scope, count: exp.Count) -> set[Source]:
        """What a ``COUNT`` shows of its argument: nothing when it counts rows (``*``) or the
        values of a column as stored (``count(email)``, ``count(DISTINCT email)``); else
        (``count(CASE WHEN g < ascii(email) ...)``, a column computed in a subquery) the
        sources of what it counts, since over generated rows a count is a value."""
        argument = count.this
        parts = argument.expressions if isinstance(argument, exp.Distinct) else [argument]
        if all(p is None or isinstance(p, exp.Star) or self._stored(scope, p) for p in parts):
            return set()
        return self.expression(scope, count, skip_self=True)

    def _stored(self, scope: Scope, node: exp.Expr) -> bool:
        """Whether ``node`` is a constant or a column whose values are a base table's."""
        if isinstance(node, exp.Literal | exp.Null | exp.Boolean):
            return True
        return self.stored_column(scope, node) is not None

    def stored_column(self, scope: Scope, node: exp.Expr) -> Source | None:
        """The base-table column whose values ``node`` is, unchanged (through subqueries that
        pass it on), or ``None``: an expression, a view's column, a set operation."""
        if not isinstance(node, exp.Column) or not node.table or isinstance(node.this, exp.Star):
            return None
        owner, source = find_source(scope, node.table)
        renamed = alias_columns(owner, node.table)
        if isinstance(source, exp.Table):
            info = self.schema.table(source.name)
            if not isinstance(source.this, exp.Identifier) or info is None or info.kind == "view":
                return None
            found = self.base_column(owner, source, node.name, renamed=renamed)
            return next(iter(found)) if len(found) == 1 else None
        canonical = None if source is None else self.canonical(source)
        if canonical is None or renamed or not isinstance(canonical.expression, exp.Select):
            return None
        folded = node.name.casefold()
        targets = [s for s in canonical.expression.selects if s.alias_or_name.casefold() == folded]
        return self.stored_column(canonical, targets[0].unalias()) if len(targets) == 1 else None

    # -- base tables and views ---------------------------------------------------------------
    def base_column(
        self, scope: Scope, table: exp.Table, column: str, *, renamed: list[str] | None = None
    ) -> set[Source]:
        if not isinstance(table.this, exp.Identifier):  # a table function: what its args read
            return self.expression(scope, table.this)
        self._check_table(table)
        name = table.name
        info = self.schema.table(name)
        if info is None:  # a catalog table: no row data of the user's tables
            return set()
        if renamed and column != "*":  # FROM t AS x(a, b, c): t's columns by position
            original = [c.name for c in info.columns]
            column = original[renamed_index(original, renamed, column)]
        if info.kind == "view":
            return self.view_column(info, column)
        if column == "*":
            return {(info.name.casefold(), c.name.casefold()) for c in info.columns}
        found = info.column(column)
        if found is None:
            raise LineageUnknown(f"column {name}.{column} is not in the inspected schema")
        return {(info.name.casefold(), found.name.casefold())}

    def _check_table(self, table: exp.Table) -> None:
        if table.catalog or table.db:
            raise LineageUnknown(f"table {table.sql(self.dialect)} is outside the inspected schema")
        if table.name.casefold() not in CATALOG_COLUMNS and self.schema.table(table.name) is None:
            raise LineageUnknown(f"table {table.name} is not in the inspected schema")

    def view_column(self, view: TableInfo, column: str) -> set[Source]:
        lineage = self.view_lineage(view)
        if column == "*":
            return set().union(*lineage.values()) if lineage else set()
        sources = lineage.get(column.casefold())
        if sources is None:
            raise LineageUnknown(f"column {view.name}.{column} is not in the view")
        return set(sources)

    def view_lineage(self, view: TableInfo) -> dict[str, frozenset[Source]]:
        key = view.name.casefold()
        cached = self.views.get(key)
        if cached is not None:
            return cached
        if key in self._views_busy or not view.definition:
            raise LineageUnknown(f"the definition of view {view.name} is not available")
        self._views_busy.add(key)
        try:
            inner = Tracer(
                self.schema, self.dialect, views=self.views, _views_busy=self._views_busy
            )
            outputs = inner.trace(view_query(view.definition, self.dialect))
        finally:
            self._views_busy.discard(key)
        if len(outputs) != len(view.columns):
            raise LineageUnknown(f"view {view.name} could not be matched to its definition")
        lineage = {c.name.casefold(): o.sources for c, o in zip(view.columns, outputs, strict=True)}
        lineage[VIEW_ROWS] = inner.result_rows
        self.views[key] = lineage
        return lineage

    # -- a whole statement -------------------------------------------------------------------
    def trace(self, statement: exp.Expr) -> list[ColumnLineage]:
        while isinstance(statement, exp.Subquery | exp.Paren) and isinstance(
            statement.this, exp.Query
        ):
            statement = statement.this
        if not isinstance(statement, exp.Select | exp.SetOperation):
            raise LineageUnknown("the statement is not a SELECT")
        if any(True for _ in statement.find_all(*OPAQUE)):
            raise LineageUnknown("PIVOT or COLUMNS(...) hides which columns the result reads")
        for call in statement.find_all(exp.Func):
            if not reads_only_arguments(call, self.dialect):
                raise LineageUnknown(
                    f"function {function_name(call)} is not known to read only its arguments "
                    "(it may run SQL from a string or read files or statistics)"
                )
        strip_default_schema(statement, self.schema.default_schema)
        ctes = {c.alias_or_name.casefold() for c in statement.find_all(exp.CTE)}
        for table in statement.find_all(exp.Table):  # a clear reason before qualify trips on it
            if isinstance(table.this, exp.Identifier) and table.name.casefold() not in ctes:
                self._check_table(table)
        try:
            qualified = qualify(
                statement,
                schema=MappingSchema(self.schema.column_types(), dialect=self.dialect),
                dialect=self.dialect,
                validate_qualify_columns=False,
                quote_identifiers=False,
            )
            root = build_scope(qualified)
        except Exception as exc:
            raise LineageUnknown(
                f"the statement could not be analysed ({first_line(exc)})"
            ) from None
        if root is None:
            raise LineageUnknown("the statement could not be analysed")
        self.scopes.update({id(s.expression): s for s in root.traverse()})
        for scope in self.scopes.values():
            for source in scope.sources.values():
                if isinstance(source, exp.Table) and isinstance(source.this, exp.Identifier):
                    self._check_table(source)
                elif isinstance(source, exp.Table) and not set_returning(source.this):
                    raise LineageUnknown(
                        f"table function {function_name(source.this)} may read what the "
                        "statement does not name (table contents, storage statistics)"
                    )
        left = leftmost(qualified)
        if not isinstance(left, exp.Select):
            raise LineageUnknown("the statement could not be analysed")
        sized, ordered = self.rows(root)  # the result's order shows in every column
        self.result_rows = self.counts.get(id(root.expression), sized)
        selects = qualified.selects if isinstance(qualified, exp.Select) else []
        return [
            ColumnLineage(
                name=name,
                sources=frozenset(self.output(root, index=i)) | ordered,
                stored=self.stored_column(root, selects[i].unalias()) if selects else None,
            )
            for i, name in enumerate(output_names(qualified))
        ]
