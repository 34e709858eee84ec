"""A malformed tool in a server's list is skipped with a diagnostic; the server's other tools
register and run (one bad entry does not hide them all)."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from pi_notebook import create_agent_session
from pi_notebook.mcp import mcp_extension
from pi_notebook.testing import ScriptedModel, text, tool_call

MALFORMED_SERVER = str(Path(__file__).with_name("malformed_server.py"))


async def test_a_malformed_tool_is_skipped_and_the_others_register(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    config = {"command": sys.executable, "args": [MALFORMED_SERVER], "timeout": 5}
    ext = mcp_extension({"odd": config}, log_dir=tmp_path)
    model = ScriptedModel(
        [[tool_call("mcp__odd__also_good", {"text": "hi"}, id="c1")], text("done")]
    )
    session = create_agent_session(model=model, extensions=[ext], audit=False, builtin_tools=False)
    try:
        with caplog.at_level("WARNING", logger="pi_notebook.mcp"):
            await session.start()
        assert sorted(ext.tools) == ["mcp__odd__also_good", "mcp__odd__good"]
        assert ext.failures == {}  # listed, not failed (nor timed out)
        [schema, nameless] = ext.skipped["odd"]
        assert "'broken_schema'" in schema and "inputSchema" in schema
        assert "entry 3" in nameless and "name" in nameless
        skipped = " ".join(r.getMessage() for r in caplog.records)
        assert "broken_schema" in skipped and "entry 3" in skipped  # each bad entry named
        await session.prompt("go")
        [result] = [m for m in session.messages if m.role == "toolResult"]
        assert not result.is_error and "also_good: hi" in str(result.content)
    finally:
        await session.close()
