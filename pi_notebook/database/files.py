"""Reading the extension's optional configuration files (data policy, semantic layer)."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

import yaml

from pi_notebook.errors import ConfigurationError

__all__ = ["load_document"]


def load_document(
    source: Mapping[str, Any] | str | Path, what: str, *, inline: str
) -> tuple[Any, str]:
    """``source`` as data, and how to name it in messages (``"<what> file <path>"``, or
    ``inline`` for a mapping given in code).

    A string or path is read as YAML (JSON is YAML too); a mapping is returned as given.

    Raises:
        ConfigurationError: the file is missing or not valid YAML/JSON.
    """
    if not isinstance(source, str | Path):
        return source, inline
    path = Path(source).expanduser()
    where = f"{what} file {path}"
    try:
        return yaml.safe_load(path.read_text(encoding="utf-8")), where
    except (OSError, yaml.YAMLError) as exc:
        raise ConfigurationError(f"Cannot read the {where}: {exc}") from None
