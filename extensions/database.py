"""The database extension, loadable by path (C35): ``query_database`` with its approval gate.

The extension lives in the package (:mod:`pi_notebook.database`); this file only re-exports
its default factory so ``create_agent_session(extensions=["extensions/database.py"])`` and a
wheel's bundled copy keep working.
"""

from pi_notebook.database import register

__all__ = ["register"]
