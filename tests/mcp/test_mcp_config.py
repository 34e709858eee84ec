"""Settings and schemas of the MCP client extension, and the server's command line (14.1, 14.3)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
from mcp.types import Tool, ToolAnnotations
from pydantic import ValidationError

from pi_notebook.errors import ConfigurationError
from pi_notebook.mcp import parse_servers, tool_name_for
from pi_notebook.mcp.config import parse_server
from pi_notebook.mcp.extension import approval_reason
from pi_notebook.mcp.schema import parameters_model
from tests.mcp.mcp_support import child_env


@pytest.mark.parametrize(
    ("spec", "message"),
    [
        ({}, "exactly one of 'command' or 'url'"),
        ({"command": "x", "url": "http://h"}, "exactly one of 'command' or 'url'"),
        ({"command": "x", "args": "not-a-list"}, "'args' must be a list of strings"),
        ({"url": "ftp://h"}, "'url' must be an http(s) URL"),
        ({"url": "http://h", "env": {"A": "b"}}, "only apply to a 'command' server"),
        ({"command": "x", "headers": {"A": "b"}}, "only apply to a 'url' server"),
        ({"command": "x", "timeout": 0}, "'timeout' must be a positive number"),
        ({"command": "x", "trusted": "yes"}, "'trusted' must be true or false"),
        ({"url": "http://h", "type": "sse"}, "type 'sse' is not supported"),
        ({"command": "x", "color": "red"}, "unknown settings ['color']"),
    ],
)
def test_unusable_settings_are_refused_with_the_reason(
    spec: dict[str, object], message: str
) -> None:
    with pytest.raises(
        ConfigurationError,
        match=message.replace("(", r"\(")
        .replace(")", r"\)")
        .replace("[", r"\[")
        .replace("]", r"\]"),
    ):
        parse_server("srv", spec)


def test_server_names_must_fit_tool_names() -> None:
    with pytest.raises(ConfigurationError, match="mcp__<server>__<tool>"):
        parse_server("has space", {"command": "x"})


def test_desktop_client_files_are_accepted() -> None:
    (config,) = parse_servers(
        {"mcpServers": {"files": {"type": "stdio", "command": "npx", "args": ["-y", "srv"]}}}
    )
    assert config.name == "files" and config.args == ("-y", "srv") and config.transport == "stdio"
    assert config.as_dict() == {"command": "npx", "args": ["-y", "srv"]}


def test_secrets_are_read_from_the_environment_when_used(monkeypatch: pytest.MonkeyPatch) -> None:
    config = parse_server(
        "api", {"url": "https://h/mcp", "headers": {"Authorization": "Bearer ${API_TOKEN}"}}
    )
    monkeypatch.delenv("API_TOKEN", raising=False)
    with pytest.raises(ConfigurationError, match=r"refers to \$\{API_TOKEN\}, which is not set"):
        config.resolved_headers()
    monkeypatch.setenv("API_TOKEN", "t0k3n")
    assert config.resolved_headers() == {"Authorization": "Bearer t0k3n"}
    assert (
        "t0k3n" not in repr(config)
        and config.as_dict()["headers"]["Authorization"] == "Bearer ${API_TOKEN}"
    )


@pytest.mark.parametrize(
    ("hints", "trusted", "needs"),
    [
        (ToolAnnotations(read_only_hint=True), False, None),
        (
            ToolAnnotations(read_only_hint=True, destructive_hint=True),
            False,
            "marks t as destructive",
        ),
        (ToolAnnotations(read_only_hint=False), False, "does not mark t as read-only"),
        (None, False, "does not mark t as read-only"),
        (ToolAnnotations(destructive_hint=True), True, None),
    ],
    ids=["read-only", "contradictory", "writes", "no-hints", "trusted-server"],
)
def test_annotations_are_hints_not_trust(
    hints: ToolAnnotations | None, trusted: bool, needs: str | None
) -> None:
    config = parse_server("srv", {"command": "x", "trusted": trusted})
    reason = approval_reason(
        config, Tool(name="t", input_schema={"type": "object"}, annotations=hints)
    )
    assert reason == (None if needs is None else f"MCP server 'srv' {needs}")


def test_tool_names_are_safe_for_providers() -> None:
    assert tool_name_for("files", "read.file/v2") == "mcp__files__read_file_v2"
    long = tool_name_for("files", "x" * 100)
    assert (
        len(long) == 64
        and long.startswith("mcp__files__xxx")
        and long != tool_name_for("files", "x" * 99)
    )


def test_parameter_model_keeps_the_schema_and_reports_every_problem() -> None:
    schema = {
        "type": "object",
        "properties": {
            "n": {"type": "integer", "minimum": 1},
            "tags": {"type": "array", "items": {"type": "string"}},
        },
        "required": ["n"],
        "additionalProperties": False,
    }
    model = parameters_model("mcp__s__t", schema)
    assert model.model_json_schema() == schema and model.model_json_schema() is not schema
    params = model.model_validate({"n": 2, "tags": ["a"]})
    params.n = 3  # type: ignore[attr-defined]  # a tool_call handler may change it in place
    assert params.model_dump() == {"n": 3, "tags": ["a"]}
    with pytest.raises(ValidationError) as caught:
        model.model_validate({"n": 0, "tags": [1], "extra": True})
    problems = {(".".join(map(str, e["loc"])), e["msg"]) for e in caught.value.errors()}
    assert ("n", "0 is less than the minimum of 1") in problems
    assert ("tags.0", "1 is not of type 'string'") in problems
    assert any("extra" in msg for loc, msg in problems if loc == "")


@pytest.mark.parametrize(
    ("schema", "message"),
    [
        ({"type": "string"}, "not an object of arguments"),
        ({"type": "object", "properties": 3}, "invalid input schema"),
    ],
)
def test_unusable_schemas_are_refused(schema: dict[str, object], message: str) -> None:
    with pytest.raises(ConfigurationError, match=message):
        parameters_model("t", schema)


@pytest.mark.parametrize(
    ("extra", "message"),
    [
        ([], "give --database-url URL"),
        (
            ["--database-url", "sqlite://", "--data-policy", "/no/such.yaml"],
            "Cannot read the data policy file /no/such.yaml",
        ),
    ],
    ids=["no-database", "bad-policy"],
)
def test_the_server_refuses_unusable_settings(
    tmp_path: Path, extra: list[str], message: str
) -> None:
    done = subprocess.run(
        [sys.executable, "-m", "pi_notebook.mcp", "serve", *extra],
        capture_output=True,
        text=True,
        env=child_env(PI_NOTEBOOK_DATA_DIR=str(tmp_path)),
        timeout=60,
    )
    assert done.returncode == 2 and message in done.stderr
    assert done.stdout == ""  # stdout is the protocol channel: nothing else is written there
