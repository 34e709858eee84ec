"""The allow-list walk over a parsed query: every node must be a known pure construct.

A node whose class is in :data:`PURE_NODES` is fine; a function call must be on the
dialect's list (``functions.py``); a few classes get a specific reason (locks, ``INTO``,
DML inside a CTE); anything else is a ``write`` because we do not know it is a read.
"""

from __future__ import annotations

from sqlglot import exp

from pi_notebook.sql import aggregates, catalogs, clickhouse, functions, sizes, warehouses
from pi_notebook.sql.findings import Finding, rejects, writes
from pi_notebook.sql.pragmas import pragma_table_is_read
from pi_notebook.sql.tables import builtin_schema, table_findings


def _classes(*names: str) -> frozenset[type[exp.Expr]]:
    return frozenset(getattr(exp, name) for name in names)


QUERY_ROOTS = _classes("Select", "Union", "Intersect", "Except", "Values", "Subquery", "Pivot")
"""Statement roots that can be a pure read."""

PURE_NODES = _classes(
    # query structure
    "Select",
    "Union",
    "Intersect",
    "Except",
    "Values",
    "Subquery",
    "With",
    "CTE",
    "From",
    "Join",
    "Where",
    "Group",
    "Having",
    "Qualify",
    "Order",
    "Ordered",
    "Limit",
    "Offset",
    "Fetch",
    "Distinct",
    "Window",
    "WindowSpec",
    "Lateral",
    "TableAlias",
    "Table",
    "Tuple",
    "Star",
    "Column",
    "PositionalColumn",
    "Identifier",
    "Alias",
    "Aliases",
    "Var",
    "Cube",
    "Rollup",
    "GroupingSets",
    "TableSample",
    "IndexTableHint",
    "Pivot",
    "PivotAlias",
    "UnpivotColumns",
    "Filter",
    "WithinGroup",
    "IgnoreNulls",
    "RespectNulls",
    "HavingMax",
    "Slice",
    "Lambda",
    "Comprehension",
    "Kwarg",
    "Bracket",
    "Dot",
    "Paren",
    "Placeholder",
    "Parameter",
    "SessionParameter",
    "Schema",
    "Semicolon",
    # literals and types
    "Literal",
    "Null",
    "Boolean",
    "HexString",
    "BitString",
    "ByteString",
    "National",
    "RawString",
    "UnicodeString",
    "Introducer",
    "DataType",
    "DataTypeParam",
    "ObjectIdentifier",
    "PseudoType",
    "Interval",
    "IntervalSpan",
    "CharacterSet",
    "Escape",
    "JSONPath",
    "JSONPathKey",
    "JSONPathRoot",
    "JSONPathSubscript",
    "JSONPathWildcard",
    "JSONPathSlice",
    "JSONPathFilter",
    "JSONPathSelector",
    "JSONPathUnion",
    "JSONPathRecursive",
    "JSONPathScript",
    "JSONColumnDef",
    "JSONSchema",
    "Collate",
    "AtTimeZone",
    "ColumnPrefix",
    # operators
    "Neg",
    "Not",
    "And",
    "Or",
    "Xor",
    "EQ",
    "NEQ",
    "GT",
    "GTE",
    "LT",
    "LTE",
    "NullSafeEQ",
    "NullSafeNEQ",
    "Is",
    "Like",
    "ILike",
    "SimilarTo",
    "Glob",
    "RegexpLike",
    "RegexpILike",
    "Between",
    "In",
    "Any",
    "All",
    "Add",
    "Sub",
    "Mul",
    "Div",
    "IntDiv",
    "Mod",
    "Pow",
    "BitwiseAnd",
    "BitwiseOr",
    "BitwiseXor",
    "BitwiseNot",
    "BitwiseLeftShift",
    "BitwiseRightShift",
    "DPipe",
    "Distance",
    "Overlaps",
    "ArrayContainsAll",
    "ArrayContainedBy",
    "ArrayOverlaps",
    "JSONBContains",
    "JSONExtract",
    "JSONExtractScalar",
    "JSONBExtract",
    "JSONBExtractScalar",
    "Adjacent",
    "ExtendsLeft",
    "ExtendsRight",
    "MatchAgainst",
    "Match",
    "Struct",
    "PropertyEQ",
    "JSONKeyValue",
    "JSONValue",
    "ColumnDef",
    "ColumnConstraint",
    "PathColumnConstraint",
    "LimitOptions",
)
"""Expression classes that only compute a value or shape a read."""

