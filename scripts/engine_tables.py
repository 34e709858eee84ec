"""Rewrite the engine tables of the README and docs/deployment.md from ``engines()``'s facts.

    .venv/bin/python scripts/engine_tables.py          # rewrite them
    .venv/bin/python scripts/engine_tables.py --check  # exit 1 if either is out of date

Each table sits between ``<!-- engines:NAME -->`` and ``<!-- /engines:NAME -->``.
"""

from __future__ import annotations

import argparse
import re
import sys
from pathlib import Path

from pi_notebook.database.engines import engines_markdown

ROOT = Path(__file__).resolve().parents[1]
TABLES = {
    "readme": (ROOT / "README.md", ("engine", "url_scheme", "extra", "tested_against")),
    "deployment": (
        ROOT / "docs" / "deployment.md",
        (
            "engine",
            "url_scheme",
            "extra",
            "read_only_backstop",
            "cancel",
            "estimate",
            "arrow",
            "tested_against",
        ),
    ),
}


def rendered(name: str, text: str) -> str:
    """``text`` with the table ``name`` replaced by the one ``engines()`` gives."""
    _, columns = TABLES[name]
    pattern = re.compile(rf"(<!-- engines:{name} -->\n).*?(<!-- /engines:{name} -->)", re.S)
    if not pattern.search(text):
        raise SystemExit(f"no <!-- engines:{name} --> block to rewrite")
    return pattern.sub(lambda m: m[1] + engines_markdown(columns) + m[2], text)


def main() -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--check", action="store_true", help="only check; exit 1 if stale")
    args = parser.parse_args()
    stale = []
    for name, (path, _) in TABLES.items():
        text = path.read_text()
        new = rendered(name, text)
        if new != text:
            stale.append(str(path.relative_to(ROOT)))
            if not args.check:
                path.write_text(new)
    if stale and args.check:
        print("engine tables out of date: " + ", ".join(stale) + " (run scripts/engine_tables.py)")
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
