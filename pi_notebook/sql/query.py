"""The allow-list walk over a parsed query: every node must be a known pure construct.

A node whose class is in :data:`PURE_NODES` is fine; a function call must be on the
dialect's list (``functions.py``); a few classes get a specific reason (locks, ``INTO``,
DML inside a CTE); anything else is a ``write`` because we do not know it is a read.
"""

from __future__ import annotations

import re

from sqlglot import exp

from pi_notebook.sql import functions
from pi_notebook.sql.findings import Finding, rejects, writes


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

_FILE_LIKE = frozenset("./:\\*?")
_CHECKED_PURE_NODES = frozenset({exp.Table, exp.PropertyEQ})


def query_findings(root: exp.Expr, dialect: str) -> list[Finding]:
    """Findings for every node under ``root`` (``root`` itself included)."""
    nodes = list(root.walk(bfs=False))
    kinds = set(map(type, nodes))
    # Most queries hold only pure constructs: look closer only at the kinds that need it.
    attention = (kinds - PURE_NODES) | (kinds & _CHECKED_PURE_NODES)
    if not attention:
        return []
    found: list[Finding] = []
    for node in [node for node in nodes if type(node) in attention]:
        cls = type(node)
        if isinstance(node, exp.Table):
            found.extend(_table_findings(node, dialect))
        elif cls is exp.PropertyEQ:
            if not isinstance(node.this, exp.Identifier | exp.Var):
                # A named argument or struct field is ``name := value``; ``@x := 1``
                # (MySQL) assigns a session variable.
                found.append(writes("assignment to a variable (:=)"))
        elif isinstance(node, exp.Func):
            finding = function_finding(node, dialect)
            if finding is not None:
                found.append(finding)
        elif cls is exp.Operator:
            # OPERATOR(pg_catalog.~) (as psql writes it) is the built-in; another schema
            # names a user-defined operator, whose function can do anything.
            schema, dot, _ = str(node.args.get("operator", "")).rpartition(".")
            # sqlglot drops the quotes here, so compare exactly: "PG_CATALOG" is not
            # pg_catalog (an unquoted upper-case spelling costs a click).
            if dot and schema.strip() not in functions.QUALIFIED_SCHEMAS[dialect]:
                found.append(
                    writes(
                        f"OPERATOR({schema}...) may call a user-defined function",
                        when_executed=False,
                    )
                )
        else:
            reason = _SPECIFIC_REASONS.get(cls)
            found.append(writes(reason or f"{_describe(node)} is not a known pure read construct"))
    return found


def function_finding(node: exp.Func, dialect: str) -> Finding | None:
    """None when the call is on the dialect's side-effect-free list, else why not."""
    name, quoted = _function_name(node)
    parent = node.parent
    if isinstance(parent, exp.Dot) and parent.expression is node:
        schema = parent.this.name.lower() if isinstance(parent.this, exp.Expr) else ""
        if not _builtin_schema(parent.this, dialect):
            return writes(
                f"function {schema}.{name}() is user-defined or unknown", when_executed=False
            )
    if name.lower() in functions.FORMAT_WIDTH_FUNCTIONS[dialect] and not _modest_format(node):
        return writes(
            f"{name.lower()}() with a computed format or a huge width may exhaust memory",
            when_executed=False,
        )
    if isinstance(node, exp.Anonymous):
        lowered = name.lower()
        if node.expressions and lowered in functions.PURE_ONLY_WITHOUT_ARGUMENTS[dialect]:
            return writes(f"{lowered}(...) with an argument sets session state")
        if lowered in functions.SIZE_BOUNDED_FUNCTIONS[dialect] and not _small_size(node):
            return writes(
                f"{lowered}() of a large or computed size may exhaust memory",
                when_executed=False,
            )
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


def _builtin_schema(schema: object, dialect: str) -> bool:
    """The qualifier names the built-ins' schema (``pg_catalog``, or ``"pg_catalog"``:
    quoted names are case-sensitive, so ``"PG_CATALOG"`` is some other schema)."""
    if not isinstance(schema, exp.Identifier):
        return False
    name = schema.name if schema.quoted else schema.name.lower()
    return name in functions.QUALIFIED_SCHEMAS[dialect]


def _small_size(node: exp.Anonymous) -> bool:
    """The call's only argument is an integer literal of at most MAX_BUILT_BYTES."""
    args = node.expressions
    if len(args) != 1 or not isinstance(args[0], exp.Literal) or args[0].is_string:
        return False
    text = args[0].this
    return text.isdigit() and int(text) <= functions.MAX_BUILT_BYTES


_HUGE_WIDTH = re.compile(r"%[-+ 0#,!]*(?:\*|\d{7})|%[^%a-zA-Z]*\.(?:\*|\d{7})")


def _modest_format(node: exp.Func) -> bool:
    """The format is a string literal asking for no ``*`` width and no width or
    precision of seven digits or more."""
    if isinstance(node, exp.Anonymous):
        fmt = node.expressions[0] if node.expressions else None
    else:
        fmt = node.this
    if not isinstance(fmt, exp.Literal) or not fmt.is_string:
        return False
    return _HUGE_WIDTH.search(fmt.this) is None


def _table_findings(table: exp.Table, dialect: str) -> list[Finding]:
    source = table.this
    if isinstance(source, exp.Literal):
        return [writes("reads a file or URL named in the FROM clause", when_executed=False)]
    if isinstance(source, exp.Func) and (table.args.get("db") or table.args.get("catalog")):
        # FROM evil.generate_series(1, 3) calls a function of schema evil, not the built-in.
        if table.args.get("catalog") or not _builtin_schema(table.args["db"], dialect):
            return [
                writes(
                    f"table function {table.sql(dialect=dialect)[:80]} is user-defined or unknown",
                    when_executed=False,
                )
            ]
    if not isinstance(source, exp.Identifier):
        return []
    name = source.name.lower()
    if name in functions.HOST_FILE_TABLES[dialect]:
        return [writes(f"{name} reads configuration files on the server host")]
    credentials = functions.CREDENTIAL_TABLES[dialect]
    if name in credentials or f"{table.db.lower()}.{name}" in credentials:
        return [writes(f"{table.sql(dialect=dialect)} holds password hashes or raw pages")]
    if dialect == "sqlite" and name.startswith("pragma_"):
        if name.removeprefix("pragma_") not in functions.SQLITE_PRAGMA_TABLES:
            return [writes(f"{name} runs a pragma that may change state", when_executed=False)]
    if (
        dialect == "duckdb"
        and table.args.get("db")
        and name.rsplit(".", 1)[-1] in functions.DUCKDB_FILE_SUFFIXES
    ):
        return [
            writes(
                f"DuckDB reads {table.sql(dialect=dialect)} as a host file when no such table exists",
                when_executed=False,
            )
        ]
    # DuckDB opens a quoted table name that looks like a path or URL as a file.
    if (
        dialect == "duckdb"
        and isinstance(source, exp.Identifier)
        and source.quoted
        and any(char in _FILE_LIKE for char in source.name)
    ):
        return [writes(f"FROM '{source.name}' reads a host file or URL", when_executed=False)]
    return []


def _describe(node: exp.Expr) -> str:
    return f"{node.key.upper()} ({type(node).__name__})"
