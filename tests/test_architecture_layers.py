"""The layering docs/architecture.md describes holds in the code: each "never imports" row of its
table is checked against every import statement of the package (an AST scan, so imports inside
functions and ``TYPE_CHECKING`` blocks count too).

A row reads ``| LEFT | never imports | RIGHT |``; each side is a comma-separated list of dotted
module names. A name covers the module and everything under it; ``P.__init__`` stands for the
package face ``P`` alone (``from P import name``), not its submodules. An import from a module of
LEFT of a module of RIGHT that is not itself part of LEFT breaks the row.
"""

from __future__ import annotations

import ast
import re
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent.parent
DOC = REPO / "docs" / "architecture.md"
PACKAGE = "pi_notebook"
FACE = ".__init__"

_ROW = re.compile(r"^\|\s*(?P<left>[^|]+?)\s*\|\s*never imports\s*\|\s*(?P<right>[^|]+?)\s*\|\s*$")


@dataclass(frozen=True)
class Rule:
    """One "never imports" row: no module of ``left`` imports a module of ``right``."""

    left: tuple[str, ...]
    right: tuple[str, ...]

    def __str__(self) -> str:
        return f"{', '.join(self.left)} never imports {', '.join(self.right)}"


@dataclass(frozen=True)
class Import:
    """One import statement of one module, resolved to the dotted name of what it imports."""

    module: str
    path: Path
    line: int
    target: str


def parse_rules(text: str) -> list[Rule]:
    """The "never imports" rows of a Markdown table, names stripped of backticks."""

    def names(cell: str) -> tuple[str, ...]:
        return tuple(n.strip().strip("`").strip() for n in cell.split(",") if n.strip())

    rules: list[Rule] = []
    for line in text.splitlines():
        match = _ROW.match(line.strip())
        if match:
            rules.append(Rule(names(match["left"]), names(match["right"])))
    return rules


def _module_name(root: Path, path: Path) -> str:
    parts = list(path.relative_to(root).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def _is_module(root: Path, name: str) -> bool:
    base = root.joinpath(*name.removesuffix(FACE).split("."))
    return base.with_suffix(".py").is_file() or (base / "__init__.py").is_file()


def _imported_name(node: ast.Call) -> str | None:
    """The literal module name of ``importlib.import_module("x")`` or ``__import__("x")``."""
    func = node.func
    called = func.attr if isinstance(func, ast.Attribute) else getattr(func, "id", None)
    if called not in ("import_module", "__import__") or not node.args:
        return None
    first = node.args[0]
    return first.value if isinstance(first, ast.Constant) and isinstance(first.value, str) else None


def _targets(node: ast.Import | ast.ImportFrom | ast.Call, module: str, root: Path) -> list[str]:
    """The dotted names one import statement (or ``import_module`` call) of ``module`` imports."""
    if isinstance(node, ast.Import):
        return [alias.name for alias in node.names]
    if isinstance(node, ast.Call):
        name = _imported_name(node)
        return [name] if name else []
    source = node.module or ""
    if node.level:
        is_package = root.joinpath(*module.split("."), "__init__.py").is_file()
        base = module.split(".") if is_package else module.split(".")[:-1]
        base = base[: len(base) - (node.level - 1)]
        source = ".".join([*base, *([node.module] if node.module else [])])
    subs = (f"{source}.{alias.name}" for alias in node.names)
    return [sub if _is_module(root, sub) else source for sub in subs]


def scan_imports(root: Path, package: str) -> Iterator[Import]:
    """Every import of ``package``'s own modules, in every file under ``root/package``."""
    for path in sorted((root / package).rglob("*.py")):
        module = _module_name(root, path)
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"), str(path))):
            if not isinstance(node, ast.Import | ast.ImportFrom | ast.Call):
                continue
            for target in _targets(node, module, root):
                if target == package or target.startswith(package + "."):
                    yield Import(module, path, node.lineno, target)


def _covers(name: str, module: str) -> bool:
    if name.endswith(FACE):
        return module == name.removesuffix(FACE)
    return module == name or module.startswith(name + ".")


def violations(rule: Rule, imports: list[Import], root: Path) -> list[str]:
    """One line per import that breaks ``rule``, naming the file, the line and the import."""
    found: list[str] = []
    for imp in imports:
        layer = next((left for left in rule.left if _covers(left, imp.module)), None)
        if layer is None or any(_covers(left, imp.target) for left in rule.left):
            continue
        forbidden = next((name for name in rule.right if _covers(name, imp.target)), None)
        if forbidden is not None:
            where = imp.path.relative_to(root).as_posix()
            found.append(
                f"{where}:{imp.line} imports {imp.target}: {layer} never imports {forbidden}"
            )
    return found


RULES = parse_rules(DOC.read_text(encoding="utf-8"))
IMPORTS = list(scan_imports(REPO, PACKAGE))


def test_the_document_has_never_rows_that_name_real_modules() -> None:
    assert len(RULES) >= 8, f"{DOC.name}: expected its table of 'never imports' rows"
    unknown = [
        name for rule in RULES for name in (*rule.left, *rule.right) if not _is_module(REPO, name)
    ]
    assert not unknown, f"{DOC.name} names modules the package does not have: {unknown}"


@pytest.mark.parametrize("rule", RULES, ids=[", ".join(rule.left) for rule in RULES])
def test_each_never_row_holds_against_the_imports(rule: Rule) -> None:
    broken = violations(rule, IMPORTS, REPO)
    if broken:
        row = ", ".join(rule.left)
        pytest.fail(
            f"the 'never imports' row of {row} in docs/architecture.md is broken by:\n"
            + "\n".join(broken)
        )


def test_a_forbidden_import_is_named_with_its_file_and_line(tmp_path: Path) -> None:
    """The check itself: relative, nested, face and importlib imports are all seen."""
    pkg = tmp_path / "pkg"
    for name in ("low", "high", "high/deep"):
        (pkg / name).mkdir(parents=True)
        (pkg / name / "__init__.py").write_text("")
    (pkg / "__init__.py").write_text("")
    (pkg / "high" / "deep" / "thing.py").write_text("X = 1\n")
    (pkg / "low" / "ok.py").write_text("from . import other\n")
    (pkg / "low" / "__init__.py").write_text("from .ok import other\nfrom ..high import deep\n")
    (pkg / "low" / "other.py").write_text("")
    (pkg / "low" / "bad.py").write_text(
        "def late():\n    from ..high.deep import thing\n    return thing\n"
    )
    (pkg / "low" / "face.py").write_text("from pkg import something\n")
    (pkg / "low" / "dynamic.py").write_text(
        "import importlib\nm = importlib.import_module('pkg.high')\n"
    )
    rules = parse_rules(
        "| layer | rule | layers |\n| --- | --- | --- |\n"
        "| `pkg.low` | never imports | `pkg.high`, `pkg.__init__` |\n"
    )
    found = violations(rules[0], list(scan_imports(tmp_path, "pkg")), tmp_path)
    assert found == [
        "pkg/low/__init__.py:2 imports pkg.high.deep: pkg.low never imports pkg.high",
        "pkg/low/bad.py:2 imports pkg.high.deep.thing: pkg.low never imports pkg.high",
        "pkg/low/dynamic.py:2 imports pkg.high: pkg.low never imports pkg.high",
        "pkg/low/face.py:1 imports pkg: pkg.low never imports pkg.__init__",
    ]
