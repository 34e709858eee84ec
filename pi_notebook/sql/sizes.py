"""Bounds on the values a read may build inside the notebook's own process.

PostgreSQL and MySQL build values on the server; SQLite and DuckDB build them in the kernel.
DuckDB's ``memory_limit`` caps what its buffer manager holds (aggregate states such as
``string_agg`` or ``list``, materialised CTEs, sorts: verified by the tests), but not the
value one scalar call builds at once: ``repeat('x', 10**9)``, ``lpad(s, 10**9)``,
``printf('%1000000000d', 1)``, ``range(10**8)`` or a ``replace`` whose replacement is longer
than its pattern allocate outside it (verified). SQLite caps every value at
``SQLITE_MAX_VALUE_BYTES``, but allocates a requested blob or padded string at once.

So a call that can build a value much larger than its inputs is a read only when literals
bound its size:

* its size arguments (a count, a width, a number of elements) are integer literals;
* everything built from literals alone (the planner computes it once) adds up to at most
  :data:`MAX_DUCKDB_CONSTANT_CHARS` (SQLite: :data:`MAX_CONSTANT_CHARS`); everything built
  per row adds up to at most :data:`MAX_ROW_CHARS` (DuckDB computes 2,048 rows at a time,
  and on both engines each row's values become Python objects of their own);
* a call in a lambda or list comprehension body runs once per element, so what it builds
  multiplies the list (see the next rule);
* calls that multiply a value from the data (``repeat(col, 3)``, ``replace(col, ',', ', ')``)
  multiply by at most :data:`MAX_AMPLIFICATION` all together, and never inside a recursive
  CTE (which would apply them again on every round).

Sizes are counted in characters (a list element counts as 16), an upper bound within a
small factor: the limits sit far below what hurts. Everything else needs approval.

Aggregates that build a value as large as their input have their own rules, in
:mod:`pi_notebook.sql.aggregates`.
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from sqlglot import exp

from pi_notebook.sql.findings import Finding, writes

__all__ = [
    "MAX_AMPLIFICATION",
    "MAX_CONSTANT_CHARS",
    "MAX_DUCKDB_CONSTANT_CHARS",
    "MAX_ROW_CHARS",
    "integer_literal",
    "size_findings",
    "watched_calls",
]

MAX_CONSTANT_CHARS = 1 << 16
"""Most characters a SQLite statement may build from literals alone (SQLite's
``randomblob(n)`` and ``zeroblob(n)`` count bytes). Computed once, such a value still
reaches Python once per row: ``zeroblob(1000000)`` on 1,000 rows took 1.1 GB, so the limit
is DuckDB's."""
MAX_DUCKDB_CONSTANT_CHARS = 1 << 16
"""The same for DuckDB, lower: a value computed once may still be sent once per row."""
MAX_ROW_CHARS = 1 << 14
"""Most characters a statement may build for each row (DuckDB and SQLite: every row's values
reach Python, up to the row cap)."""
MAX_AMPLIFICATION = 64
"""Most a statement may multiply the size of a value from the data."""
_ELEMENT = 16
_UNBOUNDED = math.inf


@dataclass(frozen=True, slots=True)
class _Built:
    """What one call builds: ``chars`` (an upper bound), whether that is computed once
    (``constant``), how much it multiplies a value from the data (``factor``), or why its
    size cannot be bounded (``problem``)."""

    chars: float = 0
    constant: bool = False
    factor: float = 1
    problem: str | None = None


def integer_literal(node: exp.Expr | None) -> int | None:
    """The value of an integer literal (``-n`` included), else None."""
    while isinstance(node, exp.Paren):
        node = node.this
    if isinstance(node, exp.Neg):
        inner = integer_literal(node.this)
        return None if inner is None else -inner
    if isinstance(node, exp.Literal) and not node.is_string and node.this.isdigit():
        return int(node.this)
    return None


def _count(node: exp.Expr | None) -> int | None:
    """A literal count or width (a negative one builds nothing)."""
    value = integer_literal(node)
    return None if value is None else max(value, 0)


def _string(node: exp.Expr | None) -> str | None:
    while isinstance(node, exp.Paren):
        node = node.this
    return node.this if isinstance(node, exp.Literal) and node.is_string else None


def _constant_chars(node: exp.Expr | None, dialect: str) -> float | None:
    """An upper bound on the size of ``node`` when it is made of literals only, else None."""
    if node is None or isinstance(node, exp.Null | exp.Boolean):
        return 4
    if isinstance(node, exp.Literal):
        return len(node.this)
    if isinstance(
        node,
        exp.Column | exp.Identifier | exp.Subquery | exp.Placeholder | exp.Parameter | exp.Star,
    ):
        return None
    builder = _builder(node, dialect)
    if builder is not None:
        built = builder(node, dialect)
        return built.chars if built.constant and built.problem is None else None
    total = 16.0
    for child in node.iter_expressions():
        size = _constant_chars(child, dialect)
        if size is None:
            return None
        total += size
    return total


