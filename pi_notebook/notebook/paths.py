"""Where the bundled database extension lives, wherever pi_notebook is installed from.

A source checkout keeps it at ``<repo>/extensions/database.py``; a wheel ships the same file as
``pi_notebook/_bundled_extensions/database.py``. Both are found from this package's location,
never from the working directory (notebooks run with ``notebooks/`` as their cwd).
"""

from __future__ import annotations

from pathlib import Path

__all__ = ["database_extension_path"]

_PACKAGE = Path(__file__).resolve().parent.parent


def database_extension_path() -> Path:
    """The path of ``database.py``, the reference database extension.

    Raises:
        FileNotFoundError: neither the wheel's bundled copy nor a checkout's copy exists.
    """
    candidates = (
        _PACKAGE / "_bundled_extensions" / "database.py",  # installed wheel
        _PACKAGE.parent / "extensions" / "database.py",  # source checkout
    )
    for candidate in candidates:
        if candidate.is_file():
            return candidate
    raise FileNotFoundError(
        "the database extension is missing: looked for " + " and ".join(map(str, candidates))
    )
