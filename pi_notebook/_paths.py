"""Where pi_notebook keeps its files: the user's data directory, never site-packages."""

from __future__ import annotations

import os
from pathlib import Path

import platformdirs

__all__ = ["data_dir"]


def data_dir() -> Path:
    """The data directory (``PI_NOTEBOOK_DATA_DIR`` overrides), created on first use."""
    override = os.environ.get("PI_NOTEBOOK_DATA_DIR")
    path = Path(override) if override else Path(platformdirs.user_data_dir("pi_notebook"))
    path.mkdir(parents=True, exist_ok=True)
    return path