_SPECIFIC_REASONS: dict[type[exp.Expr], str] = {
    exp.Lock: "locking read (FOR UPDATE / FOR SHARE / LOCK IN SHARE MODE) takes row locks",
    exp.Into: "SELECT ... INTO creates a table or assigns variables",
    exp.Insert: "data-modifying statement (INSERT) inside the query",
    exp.Update: "data-modifying statement (UPDATE) inside the query",
    exp.Delete: "data-modifying statement (DELETE) inside the query",
    exp.Merge: "data-modifying statement (MERGE) inside the query",
    exp.Hint: "optimizer hint (may set session variables)",
}

_CHECKED_PURE_NODES = frozenset({exp.Table, exp.PropertyEQ})
_PURE_CALLS = frozenset(
    cls for cls in exp.ALL_FUNCTIONS if cls.__name__ in functions.PURE_FUNCTION_CLASSES
)
"""Typed calls that need no closer look, unless qualified by a schema (checked via Dot)."""


def query_findings(root: exp.Expr, dialect: str, *, memory_bounded: bool = False) -> list[Finding]:
    """Findings for every node under ``root`` (``root`` itself included).

    ``memory_bounded``: the engine runs under an operating-system memory cap, so the rules of
    ``sizes.py`` (values built in the kernel) and ``aggregates.py`` (aggregates copied
    outside DuckDB's own limit), which only protect the kernel's memory, are not applied;
    every other rule is."""
    nodes = list(root.walk(bfs=False))
    kinds = set(map(type, nodes))
    # Most queries hold only pure constructs: look closer only at the kinds that need it.
    attention = (kinds - PURE_NODES - _PURE_CALLS) | (kinds & _CHECKED_PURE_NODES)
    found: list[Finding] = []
    if dialect == "clickhouse":
        attention -= clickhouse.PURE_NODES
        found.extend(clickhouse.clause_findings(nodes))
    rules = warehouses.rules_of(dialect)
    if rules is not None:
        attention -= rules.pure_nodes
    qualified = [
        node.expression
        for node in (nodes if exp.Dot in kinds else ())
        if type(node) is exp.Dot and type(node.expression) in _PURE_CALLS
    ]
    watched_classes, watched_names = _WATCHED.get(dialect, _UNWATCHED)
    sized = (
        [node for node in nodes if type(node) in watched_classes] if kinds & watched_classes else []
    )
    building = (
        [node for node in nodes if aggregates.building_aggregate(node)]
        if dialect in _AGGREGATE_BOUNDED and kinds & _MAYBE_BUILDING and not memory_bounded
        else []
    )
    if building:
        found.extend(aggregates.aggregate_findings(building, root))
    if not attention and not qualified and not sized:
        return found
    for call in qualified:
        finding = function_finding(call, dialect)
        if finding is not None:
            found.append(finding)
    for node in [node for node in nodes if type(node) in attention]:
        if type(node) is exp.Anonymous and node.name.lower() in watched_names:
            sized.append(node)
        found.extend(_node_findings(node, dialect))
    if sized and dialect == "clickhouse":
        found.extend(clickhouse.size_findings(sized))
    elif sized and not memory_bounded:
        found.extend(sizes.size_findings(sized, dialect))
    return found


def _node_findings(node: exp.Expr, dialect: str) -> list[Finding]:
    """Findings for one node of a kind that needs a closer look."""
    cls = type(node)
    if isinstance(node, exp.Table):
        return table_findings(node, dialect)
    if cls is exp.PropertyEQ:
        if isinstance(node.this, exp.Identifier | exp.Var | exp.Literal):
            return []
        # A named argument, struct field or map key is ``name := value`` (or
        # ``'key': value``); ``@x := 1`` (MySQL) assigns a session variable.
        return [writes("assignment to a variable (:=)")]
    if isinstance(node, exp.Func):
        finding = function_finding(node, dialect)
        return [finding] if finding is not None else []
    if cls is exp.Operator:
        # OPERATOR(pg_catalog.~) (as psql writes it) is the built-in; another schema
        # names a user-defined operator, whose function can do anything.
        schema, dot, _ = str(node.args.get("operator", "")).rpartition(".")
        # sqlglot drops the quotes here, so compare exactly: "PG_CATALOG" is not
        # pg_catalog (an unquoted upper-case spelling costs a click).
        if dot and schema.strip() not in functions.QUALIFIED_SCHEMAS[dialect]:
            return [
                writes(
                    f"OPERATOR({schema}...) may call a user-defined function",
                    when_executed=False,
                )
            ]
        return []
    reason = _SPECIFIC_REASONS.get(cls)
    return [writes(reason or f"{_describe(node)} is not a known pure read construct")]


