"""The names of the database extension's tools, in one place every module of it can import."""

from __future__ import annotations

__all__ = ["DESCRIBE_TOOL", "TOOL_NAME"]

TOOL_NAME = "query_database"
"""The tool that runs one SQL statement."""

DESCRIBE_TOOL = "describe_database"
"""The tool that describes tables, columns and their meaning."""
