"""Column lineage of a read: which table columns each output column of a statement derives from.

Built on sqlglot's optimizer: ``qualify`` (with the engine's schema, so ``SELECT *`` expands and
every column is tied to its source) and ``build_scope`` (CTEs, derived tables, subqueries,
set operations, lateral joins and table functions as scopes). :func:`trace` follows each output
column through aliases, expressions, functions, aggregates, window functions, ``CASE``,
CTEs, derived tables, scalar subqueries, ``UNION``/``INTERSECT``/``EXCEPT`` branches, views
(through their definitions) and whole-row references (``to_json(c)``, ``row_to_json(c)``,
``c.*``, DuckDB's ``SELECT c FROM t c``), down to base-table columns.

Values also reach the output through *which rows* there are and *in which order*, so each
scope (a SELECT, a set operation, a derived table, a subquery) has two more sets of sources,
given to every column it outputs (:meth:`_Tracer.rows`):

* *sized*: what decides which rows the scope has, and so how many. The arguments of its table
  functions and of set-returning functions in its projection
  (``(SELECT count(*) FROM generate_series(1, ascii(substr(email, 1, 1))))`` is derived from
  ``email``, and so is ``count(*)`` over ``unnest(string_to_array(email, NULL))``, a length);
  its ``LIMIT``/``OFFSET``/``FETCH`` expressions; each condition (``WHERE``, ``ON``,
  ``HAVING``, ``QUALIFY``) that relates rows to other rows (columns of two sources, an outer
  row, a subquery, a window function, a derived table whose rows are not one table's rows:
  ``g = ascii(substr(email, i, 1))``, ``c2.email < c.email``, ``row_number() OVER (ORDER BY
  email) = 1``); what sizes its sources and the subqueries of its conditions; the values
  compared by ``UNION``, ``INTERSECT``, ``EXCEPT``. :attr:`Lineage.rows` is this set for the result: a row count is
  then a derived value, not a count of rows.
* *ordered*: what decides the order of its rows: ``ORDER BY``, window partitions and orders
  (``rank() OVER (ORDER BY email)``), ``GROUP BY`` and ``DISTINCT`` keys (engines sort to
  group), and the order of its sources unless it aggregates. The result's order shows in
  every column; a ``LIMIT``/``OFFSET`` turns order into which rows pass; an aggregate that
  shows order (``string_agg``, ``list``) or a window function takes its sources' order.

Two rules make the result safe to act on:

* A column ``COUNT`` counts as stored (``count(email)``, ``count(DISTINCT email)``, through
  subqueries that pass it on unchanged) is not a source: a count is not a value of the column
  it counts. Everything else that mentions a column derives from it (``length(email)`` does,
  and so does ``count(CASE WHEN g < ascii(email) THEN 1 END)``: over generated rows a count
  is a value). So ``count(*) FROM customers``, ``count(DISTINCT email)`` and ``city,
  count(*) ... GROUP BY city`` show their values; a ``count(*)`` over rows sized by a column
  does not.
* Anything the tracer does not understand makes the lineage *unknown* (with the reason): a
  table missing from the schema (catalog tables such as ``pg_stats`` included), a column it
  cannot resolve, an unexpanded ``*``, ``PIVOT``, DuckDB's ``COLUMNS(...)``, a table function
  other than a generator or unnest (``pragma_storage_info``, ``duckdb_columns()``,
  ``query(...)``: they read what the statement does not name), a function the classifier does
  not know to be pure (``query_to_xml('SELECT ...')``, ``pg_read_file``, a user-defined one),
  a statement that is not a query, a parse failure. The caller must then show no values at all.

What it does not cover, by design: conditions that compare columns of one source with
constants. ``WHERE email LIKE 'a%'`` tells whether each row shown matched a condition the
model wrote, and the row count how many did: at most a few bits per query (one per row
shown), never a value. Conditions that relate a column to another source are covered above,
since a generated series (or any other table) turns that membership into values. Nor does it
cover the order an engine happens to return rows in when nothing orders them: a condition on
an indexed protected column can make the engine read the index (SQLite, ``WHERE email > ''``
with a UNIQUE ``email``), so rows come back in that column's order. That ranks the table's own
rows against each other; ranking them against chosen values needs rows of another source,
which is covered.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field

import sqlglot
from sqlglot import exp
from sqlglot.optimizer.qualify import qualify
from sqlglot.optimizer.scope import Scope, ScopeType, build_scope
from sqlglot.schema import MappingSchema

from pi_notebook.sql import functions

from .schema import SchemaInfo, TableInfo
from .set_functions import ORDER_FREE, function_name, set_returning

__all__ = ["ColumnLineage", "Lineage", "Source", "referenced_tables", "trace"]

Source = tuple[str, str]
"""(table, column) of a base table, both case-folded."""

# Catalog tables with no row data of the user's tables: readable without lineage.
_CATALOG = {"sqlite_master": ("type", "name", "tbl_name", "rootpage", "sql")}
_CATALOG["sqlite_schema"] = _CATALOG["sqlite_master"]
_OPAQUE = (exp.Pivot, exp.UnpivotColumns, exp.Columns)
_VIEW_ROWS = "\0rows"  # in a view's lineage: what decides which rows it has


@dataclass(frozen=True, kw_only=True)
class ColumnLineage:
    """One output column: its name in the statement and the base columns it derives from."""

    name: str
    sources: frozenset[Source] = frozenset()
    stored: Source | None = None
    """The base column whose values this column is, unchanged (``SELECT email``), if any."""


@dataclass(frozen=True, kw_only=True)
class Lineage:
    """The lineage of every output column, or ``columns=None`` and the ``reason`` it is unknown."""

    columns: tuple[ColumnLineage, ...] | None
    reason: str | None = None
    rows: frozenset[Source] = frozenset()
    """The base columns that decide how many rows the result has (already among every
    column's sources): a value shown as a row count is derived from them."""

    @property
    def known(self) -> bool:
        return self.columns is not None


class _Unknown(Exception):
    """Lineage cannot be established (the message says why)."""


@dataclass
class _Tracer:
    schema: SchemaInfo
    dialect: str
    views: dict[str, dict[str, frozenset[Source]]] = field(default_factory=dict)
    scopes: dict[int, Scope] = field(default_factory=dict)
    _busy: set[tuple[int, str]] = field(default_factory=set)
    _views_busy: set[str] = field(default_factory=set)
    _rows: dict[int, tuple[frozenset[Source], frozenset[Source]]] = field(default_factory=dict)
    _rows_busy: set[int] = field(default_factory=set)
    _counts: dict[int, frozenset[Source]] = field(default_factory=dict)
    result_rows: frozenset[Source] = frozenset()

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
                    names = _names(node)
                    if index is None or index >= len(names):
                        raise _Unknown("a set operation BY NAME could not be followed")
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
                    raise _Unknown("the branches of a set operation have different widths")
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
        node = _leftmost(node)
        if not isinstance(node, exp.Select):
            raise _Unknown("a set operation could not be followed")
        folded = name.casefold()
        for i, select in enumerate(node.selects):
            if select.alias_or_name.casefold() == folded:
                return i
        raise _Unknown(f"column {name} of a set operation could not be found")

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
            if isinstance(node, _OPAQUE):
                raise _Unknown(f"{node.key.upper()} hides which columns it reads")
            if isinstance(node, exp.Select | exp.SetOperation):
                inner = self.scopes.get(id(node))
                if inner is None:
                    raise _Unknown("a subquery could not be followed")
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
                raise _Unknown("a * could not be expanded")
            stack.extend(node.iter_expressions())
        return found

    def column(self, scope: Scope, column: exp.Column) -> set[Source]:
        if isinstance(column.this, exp.Star):  # t.* inside a function: the whole row
            return self.whole_row(scope, column.table)
        if not column.table:  # not tied to a source by qualify: a whole-row reference, or unknown
            return self.whole_row(scope, column.name)
        owner, source = self._find(scope, column.table)
        if source is None:
            raise _Unknown(f"column {column.sql(self.dialect)} could not be resolved")
        renamed = _alias_columns(owner, column.table)
        if isinstance(source, Scope):
            canonical = self._canonical(source)
            if canonical is None:
                return set()
            if renamed and isinstance(canonical.expression, exp.Select | exp.SetOperation):
                # FROM x AS y(a, b, c): y's columns are x's outputs by position (VALUES,
                # UNNEST and the like give every column all they read, whatever its name)
                return self.output(
                    canonical,
                    index=_renamed_index(_names(canonical.expression), renamed, column.name),
                )
            return self.output(canonical, name=column.name)
        return self.base_column(owner, source, column.name, renamed=renamed)

    def positional(self, scope: Scope, node: exp.PositionalColumn) -> set[Source]:
        """``#n``: the n-th column of the FROM clause, resolved when it has a single source."""
        position = node.this
        if not (isinstance(position, exp.Literal) and position.is_int):
            raise _Unknown("a positional column could not be resolved")
        index = int(position.name) - 1
        if len(scope.selected_sources) != 1 or index < 0:
            raise _Unknown("a positional column over several sources could not be resolved")
        [(_, source)] = scope.selected_sources.values()
        if isinstance(source, Scope):
            canonical = self._canonical(source)
            if canonical is None:
                raise _Unknown("a positional column could not be resolved")
            if index >= len(_names(canonical.expression)):
                raise _Unknown(f"column #{index + 1} is not in the source")
            return self.output(canonical, index=index)
        if not isinstance(source.this, exp.Identifier):
            raise _Unknown("a positional column over a table function could not be resolved")
        self._check_table(source)
        info = self.schema.table(source.name)
        if info is None or index >= len(info.columns):
            raise _Unknown(f"column #{index + 1} of {source.name} could not be resolved")
        return self.base_column(scope, source, info.columns[index].name)

    def _canonical(self, source: Scope) -> Scope | None:
        """The scope of the tree that ``source`` stands for. A recursive CTE's reference to
        itself gets a stand-in scope from sqlglot: it is mapped to the tree's scope of the same
        query, or (when there is none) carries nothing new, since it only repeats what the
        CTE's branches produce, and those are traced."""
        canonical = self.scopes.get(id(source.expression))
        if canonical is not None:
            return canonical
        if source.scope_type == ScopeType.CTE:
            return None
        raise _Unknown("a source of the statement could not be followed")

    def whole_row(self, scope: Scope, alias: str) -> set[Source]:
        owner, source = self._find(scope, alias)
        if source is None:
            raise _Unknown(f"{alias} could not be resolved to a column or a table")
        if isinstance(source, Scope):
            canonical = self._canonical(source)
            return set() if canonical is None else self.all_outputs(canonical)
        return self.base_column(owner, source, "*")

    @staticmethod
    def _find(scope: Scope, alias: str) -> tuple[Scope, exp.Table | Scope | None]:
        current: Scope | None = scope
        while current is not None:
            source = current.sources.get(alias)
            if isinstance(source, exp.Table | Scope):
                return current, source
            current = current.parent
        return scope, None

    # -- rows: which rows a scope has, and in which order ------------------------------------
    def rows(self, scope: Scope) -> tuple[frozenset[Source], frozenset[Source]]:
        """``(sized, ordered)`` of a scope: the base columns that decide which rows it has
        (and so how many), and those that decide their order (see the module docstring)."""
        key = id(scope.expression)
        cached = self._rows.get(key)
        if cached is not None:
            return cached
        if key in self._rows_busy:  # a recursive CTE reading itself: its branches are traced
            return frozenset(), frozenset()
        self._rows_busy.add(key)
        try:
            sized, ordered = self._rows_of(scope)
        finally:
            self._rows_busy.discard(key)
        result = (frozenset(sized), frozenset(ordered))
        self._rows[key] = result
        return result

    def _rows_of(self, scope: Scope) -> tuple[set[Source], set[Source]]:
        node = scope.expression
        sized: set[Source] = set()
        ordered: set[Source] = set()
        if isinstance(node, exp.SetOperation):
            for branch in scope.set_operation_scopes:
                branch_sized, branch_ordered = self.rows(branch)
                sized |= branch_sized
                ordered |= branch_ordered
            if not (isinstance(node, exp.Union) and node.args.get("distinct") is False):
                sized |= self.all_outputs(scope)  # UNION, INTERSECT, EXCEPT compare values
            if node.args.get("order"):
                ordered |= self.all_outputs(scope)
            return self._bounded(scope, node, sized, ordered), ordered
        if isinstance(node, exp.Values):
            return sized, ordered
        if not isinstance(node, exp.Select):  # UNNEST and the like: its arguments size it
            return self.expression(scope, node, skip_self=True), ordered
        inherited: set[Source] = set()
        for _, source in scope.selected_sources.values():
            if isinstance(source, Scope):
                canonical = self._canonical(source)
                if canonical is not None:
                    source_sized, source_ordered = self.rows(canonical)
                    sized |= source_sized
                    inherited |= source_ordered
            elif not isinstance(source.this, exp.Identifier):  # a table function's arguments
                sized |= self.expression(scope, source.this)
            else:
                info = self.schema.table(source.name)
                if info is not None and info.kind == "view":
                    sized |= self.view_lineage(info).get(_VIEW_ROWS, frozenset())
        aggregating = bool(node.args.get("group"))
        order_shown = False  # an aggregate or window function shows the order it reads
        for part in _own_nodes(node.selects):
            if isinstance(part, exp.Window):
                order_shown = True
            elif isinstance(part, exp.AggFunc):
                aggregating = True
                order_shown |= not isinstance(part, ORDER_FREE)
            elif isinstance(part, exp.Anonymous):  # maybe an aggregate: assume it shows order
                order_shown = True
            if set_returning(part):
                sized |= self.expression(scope, part)
        sized |= self._predicates(scope, node)
        ordered |= self._order(scope, node)
        if order_shown:
            sized |= inherited
        if not aggregating:
            ordered |= inherited
        return self._bounded(scope, node, sized, ordered), ordered

    def _bounded(
        self, scope: Scope, node: exp.Expr, sized: set[Source], ordered: set[Source]
    ) -> set[Source]:
        """``LIMIT``/``OFFSET``/``FETCH``: which rows pass derives from their expressions, and
        from the order they cut; how many, from their expressions alone (kept for the result's
        row count: ``ORDER BY email LIMIT 10`` has 10 rows whatever the emails)."""
        bounds = [node.args.get(k) for k in ("limit", "offset")]
        bounds = [b for b in bounds if isinstance(b, exp.Expr)]
        for bound in bounds:
            sized |= self.expression(scope, bound)
        self._counts[id(node)] = frozenset(sized)
        return sized | ordered if bounds else sized

    def _predicates(self, scope: Scope, node: exp.Select) -> set[Source]:
        """The sources of each condition (``WHERE``, ``ON``, ``HAVING``, ``QUALIFY``) that
        relates rows to other rows (:meth:`_condition`), and what decides the rows of the
        subqueries in any condition. A condition on one table's rows and constants (``email
        LIKE 'a%'``) is left out: it tells at most whether each row matched, the documented
        predicate channel."""
        conditions: list[exp.Expr] = []
        for key in ("where", "having", "qualify"):
            clause = node.args.get(key)
            if isinstance(clause, exp.Expr):
                conditions.append(clause.this)
        for join in node.args.get("joins") or []:
            for key in ("on", "using", "match_condition"):
                part = join.args.get(key)
                if isinstance(part, exp.Expr):
                    conditions.append(part)
                elif isinstance(part, list) and part:
                    raise _Unknown("a join condition could not be followed")
        found: set[Source] = set()
        for condition in conditions:
            parts = list(condition.flatten()) if isinstance(condition, exp.And) else [condition]
            for part in parts:
                found |= self._condition(scope, part)
        return found

    def _condition(self, scope: Scope, condition: exp.Expr) -> set[Source]:
        """What a condition tells: its sources when it relates rows to other rows (columns of
        two sources, an outer row, a subquery, a window function, a source that is not one
        table's rows), and in any case what decides the rows of its subqueries."""
        owners: set[tuple[int, str]] = set()
        subqueries: list[exp.Expr] = []
        relates = False
        stack: list[exp.Expr] = [condition]
        while stack:
            node = stack.pop()
            if isinstance(node, exp.Select | exp.SetOperation):
                subqueries.append(node)
                continue
            if isinstance(node, exp.Window):  # a rank compares each row with the others
                relates = True
            if isinstance(node, exp.Column):
                owner, source = self._find(scope, node.table)
                owners.add((id(owner.expression), node.table.casefold()))
                relates |= source is None or not self._one_table(source)
                continue
            stack.extend(node.iter_expressions())
        found: set[Source] = set()
        for subquery in subqueries:
            inner = self.scopes.get(id(subquery))
            if inner is None:
                raise _Unknown("a subquery in a condition could not be followed")
            found |= self.rows(inner)[0]
        if relates or len(owners) + (1 if subqueries else 0) >= 2:
            found |= self.expression(scope, condition)
        return found

    def _one_table(self, source: exp.Table | Scope) -> bool:
        """Whether each row of ``source`` is one row of one base table (a table, or a query
        of one such source without a join, generator, set-returning or window function): a
        condition on its columns alone compares one row's values with constants."""
        if isinstance(source, exp.Table):
            if not isinstance(source.this, exp.Identifier):
                return False
            info = self.schema.table(source.name)
            return info is None or info.kind != "view"  # a view may join or generate
        canonical = self._canonical(source)
        node = None if canonical is None else canonical.expression
        if canonical is None or not isinstance(node, exp.Select):
            return False
        sources = list(canonical.selected_sources.values())
        if len(sources) != 1 or node.args.get("joins"):
            return False
        if any(isinstance(p, exp.Window) or set_returning(p) for p in _own_nodes(node.selects)):
            return False
        return self._one_table(sources[0][1])

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
        owner, source = self._find(scope, node.table)
        renamed = _alias_columns(owner, node.table)
        if isinstance(source, exp.Table):
            info = self.schema.table(source.name)
            if not isinstance(source.this, exp.Identifier) or info is None or info.kind == "view":
                return None
            found = self.base_column(owner, source, node.name, renamed=renamed)
            return next(iter(found)) if len(found) == 1 else None
        canonical = None if source is None else self._canonical(source)
        if canonical is None or renamed or not isinstance(canonical.expression, exp.Select):
            return None
        folded = node.name.casefold()
        targets = [s for s in canonical.expression.selects if s.alias_or_name.casefold() == folded]
        return self.stored_column(canonical, targets[0].unalias()) if len(targets) == 1 else None

    def _order(self, scope: Scope, node: exp.Select) -> set[Source]:
        """What decides the order of a SELECT's rows: ``ORDER BY``, window partitions and
        orders, ``GROUP BY`` and ``DISTINCT`` keys (engines sort to group)."""
        keys: list[exp.Expr] = []
        order = node.args.get("order")
        if isinstance(order, exp.Order):
            keys += [o.this if isinstance(o, exp.Ordered) else o for o in order.expressions]
        group = node.args.get("group")
        if isinstance(group, exp.Group):
            keys += list(group.expressions)
        distinct = node.args.get("distinct")
        if isinstance(distinct, exp.Distinct):
            on = distinct.args.get("on")
            keys += list(on.expressions) if isinstance(on, exp.Expr) else list(node.selects)
        found: set[Source] = set()
        for key in keys:
            found |= self._order_key(scope, node, key)
        windows: list[exp.Expr] = list(node.args.get("windows") or [])
        windows += [w for w in _own_nodes([*node.selects, *keys]) if isinstance(w, exp.Window)]
        for window in windows:
            for key in ("partition_by", "order"):
                part = window.args.get(key)
                for item in part if isinstance(part, list) else [part]:
                    if isinstance(item, exp.Expr):
                        found |= self.expression(scope, item)
        return found

    def _order_key(self, scope: Scope, node: exp.Select, key: exp.Expr) -> set[Source]:
        """An ``ORDER BY``/``GROUP BY`` key: an output alias, a position, ``ALL`` or an
        expression."""
        selects = node.selects
        if isinstance(key, exp.Var) and key.name.casefold() == "all":
            targets = list(selects)
        elif isinstance(key, exp.Literal) and key.is_int:
            position = int(key.name) - 1
            if not 0 <= position < len(selects):
                raise _Unknown("an ORDER BY position could not be resolved")
            targets = [selects[position]]
        elif isinstance(key, exp.Column) and not key.table:
            folded = key.name.casefold()
            targets = [s for s in selects if s.alias_or_name.casefold() == folded]
            if not targets:
                return self.expression(scope, key)
        else:
            return self.expression(scope, key)
        found: set[Source] = set()
        for target in targets:
            found |= self.expression(scope, target)
        return found

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
            column = original[_renamed_index(original, renamed, column)]
        if info.kind == "view":
            return self.view_column(info, column)
        if column == "*":
            return {(info.name.casefold(), c.name.casefold()) for c in info.columns}
        found = info.column(column)
        if found is None:
            raise _Unknown(f"column {name}.{column} is not in the inspected schema")
        return {(info.name.casefold(), found.name.casefold())}

    def _check_table(self, table: exp.Table) -> None:
        if table.catalog or table.db:
            raise _Unknown(f"table {table.sql(self.dialect)} is outside the inspected schema")
        if table.name.casefold() not in _CATALOG and self.schema.table(table.name) is None:
            raise _Unknown(f"table {table.name} is not in the inspected schema")

    def view_column(self, view: TableInfo, column: str) -> set[Source]:
        lineage = self.view_lineage(view)
        if column == "*":
            return set().union(*lineage.values()) if lineage else set()
        sources = lineage.get(column.casefold())
        if sources is None:
            raise _Unknown(f"column {view.name}.{column} is not in the view")
        return set(sources)

    def view_lineage(self, view: TableInfo) -> dict[str, frozenset[Source]]:
        key = view.name.casefold()
        cached = self.views.get(key)
        if cached is not None:
            return cached
        if key in self._views_busy or not view.definition:
            raise _Unknown(f"the definition of view {view.name} is not available")
        self._views_busy.add(key)
        try:
            inner = _Tracer(
                self.schema, self.dialect, views=self.views, _views_busy=self._views_busy
            )
            outputs = inner.trace(_view_query(view.definition, self.dialect))
        finally:
            self._views_busy.discard(key)
        if len(outputs) != len(view.columns):
            raise _Unknown(f"view {view.name} could not be matched to its definition")
        lineage = {c.name.casefold(): o.sources for c, o in zip(view.columns, outputs, strict=True)}
        lineage[_VIEW_ROWS] = inner.result_rows
        self.views[key] = lineage
        return lineage

    # -- a whole statement -------------------------------------------------------------------
    def trace(self, statement: exp.Expr) -> list[ColumnLineage]:
        while isinstance(statement, exp.Subquery | exp.Paren) and isinstance(
            statement.this, exp.Query
        ):
            statement = statement.this
        if not isinstance(statement, exp.Select | exp.SetOperation):
            raise _Unknown("the statement is not a SELECT")
        if any(True for _ in statement.find_all(*_OPAQUE)):
            raise _Unknown("PIVOT or COLUMNS(...) hides which columns the result reads")
        for call in statement.find_all(exp.Func):
            if not _reads_only_arguments(call, self.dialect):
                raise _Unknown(
                    f"function {function_name(call)} is not known to read only its arguments "
                    "(it may run SQL from a string or read files or statistics)"
                )
        _strip_default_schema(statement, self.schema.default_schema)
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
            raise _Unknown(f"the statement could not be analysed ({_first_line(exc)})") from None
        if root is None:
            raise _Unknown("the statement could not be analysed")
        self.scopes.update({id(s.expression): s for s in root.traverse()})
        for scope in self.scopes.values():
            for source in scope.sources.values():
                if isinstance(source, exp.Table) and isinstance(source.this, exp.Identifier):
                    self._check_table(source)
                elif isinstance(source, exp.Table) and not set_returning(source.this):
                    raise _Unknown(
                        f"table function {function_name(source.this)} may read what the "
                        "statement does not name (table contents, storage statistics)"
                    )
        left = _leftmost(qualified)
        if not isinstance(left, exp.Select):
            raise _Unknown("the statement could not be analysed")
        sized, ordered = self.rows(root)  # the result's order shows in every column
        self.result_rows = self._counts.get(id(root.expression), sized)
        selects = qualified.selects if isinstance(qualified, exp.Select) else []
        return [
            ColumnLineage(
                name=name,
                sources=frozenset(self.output(root, index=i)) | ordered,
                stored=self.stored_column(root, selects[i].unalias()) if selects else None,
            )
            for i, name in enumerate(_names(qualified))
        ]


def _names(node: exp.Expr) -> list[str]:
    """The output column names of a query, in order (a set operation BY NAME adds the names
    only its right side has, as DuckDB does)."""
    while isinstance(node, exp.Subquery | exp.Paren):
        node = node.this
    if isinstance(node, exp.SetOperation):
        left = _names(node.left)
        if not node.args.get("by_name"):
            return left
        folded = {n.casefold() for n in left}
        return left + [n for n in _names(node.right) if n.casefold() not in folded]
    if isinstance(node, exp.Select):
        if any(isinstance(s, exp.Star) or isinstance(s.unalias(), exp.Star) for s in node.selects):
            raise _Unknown("a * could not be expanded")
        return [s.alias_or_name for s in node.selects]
    raise _Unknown("the columns of a source could not be listed")


def _own_nodes(roots: Iterable[exp.Expr]) -> Iterable[exp.Expr]:
    """Every node of ``roots`` that belongs to their scope (subqueries are scopes of their own)."""
    stack = list(roots)
    while stack:
        node = stack.pop()
        yield node
        stack.extend(c for c in node.iter_expressions() if not isinstance(c, exp.Query))


def _reads_only_arguments(call: exp.Func, dialect: str) -> bool:
    """Whether a function's value comes only from its arguments: a built-in the classifier
    knows to be pure (``sql.functions``), not one that runs SQL from a string
    (``query_to_xml``, ``ts_stat``), reads files or is user-defined."""
    if isinstance(call, exp.Anonymous):
        parent = call.parent
        if isinstance(parent, exp.Dot) and parent.expression is call:
            schemas = functions.QUALIFIED_SCHEMAS.get(dialect, frozenset())
            if parent.this.name.casefold() not in schemas:
                return False
        return function_name(call) in functions.PURE_FUNCTIONS.get(dialect, frozenset())
    return type(call).__name__ not in functions.IMPURE_FUNCTION_CLASSES


def _alias_columns(scope: Scope, alias: str) -> list[str]:
    """The column list of ``FROM src AS alias(a, b, ...)`` where ``alias`` is defined, if any."""
    current: Scope | None = scope
    while current is not None:
        selected = current.selected_sources.get(alias)
        if selected is not None:
            node = selected[0]
            table_alias = node.args.get("alias") if isinstance(node, exp.Expr) else None
            if isinstance(table_alias, exp.TableAlias):
                return [c.name for c in table_alias.columns]
            return []
        current = current.parent
    return []


def _renamed_index(original: list[str], renamed: list[str], column: str) -> int:
    """The position of ``column`` among ``original`` names after the first ones were renamed
    to ``renamed`` (PostgreSQL and DuckDB: the columns past the list keep their names)."""
    effective = [*renamed[: len(original)], *original[len(renamed) :]]
    folded = column.casefold()
    matches = [i for i, n in enumerate(effective) if n.casefold() == folded]
    if len(matches) != 1:
        raise _Unknown(f"column {column} of a renamed source could not be resolved")
    return matches[0]


def _leftmost(node: exp.Expr) -> exp.Expr:
    """The first SELECT of a set operation (its column names are the result's)."""
    while isinstance(node, exp.SetOperation | exp.Subquery | exp.Paren):
        node = node.left if isinstance(node, exp.SetOperation) else node.this
    return node


def _first_line(exc: BaseException) -> str:
    return (str(exc).splitlines() or [type(exc).__name__])[0][:200]


def _view_query(definition: str, dialect: str) -> exp.Expr:
    try:
        parsed = sqlglot.parse_one(definition.strip().rstrip(";"), read=dialect)
    except Exception as exc:
        raise _Unknown(f"a view definition could not be parsed ({_first_line(exc)})") from None
    if isinstance(parsed, exp.Create) and isinstance(parsed.expression, exp.Query):
        return parsed.expression
    return parsed


def _strip_default_schema(statement: exp.Expr, default: str | None) -> None:
    """``public.customers`` is ``customers`` when ``public`` is the default schema."""
    allowed = {s.casefold() for s in (default, "main") if s}
    for table in statement.find_all(exp.Table):
        if table.db and not table.catalog and table.db.casefold() in allowed:
            table.set("db", None)


def trace(
    sql: str,
    dialect: str,
    schema: SchemaInfo,
    *,
    views: dict[str, dict[str, frozenset[Source]]] | None = None,
) -> Lineage:
    """The lineage of each output column of ``sql``, in result order. Never raises: anything
    it cannot follow gives ``Lineage(columns=None, reason=...)``.

    ``views`` caches the lineage of views between calls on the same schema.
    """
    try:
        statements = [s for s in sqlglot.parse(sql, read=dialect) if s is not None]
    except Exception as exc:
        return Lineage(
            columns=None, reason=f"the statement could not be parsed ({_first_line(exc)})"
        )
    if len(statements) != 1:
        return Lineage(columns=None, reason="the text is not exactly one statement")
    tracer = _Tracer(schema, dialect, views=views if views is not None else {})
    try:
        columns = tuple(tracer.trace(statements[0]))
        return Lineage(columns=columns, rows=tracer.result_rows)
    except _Unknown as exc:
        return Lineage(columns=None, reason=str(exc))
    except Exception as exc:  # a construct the optimizer trips on: unknown, never a pass
        return Lineage(
            columns=None, reason=f"the statement could not be analysed ({_first_line(exc)})"
        )


def referenced_tables(sql: str, dialect: str) -> set[str] | None:
    """Names (case-folded) of every table the statement mentions; ``None`` if unparseable."""
    try:
        statements = [s for s in sqlglot.parse(sql, read=dialect) if s is not None]
    except Exception:
        return None
    names: set[str] = set()
    for statement in statements:
        names.update(t.name.casefold() for t in statement.find_all(exp.Table) if t.name)
    return names


def sources_of(lineage: Iterable[ColumnLineage]) -> set[Source]:
    """Every base column some output derives from."""
    found: set[Source] = set()
    for column in lineage:
        found |= column.sources
    return found