def _constant(nodes: Sequence[exp.Expr | None], dialect: str) -> float | None:
    sizes = [_constant_chars(node, dialect) for node in nodes]
    return None if any(size is None for size in sizes) else sum(s or 0 for s in sizes)


def _times(value: exp.Expr | None, count: int | None, dialect: str, what: str) -> _Built:
    """``count`` copies of ``value`` (repeat, list_resize's fill)."""
    if count is None:
        return _Built(problem=f"{what} with a computed count")
    size = _constant_chars(value, dialect)
    if size is not None:
        return _Built(chars=size * count, constant=True)
    return _Built(factor=max(count, 1))


def _repeat(node: exp.Expr, dialect: str) -> _Built:
    if isinstance(node, exp.Repeat):
        return _times(node.this, _count(node.args.get("times")), dialect, "repeat()")
    args = node.expressions
    return _times(
        args[0] if args else None, _count(args[1]) if len(args) > 1 else None, dialect, "repeat()"
    )


def _pad(node: exp.Expr, dialect: str) -> _Built:
    width = _count(node.args.get("expression"))
    if width is None:
        return _Built(problem="lpad()/rpad() to a computed width")
    fill = node.args.get("fill_pattern")
    return _Built(chars=width, constant=_constant([node.this, fill], dialect) is not None)


def _sized_blob(node: exp.Expr, dialect: str) -> _Built:
    """SQLite's randomblob(n) and zeroblob(n): n bytes at once."""
    args = node.expressions
    size = _count(args[0]) if len(args) == 1 else None
    if size is None:
        return _Built(problem=f"{node.name.lower()}() of a computed size")
    return _Built(chars=size, constant=True)


_PRINTF_WIDTH = re.compile(r"%(?:\d+\$)?[-+ 0#,!']*(\*|\d*)(?:\.(\*|\d*))?")
_FMT_FIELD = re.compile(r"\{[^{}]*(\{)?[^{}]*\}?")
_FMT_WIDTH = re.compile(r":[^{}]*?(\d+)?(?:\.(\d+))?[a-zA-Z%?]?\}")


def _format_widths(text: str, fmt_style: bool) -> tuple[float, int]:
    """(sum of the widths and precisions the format asks for, number of placeholders);
    a width taken from an argument (``*``, ``{:{}}``) is unbounded."""
    total, fields = 0.0, 0
    if not fmt_style:  # printf: %5d, %-*s, %.3f, %1$10s
        for match in _PRINTF_WIDTH.finditer(text):
            fields += 1
            for part in match.groups():
                total += _UNBOUNDED if part == "*" else int(part or 0)
    else:  # DuckDB's format(): {}, {0}, {:>10}, {:.{}f}
        for match in _FMT_FIELD.finditer(text.replace("{{", "").replace("}}", "")):
            fields += 1
            if match.group(1):
                total = _UNBOUNDED
            spec = _FMT_WIDTH.search(match.group(0))
            if spec:
                total += sum(int(part or 0) for part in spec.groups())
    return total, fields


def _format(node: exp.Expr, dialect: str) -> _Built:
    if isinstance(node, exp.Anonymous):
        fmt, args = (node.expressions[0] if node.expressions else None), node.expressions[1:]
    else:
        fmt, args = node.this, node.expressions
    text = _string(fmt)
    if text is None:
        return _Built(problem=f"{node.name.lower() or 'format'}() with a computed format")
    fmt_style = dialect == "duckdb" and isinstance(node, exp.Format)
    widths, fields = _format_widths(text, fmt_style)
    if widths == _UNBOUNDED:
        return _Built(problem=f"{node.name.lower() or 'format'}() with a width from an argument")
    constant = _constant(args, dialect)
    factor = max(1, fields - len(args) + 1)  # {0}{0}{0} repeats its argument
    chars = len(text) + widths + (constant or 0) * factor
    return _Built(
        chars=chars, constant=constant is not None, factor=1 if constant is not None else factor
    )


