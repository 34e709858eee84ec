"""The example extensions in ``extensions/``: event wrapping (redact) and same-name
replacement (read_override), loaded by path as a user would (chapter §13, S20, S22)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from pi_notebook import ExtensionAPI, TextContent, ToolResult, create_agent_session
from pi_notebook.builtins import read_tool
from pi_notebook.testing import ScriptedModel, text, tool_call

EXTENSIONS = Path(__file__).resolve().parents[2] / "extensions"
REDACT = EXTENSIONS / "redact.py"
READ_OVERRIDE = EXTENSIONS / "read_override.py"


def leaky_tool(make_tool: Any, payload: str) -> Any:
    async def execute(
        tool_call_id: str, params: Any, signal: Any, on_update: Any, ctx: Any
    ) -> ToolResult:
        return ToolResult(
            content=[TextContent(text=payload), {"type": "text", "text": "clean"}],
            details={"raw": payload},
        )  # type: ignore[list-item]

    return make_tool("leak", execute=execute)


@pytest.mark.parametrize(
    ("secret", "expected"),
    [
        (
            "postgresql://analyst:hunter2@db.internal:5432/sales",
            "postgresql://analyst:***@db.internal:5432/sales",
        ),
        ("mysql+pymysql://root:p%40ss@localhost/x", "mysql+pymysql://root:***@localhost/x"),
        ("password=swordfish; user=bob", "password=***; user=bob"),
        ('{"api_key": "abc123def456"}', '{"api_key": "***"}'),
        ("Authorization: Bearer eyJhbGciOiJIUzI1NiJ9.payload", "Authorization: Bearer ***"),
        ("key sk-proj-ABCDEFGHIJKLMNOPQRSTUV in env", "key *** in env"),
        ("sk-ant-api03-abcdefghijklmnopqrstu", "***"),
        ("AWS AKIAIOSFODNN7EXAMPLE", "AWS ***"),
        ("ghp_abcdefghijklmnopqrstuvwxyz0123", "***"),
        ("AIzaSyA1234567890abcdefghijklmnopqrstu", "***"),
    ],
)
async def test_s22_redact_masks_secrets_in_content(
    secret: str, expected: str, make_tool: Any, results_of: Any
) -> None:
    def ext(pi: ExtensionAPI) -> None:
        pi.register_tool(leaky_tool(make_tool, f"row 1: {secret}"))

    model = ScriptedModel([tool_call("leak", {}), text("done")])
    session = create_agent_session(model=model, extensions=[ext, REDACT], audit=False)
    await session.prompt("go")
    [result] = results_of(session)
    assert [p.text for p in result.content] == [f"row 1: {expected}", "clean"]
    assert result.is_error is False
    # what the model sees on the next request is the redacted text
    seen = model.calls[1].messages[-1]
    assert seen.content[0].text == f"row 1: {expected}"
    assert session.diagnostics == []


async def test_s22_redact_leaves_clean_results_untouched(make_tool: Any) -> None:
    returned: list[ToolResult] = []
    ends: list[Any] = []

    async def execute(
        tool_call_id: str, params: Any, signal: Any, on_update: Any, ctx: Any
    ) -> ToolResult:
        returned.append(
            ToolResult(content=[TextContent(text="SELECT count(*) -> 42")], details={"n": 42})
        )
        return returned[0]

    def ext(pi: ExtensionAPI) -> None:
        pi.register_tool(make_tool("query", execute=execute))
        pi.on("tool_execution_end", lambda e, c: ends.append(e.result))

    model = ScriptedModel([tool_call("query", {}), text("done")])
    session = create_agent_session(model=model, extensions=[ext, str(REDACT)], audit=False)
    await session.prompt("go")
    assert ends == returned  # no patch: exactly what execute returned


async def test_s22_redact_wraps_builtin_tools_too(tmp_path: Path, results_of: Any) -> None:
    (tmp_path / ".env").write_text("DATABASE_URL=postgres://app:s3cr3t@db/app\n", encoding="utf-8")
    model = ScriptedModel([tool_call("read", {"path": ".env"}), text("done")])
    session = create_agent_session(model=model, extensions=[REDACT], cwd=str(tmp_path), audit=False)
    await session.prompt("go")
    [result] = results_of(session)
    assert result.content[0].text == "DATABASE_URL=postgres://app:***@db/app"
    assert "s3cr3t" not in repr(model.calls[1].messages)


async def test_s20_read_override_replaces_builtin_read(tmp_path: Path, results_of: Any) -> None:
    (tmp_path / "poem.txt").write_text("roses\nviolets\nsugar\n", encoding="utf-8")
    model = ScriptedModel([tool_call("read", {"path": "poem.txt", "offset": 2}), text("done")])
    session = create_agent_session(
        model=model, extensions=[READ_OVERRIDE], cwd=str(tmp_path), audit=False
    )
    await session.prompt("go")
    [result] = results_of(session)
    assert result.content[0].text == "2\tviolets\n3\tsugar"
    assert result.details["total_lines"] == 3
    info = next(t for t in session.get_all_tools() if t.name == "read")
    assert info.source_info.path == str(READ_OVERRIDE)
    assert info.label == "Read file (numbered)"
    assert (
        "- read: read a text file under the working directory, with line numbers"
        in model.calls[0].system_prompt
    )
    assert "- Cite line numbers from read when you quote a file." in model.calls[0].system_prompt
    assert [t.name for t in session.get_all_tools()].count("read") == 1


async def test_s20_read_override_has_its_own_backend_and_limits(
    tmp_path: Path, results_of: Any
) -> None:
    (tmp_path / "work").mkdir()
    (tmp_path / "secret.txt").write_text("private", encoding="utf-8")
    (tmp_path / "work" / "long.txt").write_text(
        "".join(f"l{i}\n" for i in range(1, 13)), encoding="utf-8"
    )
    model = ScriptedModel(
        [
            [
                tool_call("read", {"path": "../secret.txt"}),
                tool_call("read", {"path": "long.txt", "limit": 10}),
            ],
            text("done"),
        ]
    )
    session = create_agent_session(
        model=model, extensions=[READ_OVERRIDE], cwd=str(tmp_path / "work"), audit=False
    )
    await session.prompt("go")
    outside, long = results_of(session)
    assert outside.is_error and "outside the working directory" in outside.content[0].text
    assert long.content[0].text.splitlines()[0] == " 1\tl1"
    assert long.content[0].text.endswith("[2 more lines. Use offset=11 to continue.]")


async def test_s20_read_override_metadata_exposes_no_original_execute() -> None:
    seen: list[Any] = []

    def inspector(pi: ExtensionAPI) -> None:
        pi.on("session_start", lambda e, c: seen.extend(pi.get_all_tools()))

    session = create_agent_session(
        model=ScriptedModel([text("hi")]), extensions=[READ_OVERRIDE, inspector], audit=False
    )
    await session.prompt("go")
    registered = session.tool_registry["read"].definition
    assert registered.execute is not read_tool.execute  # replaced, not decorated
    [read_info] = [info for info in seen if info.name == "read"]
    assert read_info.label == "Read file (numbered)"  # only the override's metadata is there
    assert all(not callable(v) for info in seen for v in vars(info).values())


async def test_sdk_custom_read_replaces_read_override(make_tool: Any, results_of: Any) -> None:
    model = ScriptedModel([tool_call("read", {}), text("done")])
    session = create_agent_session(
        model=model, extensions=[READ_OVERRIDE], custom_tools=[make_tool("read")], audit=False
    )
    await session.prompt("go")
    assert session.tool_registry["read"].source_info.path == "<sdk:read>"
    assert results_of(session)[0].details == {"tool": "read"}


async def test_examples_load_together(tmp_path: Path, results_of: Any) -> None:
    (tmp_path / "conf.txt").write_text("url = https://u:pw12345@host/\n", encoding="utf-8")
    model = ScriptedModel([tool_call("read", {"path": "conf.txt"}), text("done")])
    session = create_agent_session(
        model=model, extensions=[READ_OVERRIDE, REDACT], cwd=str(tmp_path), audit=False
    )
    await session.prompt("go")
    assert results_of(session)[0].content[0].text == "1\turl = https://u:***@host/"
