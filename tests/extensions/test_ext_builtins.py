"""The built-in tools (B1): ``read``, ``ls`` and ``inspect_variable``, with their limits and refusals."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import pandas as pd
import pytest

from pi_notebook import ExtensionAPI, create_agent_session
from pi_notebook.builtins import files, variables
from pi_notebook.testing import ScriptedModel, text, tool_call


async def run_tool(name: str, args: dict[str, Any], **session_kwargs: Any) -> Any:
    """Call one tool through a whole session; return its tool-result message."""
    model = ScriptedModel([tool_call(name, args), text("done")])
    session = create_agent_session(model=model, audit=False, **session_kwargs)
    await session.prompt("go")
    [result] = [m for m in session.messages if m.role == "toolResult"]
    return result


def test_b1_builtins_are_registered_with_builtin_source() -> None:
    session = create_agent_session(model=ScriptedModel([]), audit=False)
    assert [(t.name, t.source_info.path) for t in session.get_all_tools()] == [
        ("read", "<builtin:read>"),
        ("ls", "<builtin:ls>"),
        ("inspect_variable", "<builtin:inspect_variable>"),
    ]
    assert (
        create_agent_session(
            model=ScriptedModel([]), builtin_tools=False, audit=False
        ).tool_registry
        == {}
    )


# -- read ----------------------------------------------------------------------------------


async def test_b1_read_a_file_under_cwd(tmp_path: Path) -> None:
    (tmp_path / "sub").mkdir()
    (tmp_path / "sub" / "notes.txt").write_text("alpha\nbeta\ngamma\n", encoding="utf-8")
    result = await run_tool("read", {"path": "sub/notes.txt"}, cwd=str(tmp_path))
    assert result.is_error is False
    assert result.content[0].text == "alpha\nbeta\ngamma"
    assert result.details["truncated"] is False
    assert result.details["total_lines"] == 3


async def test_b1_read_offset_and_limit_with_continuation_note(tmp_path: Path) -> None:
    (tmp_path / "n.txt").write_text("".join(f"line {i}\n" for i in range(1, 11)), encoding="utf-8")
    result = await run_tool("read", {"path": "n.txt", "offset": 3, "limit": 2}, cwd=str(tmp_path))
    assert result.content[0].text == (
        "line 3\nline 4\n\n[Showing lines 3-4 of 10. Use offset=5 to continue.]"
    )
    assert result.details["truncated"] is True


async def test_b1_read_truncates_at_line_limit(tmp_path: Path) -> None:
    total = files.READ_MAX_LINES + 50
    (tmp_path / "long.txt").write_text("x\n" * total, encoding="utf-8")
    result = await run_tool("read", {"path": "long.txt", "limit": 10**6}, cwd=str(tmp_path))
    body, note = result.content[0].text.split("\n\n[")
    assert len(body.splitlines()) == files.READ_MAX_LINES
    assert (
        note
        == f"Showing lines 1-{files.READ_MAX_LINES} of {total}. Use offset={files.READ_MAX_LINES + 1} to continue.]"
    )


async def test_b1_read_truncates_at_byte_limit(tmp_path: Path) -> None:
    line = "é" * 99  # 198 bytes in UTF-8, 99 characters
    (tmp_path / "wide.txt").write_text((line + "\n") * 1000, encoding="utf-8")
    result = await run_tool("read", {"path": "wide.txt"}, cwd=str(tmp_path))
    body, note = result.content[0].text.split("\n\n[")
    assert len(body.encode("utf-8")) <= files.READ_MAX_BYTES
    shown = len(body.splitlines())
    assert shown == files.READ_MAX_BYTES // (len(line.encode("utf-8")) + 1)
    assert note.startswith(f"Showing lines 1-{shown} of 1000. Use offset={shown + 1}")


async def test_b1_read_single_line_over_byte_limit_still_makes_progress(tmp_path: Path) -> None:
    (tmp_path / "blob.txt").write_text(
        "a" * (files.READ_MAX_BYTES * 2) + "\nnext line\n", encoding="utf-8"
    )
    result = await run_tool("read", {"path": "blob.txt"}, cwd=str(tmp_path))
    body = result.content[0].text
    assert body.startswith("a" * 1000)
    assert len(body.encode("utf-8")) < files.READ_MAX_BYTES + 300
    assert "Use offset=2 to continue" in body
    assert result.is_error is False


@pytest.mark.parametrize("path", ["../outside.txt", "/etc/hostname", "sub/../../outside.txt"])
async def test_b1_read_refuses_paths_outside_cwd(path: str, tmp_path: Path) -> None:
    cwd = tmp_path / "work"
    (cwd / "sub").mkdir(parents=True)
    (tmp_path / "outside.txt").write_text("private", encoding="utf-8")
    result = await run_tool("read", {"path": path}, cwd=str(cwd))
    assert result.is_error is True
    assert "outside the working directory" in result.content[0].text
    assert "private" not in result.content[0].text


async def test_b1_read_refuses_symlink_escaping_cwd(tmp_path: Path) -> None:
    cwd = tmp_path / "work"
    cwd.mkdir()
    (tmp_path / "secret.txt").write_text("private", encoding="utf-8")
    os.symlink(tmp_path / "secret.txt", cwd / "link.txt")
    result = await run_tool("read", {"path": "link.txt"}, cwd=str(cwd))
    assert result.is_error is True and "outside the working directory" in result.content[0].text


async def test_b1_read_missing_file_and_directory_are_errors(tmp_path: Path) -> None:
    (tmp_path / "d").mkdir()
    missing = await run_tool("read", {"path": "nope.txt"}, cwd=str(tmp_path))
    directory = await run_tool("read", {"path": "d"}, cwd=str(tmp_path))
    assert missing.is_error and missing.content[0].text == "nope.txt is not a file"
    assert directory.is_error and directory.content[0].text == "d is not a file"


async def test_b1_read_offset_past_end_is_an_error(tmp_path: Path) -> None:
    (tmp_path / "short.txt").write_text("one\ntwo\n", encoding="utf-8")
    result = await run_tool("read", {"path": "short.txt", "offset": 5}, cwd=str(tmp_path))
    assert result.is_error is True
    assert result.content[0].text == "Offset 5 is beyond the end of short.txt (2 lines)"


async def test_b1_read_rejects_invalid_arguments(tmp_path: Path) -> None:
    result = await run_tool("read", {"path": "", "offset": 0}, cwd=str(tmp_path))
    assert result.is_error is True
    assert result.content[0].text.startswith('Validation failed for tool "read":')


# -- ls ------------------------------------------------------------------------------------


async def test_b1_ls_lists_sorted_with_directory_marks(tmp_path: Path) -> None:
    (tmp_path / "b.txt").write_text("", encoding="utf-8")
    (tmp_path / "A.csv").write_text("", encoding="utf-8")
    (tmp_path / "data").mkdir()
    result = await run_tool("ls", {}, cwd=str(tmp_path))
    assert result.content[0].text == "A.csv\nb.txt\ndata/"
    assert result.details["entries"] == 3 and result.details["truncated"] is False
    empty = await run_tool("ls", {"path": "data"}, cwd=str(tmp_path))
    assert empty.content[0].text == "(empty directory)"


async def test_b1_ls_truncates_with_a_note(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(files, "LS_MAX_ENTRIES", 5)
    for i in range(8):
        (tmp_path / f"f{i}.txt").write_text("", encoding="utf-8")
    result = await run_tool("ls", {}, cwd=str(tmp_path))
    lines = result.content[0].text.split("\n")
    assert lines[:5] == [f"f{i}.txt" for i in range(5)]
    assert lines[-1] == "[3 more entries not shown.]"
    assert result.details["truncated"] is True


async def test_b1_ls_refuses_outside_and_non_directories(tmp_path: Path) -> None:
    (tmp_path / "work").mkdir()
    (tmp_path / "work" / "f.txt").write_text("", encoding="utf-8")
    outside = await run_tool("ls", {"path": ".."}, cwd=str(tmp_path / "work"))
    not_dir = await run_tool("ls", {"path": "f.txt"}, cwd=str(tmp_path / "work"))
    assert outside.is_error and "outside the working directory" in outside.content[0].text
    assert not_dir.is_error and not_dir.content[0].text == "f.txt is not a directory"


# -- inspect_variable ------------------------------------------------------------------------


async def test_b1_inspect_dataframe_type_shape_columns_head() -> None:
    df = pd.DataFrame({"city": [f"c{i}" for i in range(20)], "pop": range(20)})
    result = await run_tool("inspect_variable", {"name": "df"}, namespace={"df": df})
    body = result.content[0].text
    assert result.is_error is False
    kind = f"{pd.DataFrame.__module__}.DataFrame"  # pandas.core.frame before pandas 3
    assert body.startswith(f"type: {kind}\n")
    assert "shape: 20 rows x 2 columns" in body
    assert f"columns: city: {df.dtypes['city']}, pop: int64" in body
    head = body.split("head:\n", 1)[1]
    assert "c4" in head and "c5" not in head  # HEAD_ROWS rows only
    assert result.details == {"type": kind, "shape": [20, 2], "columns": ["city", "pop"]}


async def test_b1_inspect_wide_dataframe_is_truncated() -> None:
    wide = pd.DataFrame({f"column_{i}": [i] for i in range(2000)})
    result = await run_tool("inspect_variable", {"name": "wide"}, namespace={"wide": wide})
    body = result.content[0].text
    assert len(body) <= variables.REPR_MAX_CHARS * 2 + len("\n[truncated]")
    assert body.endswith("[truncated]")
    assert len(result.details["columns"]) == 2000


async def test_b1_inspect_other_values_are_bounded() -> None:
    namespace = {"n": 42, "items": list(range(10_000)), "s": "x" * 100_000}
    n = await run_tool("inspect_variable", {"name": "n"}, namespace=namespace)
    items = await run_tool("inspect_variable", {"name": "items"}, namespace=namespace)
    s = await run_tool("inspect_variable", {"name": "s"}, namespace=namespace)
    assert n.content[0].text == "type: int\nvalue: 42"
    assert items.is_error is False
    assert "length: 10000" in items.content[0].text and "..." in items.content[0].text
    assert items.details == {"type": "list", "length": 10000}
    assert len(s.content[0].text) <= variables.REPR_MAX_CHARS * 2 + 100


async def test_b1_inspect_missing_variable_and_missing_namespace() -> None:
    missing = await run_tool("inspect_variable", {"name": "nope"}, namespace={"df": 1})
    no_namespace = await run_tool("inspect_variable", {"name": "df"})
    assert (
        missing.is_error and missing.content[0].text == "No variable named 'nope' in the namespace"
    )
    assert no_namespace.is_error and "No variable named 'df'" in no_namespace.content[0].text


async def test_b1_inspect_reads_namespace_live() -> None:
    namespace: dict[str, Any] = {}
    model = ScriptedModel([tool_call("inspect_variable", {"name": "late"}), text("done")])
    session = create_agent_session(model=model, namespace=namespace, audit=False)
    namespace["late"] = [1, 2, 3]  # defined after the session was built, as in a notebook
    await session.prompt("go")
    assert session.messages[2].is_error is False
    assert "length: 3" in session.messages[2].content[0].text


async def test_b1_extension_read_replaces_builtin_and_sdk_read_replaces_both(
    make_tool: Any,
) -> None:
    def ext(pi: ExtensionAPI) -> None:
        pi.register_tool(make_tool("read", description="extension read"))

    with_ext = create_agent_session(model=ScriptedModel([]), extensions=[ext], audit=False)
    assert with_ext.tool_registry["read"].source_info.path == "<inline:1>"
    both = create_agent_session(
        model=ScriptedModel([]), extensions=[ext], custom_tools=[make_tool("read")], audit=False
    )
    assert both.tool_registry["read"].source_info.path == "<sdk:read>"