def _series(node: exp.Expr, dialect: str) -> _Built:
    """range()/generate_series() as a value: the whole list at once (a table source
    streams its rows, so it is not checked)."""
    start, end = integer_literal(node.args.get("start")), integer_literal(node.args.get("end"))
    step = integer_literal(node.args.get("step")) if node.args.get("step") is not None else 1
    if start is None or end is None or not step:
        return _Built(problem="a range() or generate_series() list with computed bounds")
    return _Built(chars=(abs(end - start) // abs(step) + 1) * _ELEMENT, constant=True)


def _resize(node: exp.Expr, dialect: str) -> _Built:
    args = node.expressions
    size = _count(args[1]) if len(args) > 1 else None
    if size is None:
        return _Built(problem=f"{node.name.lower()}() to a computed size")
    list_size = _constant_chars(args[0], dialect)
    fill = _times(args[2], size, dialect, "fill") if len(args) > 2 else _Built(constant=True)
    chars = size * _ELEMENT + fill.chars
    return _Built(chars=chars, constant=list_size is not None and fill.constant, factor=fill.factor)


def _bitstring(node: exp.Expr, dialect: str) -> _Built:
    args = node.expressions
    bits = _count(args[1]) if len(args) > 1 else None
    if bits is None:
        return _Built(problem="bitstring() of a computed length")
    return _Built(chars=bits / 8, constant=_constant_chars(args[0], dialect) is not None)


def _replace(node: exp.Expr, dialect: str) -> _Built:
    """Every match of the pattern becomes the replacement (which may repeat the match)."""
    replacement = _string(node.args.get("replacement"))
    if replacement is None:
        return _Built(problem="replace() with a computed replacement")
    pattern = _string(node.args.get("expression"))
    if isinstance(node, exp.Replace) and pattern:
        factor = max(1.0, math.ceil(len(replacement) / len(pattern)))
    elif isinstance(node, exp.Replace) and pattern is not None:
        factor = 1.0  # DuckDB leaves the text unchanged for an empty pattern
    else:
        factor = 1.0 + len(replacement) + replacement.count("\\")
    size = _constant_chars(node.this, dialect)
    if size is not None:
        return _Built(chars=size * factor, constant=True)
    return _Built(factor=factor)


_Builder = Callable[[exp.Expr, str], _Built]
_CLASSES: dict[str, dict[type[exp.Expr], _Builder]] = {
    "duckdb": {
        exp.Repeat: _repeat,
        exp.Pad: _pad,
        exp.Format: _format,
        exp.GenerateSeries: _series,
        exp.Replace: _replace,
        exp.RegexpReplace: _replace,
    },
    "sqlite": {exp.Format: _format},
}
_NAMES: dict[str, dict[str, _Builder]] = {
    "duckdb": {
        "repeat": _repeat,
        "printf": _format,
        "format": _format,
        "list_resize": _resize,
        "array_resize": _resize,
        "bitstring": _bitstring,
    },
    "sqlite": {
        "printf": _format,
        "format": _format,
        "randomblob": _sized_blob,
        "zeroblob": _sized_blob,
    },
}


def watched_calls(dialect: str) -> tuple[frozenset[type[exp.Expr]], frozenset[str]]:
    """(node classes, anonymous function names) whose calls :func:`size_findings` checks."""
    return frozenset(_CLASSES.get(dialect, {})), frozenset(_NAMES.get(dialect, {}))


def _builder(node: exp.Expr, dialect: str) -> _Builder | None:
    if isinstance(node, exp.Anonymous):
        return _NAMES.get(dialect, {}).get(node.name.lower())
    return _CLASSES.get(dialect, {}).get(type(node))


def _per_element(node: exp.Expr) -> bool:
    """Inside a lambda's or a list comprehension's body: built once per list element."""
    child, parent = node, node.parent
    while parent is not None:
        if isinstance(parent, exp.Lambda) and child is parent.this:
            return True
        if isinstance(parent, exp.Comprehension) and child is not parent.args.get("iterator"):
            return True
        child, parent = parent, parent.parent
    return False


def _in_recursive_cte(node: exp.Expr) -> bool:
    parent = node.parent
    while parent is not None:
        if isinstance(parent, exp.CTE) and isinstance(parent.parent, exp.With):
            if parent.parent.args.get("recursive"):
                return True
        parent = parent.parent
    return False


def size_findings(calls: Sequence[exp.Expr], dialect: str) -> list[Finding]:
    """Why the value-building ``calls`` of one statement may exhaust the kernel's memory.

    ``calls`` are the statement's nodes that :func:`watched_calls` names, in any order.
    """
    constant_chars = row_chars = 0.0
    factor = 1.0
    found: list[Finding] = []
    constant_limit = MAX_CONSTANT_CHARS if dialect == "sqlite" else MAX_DUCKDB_CONSTANT_CHARS
    row_limit = MAX_ROW_CHARS  # what is built per row reaches Python per row, on both
    for node in calls:
        builder = _builder(node, dialect)
        if builder is None or isinstance(node.parent, exp.Table):
            continue  # not watched here, or a table function, whose rows stream
        built = builder(node, dialect)
        if built.problem is not None:
            found.append(writes(f"{built.problem} may exhaust memory", when_executed=False))
            continue
        multiplies = built.factor
        if dialect == "duckdb" and _per_element(node):
            # Built for every element of a list: it multiplies the list's size.
            multiplies = max(built.factor, built.chars, 1)
        elif built.constant:
            constant_chars += built.chars
        else:
            row_chars += built.chars
        if multiplies > 1 and dialect == "duckdb":
            factor *= multiplies
            if _in_recursive_cte(node):
                found.append(
                    writes(
                        "a value multiplied inside a recursive CTE may exhaust memory",
                        when_executed=False,
                    )
                )
    if constant_chars > constant_limit or row_chars > row_limit:
        found.append(
            writes(
                "builds a value too large to be a plain read (it may exhaust the "
                "notebook's memory)",
                when_executed=False,
            )
        )
    if factor > MAX_AMPLIFICATION:
        found.append(
            writes(
                f"multiplies the size of values from the data by more than {MAX_AMPLIFICATION}",
                when_executed=False,
            )
        )
    return found