def function_finding(node: exp.Func, dialect: str) -> Finding | None:
    """None when the call is on the dialect's side-effect-free list, else why not."""
    name, quoted = _function_name(node)
    rules = warehouses.rules_of(dialect)
    if rules is not None:
        own = rules.call_finding(node)
        if own is not None:
            return own
    parent = node.parent
    if isinstance(parent, exp.Dot) and parent.expression is node:
        schema = parent.this.name.lower() if isinstance(parent.this, exp.Expr) else ""
        if not builtin_schema(parent.this, dialect):
            return writes(
                f"function {schema}.{name}() is user-defined or unknown", when_executed=False
            )
    if dialect == "clickhouse":
        decided = clickhouse.call_finding(node)
        if decided is not False:
            return decided
    if isinstance(node, exp.Anonymous):
        lowered = name.lower()
        if node.expressions and lowered in functions.PURE_ONLY_WITHOUT_ARGUMENTS[dialect]:
            return writes(f"{lowered}(...) with an argument sets session state")
        if lowered == "current_setting" and not _plain_setting(node, dialect):
            return writes("current_setting() of a setting that may hold a password")
        if lowered.startswith("pragma_") and dialect in ("sqlite", "duckdb"):
            name = lowered.removeprefix("pragma_")
            if pragma_table_is_read(dialect, name, with_arguments=bool(node.expressions)):
                return None
            return writes(f"{lowered} runs a pragma that may change state", when_executed=False)
        if lowered in functions.REJECT_FUNCTIONS[dialect]:
            return rejects(
                f"function {lowered}() reaches outside the database (host files or programs)"
            )
        # A quoted name is case-sensitive, so "LOWER"() is not the built-in lower().
        if lowered in functions.PURE_FUNCTIONS[dialect] and not (quoted and name != lowered):
            return None
        if lowered in functions.HOST_ACCESS_FUNCTIONS:
            return writes(
                f"function {lowered}() reads host files, the network or SQL hidden in a string",
                when_executed=False,
            )
        return writes(
            f"function {lowered}() is not known to be free of side effects", when_executed=False
        )
    cls_name = type(node).__name__
    if cls_name in functions.PURE_FUNCTION_CLASSES:
        return None
    if cls_name in ("ReadCSV", "ReadParquet"):
        return writes(f"function {name.lower()}() reads host files", when_executed=False)
    return writes(
        f"function {name.lower()}() is not known to be free of side effects", when_executed=False
    )


def _function_name(node: exp.Func) -> tuple[str, bool]:
    if isinstance(node, exp.Anonymous):
        this = node.this
        if isinstance(this, exp.Identifier):
            return this.name, bool(this.quoted)
        return str(this), False
    return node.sql_name(), False


def _plain_setting(node: exp.Anonymous, dialect: str) -> bool:
    """``current_setting('name')`` of a literal name that holds no secret."""
    args = node.expressions
    if not args or not isinstance(args[0], exp.Literal) or not args[0].is_string:
        return False
    return args[0].this.lower() not in catalogs.SECRET_SETTINGS[dialect]


_WATCHED = {dialect: sizes.watched_calls(dialect) for dialect in ("sqlite", "duckdb")}
_WATCHED["clickhouse"] = (clickhouse.SIZED_CLASSES, frozenset())
_AGGREGATE_BOUNDED = frozenset({"duckdb"})
"""Where a copied aggregate value lands in the kernel outside any limit (SQLite caps each
value at its length limit)."""
_MAYBE_BUILDING = frozenset(
    {
        exp.GroupConcat,
        exp.ArrayAgg,
        exp.ArrayConcatAgg,
        exp.ArrayUniqueAgg,
        exp.Anonymous,
        exp.Max,
        exp.Min,
        exp.ArgMax,
        exp.ArgMin,
        exp.ApproxTopK,
    }
    | {
        getattr(exp, n)
        for n in ("ArrayUnionAgg", "JSONArrayAgg", "JSONObjectAgg", "ObjectAgg")
        if hasattr(exp, n)
    }
)
_UNWATCHED: tuple[frozenset[type[exp.Expr]], frozenset[str]] = (frozenset(), frozenset())


def _describe(node: exp.Expr) -> str:
    return f"{node.key.upper()} ({type(node).__name__})"
