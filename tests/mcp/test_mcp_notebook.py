"""``%pi_mcp`` and ``PiNotebook.mcp_servers`` in an in-process IPython shell."""

from __future__ import annotations

import json
import re
import sys
from collections.abc import AsyncIterator
from pathlib import Path

import pandas as pd
import pytest
from IPython.core.error import UsageError
from IPython.core.interactiveshell import InteractiveShell

from pi_notebook.notebook import current
from tests.mcp.mcp_support import TOY_SERVER


@pytest.fixture
async def shell(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> AsyncIterator[InteractiveShell]:
    monkeypatch.setenv("PI_NOTEBOOK_DATA_DIR", str(tmp_path / "data"))
    config_dir = tmp_path / "jupyter"
    config_dir.mkdir()
    monkeypatch.setenv("JUPYTER_CONFIG_DIR", str(config_dir))
    (config_dir / "pi_notebook_mcp.json").write_text(
        json.dumps({"mcpServers": {"filed": {"command": sys.executable, "args": [TOY_SERVER]}}})
    )
    sh = InteractiveShell.instance()
    sh.run_line_magic("load_ext", "pi_notebook")
    capsys.readouterr()
    yield sh
    state = current()
    sh.run_line_magic("unload_ext", "pi_notebook")
    sh.config.pop("PiNotebook", None)
    for task in list(state._background):  # let the old sessions (and servers) close
        await task


async def test_servers_from_the_config_file_register_their_tools(shell: InteractiveShell) -> None:
    state = current()
    assert set(state.config.mcp_servers) == {"filed"}  # read from the Jupyter config dir
    await state.session.start()  # servers start with the session (a %%pi run does this)
    tools = shell.run_line_magic("pi_tools", "")
    rows = tools.set_index("name")
    assert rows.loc["mcp__filed__lookup", "source"] == "<mcp> [mcp:filed]"
    assert rows.loc["mcp__filed__lookup", "active"]
    listed = shell.run_line_magic("pi_mcp", "list")
    assert isinstance(listed, pd.DataFrame)
    assert listed.set_index("name").loc["filed", "status"] == "running"


async def test_add_and_remove_rebuild_the_session(
    shell: InteractiveShell, capsys: pytest.CaptureFixture[str]
) -> None:
    shell.run_line_magic("pi_mcp", f"add toy --timeout 20 -- {sys.executable} {TOY_SERVER}")
    assert "Added MCP server 'toy'; it starts with the next run" in capsys.readouterr().out
    state = current()
    assert state.config.mcp_servers["toy"]["timeout"] == 20.0
    await state.session.start()
    assert "mcp__toy__write_marker" in state.session.tool_registry
    result = await state.session.call_tool("mcp__toy__lookup", {"key": "nb"})
    assert result.details["structured_content"]["value"] == "NB"
    shell.run_line_magic("pi_mcp", "remove toy")
    assert "Removed MCP server 'toy'" in capsys.readouterr().out
    await current().session.start()
    assert not any(n.startswith("mcp__toy__") for n in current().session.tool_registry)
    with pytest.raises(UsageError, match="no MCP server named 'toy'"):
        shell.run_line_magic("pi_mcp", "remove toy")
    with pytest.raises(
        UsageError, match=re.escape("give either '-- COMMAND ARGS...' or '--url URL'")
    ):
        shell.run_line_magic("pi_mcp", "add broken")
