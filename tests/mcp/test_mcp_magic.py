"""``%pi_mcp`` and the MCP server settings of the notebook, without a kernel (14.4)."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import pandas as pd
import pytest

from pi_notebook import create_agent_session
from pi_notebook.errors import ConfigurationError
from pi_notebook.mcp import mcp_extension
from pi_notebook.mcp.magic import file_servers, initial_servers, parse_add, run_mcp_magic
from tests.mcp.mcp_support import TOY_SERVER, Relay


def test_add_parses_a_stdio_server_with_options() -> None:
    name, spec = parse_add(
        "files --trusted --timeout 5 --env TOKEN=${FILES_TOKEN} -- npx -y srv /data"
    )
    assert name == "files"
    assert spec == {
        "command": "npx",
        "args": ["-y", "srv", "/data"],
        "env": {"TOKEN": "${FILES_TOKEN}"},
        "trusted": True,
        "timeout": 5.0,
    }


def test_add_parses_an_http_server() -> None:
    name, spec = parse_add("web --url https://h/mcp --header Authorization=Bearer\\ ${T}")
    assert (name, spec) == (
        "web",
        {"url": "https://h/mcp", "headers": {"Authorization": "Bearer ${T}"}},
    )


@pytest.mark.parametrize(
    ("line", "message"),
    [
        ("files", "give either '-- COMMAND ARGS...' or '--url URL'"),
        ("files --url http://h -- cmd", "give either"),
        ("bad name -- cmd", "unrecognized arguments"),
        ("files --env NOVALUE -- cmd", "--env 'NOVALUE': write KEY=VALUE"),
        ("has.dot -- cmd", "must be 1-40 letters"),
    ],
)
def test_bad_add_lines_say_what_to_type(line: str, message: str) -> None:
    with pytest.raises(
        ConfigurationError,
        match=message.replace("(", r"\(").replace(")", r"\)").replace(".", r"\."),
    ):
        parse_add(line)


def test_the_config_file_is_read_and_the_setting_wins(tmp_path: Path) -> None:
    path = tmp_path / "pi_notebook_mcp.json"
    assert file_servers(path) == {}
    path.write_text(
        json.dumps({"mcpServers": {"a": {"command": "x"}, "b": {"url": "http://h/mcp"}}})
    )
    servers = initial_servers({"b": {"command": "y"}}, path)
    assert servers == {"a": {"command": "x"}, "b": {"command": "y"}}
    path.write_text("{not json")
    with pytest.raises(ConfigurationError, match=str(path)):
        file_servers(path)


def test_add_and_remove_change_the_setting() -> None:
    settings: dict[str, Any] = {"old": {"command": "x"}}

    def apply(servers: dict[str, Any]) -> None:
        settings.clear()
        settings.update(servers)

    message = run_mcp_magic(
        "add toy -- python toy.py", dict(settings), apply=apply, extension=lambda: None
    )
    assert (
        message
        == "Added MCP server 'toy'; it starts with the next run (%pi_mcp list shows its tools then)."
    )
    assert settings == {"old": {"command": "x"}, "toy": {"command": "python", "args": ["toy.py"]}}
    with pytest.raises(
        ConfigurationError, match=r"no MCP server named 'nope' \(configured: old, toy\)"
    ):
        run_mcp_magic("remove nope", dict(settings), apply=apply, extension=lambda: None)
    assert run_mcp_magic("remove toy", dict(settings), apply=apply, extension=lambda: None) == (
        "Removed MCP server 'toy' and its tools."
    )
    assert settings == {"old": {"command": "x"}}
    with pytest.raises(ConfigurationError, match="unknown action 'start'"):
        run_mcp_magic("start toy", dict(settings), apply=apply, extension=lambda: None)


async def test_list_shows_each_server_with_its_status_and_tools(tmp_path: Path) -> None:
    servers = {
        "toy": {"command": sys.executable, "args": [TOY_SERVER]},
        "broken": {"command": str(tmp_path / "missing")},
    }
    ext = mcp_extension(servers, log_dir=tmp_path)
    session = create_agent_session(
        model=Relay(), extensions=[ext], audit=False, builtin_tools=False
    )
    await session.start()
    try:
        frame = run_mcp_magic("list", servers, apply=lambda s: None, extension=lambda: ext)
        assert isinstance(frame, pd.DataFrame)
        rows = frame.set_index("name")
        assert rows.loc["toy", "status"] == "running" and rows.loc["toy", "transport"] == "stdio"
        assert "mcp__toy__lookup" in rows.loc["toy", "tools"]
        assert rows.loc["broken", "status"].startswith(
            "failed: MCP server 'broken' could not be started"
        )
        added = run_mcp_magic("add more -- x", servers, apply=lambda s: None, extension=lambda: ext)
        assert "starts with the next run" in added
    finally:
        await session.close()
    assert (
        run_mcp_magic("", servers, apply=lambda s: None, extension=lambda: ext)
        .set_index("name")
        .loc["toy", "status"]
        == "not started"
    )  # type: ignore[union-attr]
