"""Which rows a scope has and in which order: the two sets of sources every output column of
a scope gets beside its own (see :mod:`pi_notebook.database.lineage`).

*sized* is what decides which rows there are, and so how many (table functions and
set-returning functions, ``LIMIT``/``OFFSET``, conditions that relate rows to other rows, the
values a set operation compares); *ordered* is what decides their order (``ORDER BY``, window
partitions and orders, ``GROUP BY`` and ``DISTINCT`` keys, the sources' order). The value side
of the tracer (:class:`~.lineage_tracer.Tracer`) fills in the abstract methods.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from dataclasses import dataclass, field

from sqlglot import exp
from sqlglot.optimizer.scope import Scope

from .lineage_nodes import VIEW_ROWS, find_source, own_nodes
from .lineage_result import LineageUnknown, Source
from .schema import SchemaInfo, TableInfo
from .set_functions import ORDER_FREE, set_returning

__all__ = ["RowSources"]


@dataclass
class RowSources(ABC):
    """The row side of a lineage tracer: ``rows(scope)`` is ``(sized, ordered)``, cached per
    scope; ``counts`` keeps, per query node, the sources of its row count alone."""

    schema: SchemaInfo
    dialect: str
    scopes: dict[int, Scope] = field(default_factory=dict)
    """Every scope of the statement, by the id of its expression."""
    _rows: dict[int, tuple[frozenset[Source], frozenset[Source]]] = field(default_factory=dict)
    _rows_busy: set[int] = field(default_factory=set)
    counts: dict[int, frozenset[Source]] = field(default_factory=dict)

    @abstractmethod
    def expression(self, scope: Scope, root: exp.Expr, *, skip_self: bool = False) -> set[Source]:
        """The base columns the value of ``root`` derives from."""

    @abstractmethod
    def all_outputs(self, scope: Scope) -> set[Source]:
        """The base columns any output of ``scope`` derives from."""

    @abstractmethod
    def canonical(self, source: Scope) -> Scope | None:
        """The scope of the tree that ``source`` stands for (``None``: a recursive CTE's
        reference to itself)."""

    @abstractmethod
    def view_lineage(self, view: TableInfo) -> dict[str, frozenset[Source]]:
        """The lineage of a view's columns, and under ``VIEW_ROWS`` what sizes its rows."""

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
                canonical = self.canonical(source)
                if canonical is not None:
                    source_sized, source_ordered = self.rows(canonical)
                    sized |= source_sized
                    inherited |= source_ordered
            elif not isinstance(source.this, exp.Identifier):  # a table function's arguments
                sized |= self.expression(scope, source.this)
            else:
                info = self.schema.table(source.name)
                if info is not None and info.kind == "view":
                    sized |= self.view_lineage(info).get(VIEW_ROWS, frozenset())
        aggregating = bool(node.args.get("group"))
        order_shown = False  # an aggregate or window function shows the order it reads
        for part in own_nodes(node.selects):
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
        self.counts[id(node)] = frozenset(sized)
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
                    raise LineageUnknown("a join condition could not be followed")
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
                owner, source = find_source(scope, node.table)
                owners.add((id(owner.expression), node.table.casefold()))
                relates |= source is None or not self._one_table(source)
                continue
            stack.extend(node.iter_expressions())
        found: set[Source] = set()
        for subquery in subqueries:
            inner = self.scopes.get(id(subquery))
            if inner is None:
                raise LineageUnknown("a subquery in a condition could not be followed")
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
        canonical = self.canonical(source)
        node = None if canonical is None else canonical.expression
        if canonical is None or not isinstance(node, exp.Select):
            return False
        sources = list(canonical.selected_sources.values())
        if len(sources) != 1 or node.args.get("joins"):
            return False
        if any(isinstance(p, exp.Window) or set_returning(p) for p in own_nodes(node.selects)):
            return False
        return self._one_table(sources[0][1])

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
        windows += [w for w in own_nodes([*node.selects, *keys]) if isinstance(w, exp.Window)]
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
                raise LineageUnknown("an ORDER BY position could not be resolved")
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
