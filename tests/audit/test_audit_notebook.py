"""Notebook provenance: stamped outputs checked against the audit store.

A real session makes the calls; the test stamps an output the way the notebook does (the
calls' last hashes, a durable ``notebook_output`` record whose hash goes into the metadata),
writes the ``.ipynb`` with nbformat, and then alters it in the ways a shared file can be.
"""

from __future__ import annotations

import copy
import json
from pathlib import Path
from typing import Any

import nbformat
import pytest
import sqlalchemy as sa

from pi_notebook import create_agent_session
from pi_notebook.audit import AuditLog, output_digest, verify_notebook
from pi_notebook.audit.notebook import prompt_body, prompt_digest
from pi_notebook.audit.records import NotebookOutput
from pi_notebook.database import database_extension
from pi_notebook.errors import AuditError
from pi_notebook.testing import ScriptedModel, text, tool_call


class ApprovingUI:
    async def confirm(
        self, title: str, message: str, *, signal: Any = None, timeout: float | None = None
    ) -> bool:
        return True


async def stamped_output(tmp_path: Path, log: AuditLog) -> dict[str, Any]:
    """A run of two calls, stamped as the notebook stamps its durable record."""
    db_url = f"sqlite:///{tmp_path}/data.sqlite"
    engine = sa.create_engine(db_url)
    with engine.begin() as conn:
        conn.exec_driver_sql("CREATE TABLE items (id INTEGER, name TEXT)")
    engine.dispose()
    session = create_agent_session(
        model=ScriptedModel(
            [
                tool_call("query_database", {"sql": "SELECT count(*) FROM items"}, id="c-read"),
                tool_call(
                    "query_database", {"sql": "INSERT INTO items VALUES (1, 'a')"}, id="c-write"
                ),
                text("Added one item."),
            ]
        ),
        extensions=[database_extension(url=db_url)],
        audit=log,
        ui=ApprovingUI(),
        builtin_tools=False,
    )
    await session.prompt("add an item")
    await session.close()
    calls = log.calls_dataframe(session=log.session_id).set_index("tool_call_id")
    last = log.last_hashes(["c-read", "c-write", "c-nothing"])
    assert set(last) == {"c-read", "c-write"}
    frame = log.to_dataframe(session=log.session_id)
    assert last["c-write"] == frame[frame["tool_call_id"] == "c-write"]["hash"].iloc[-1]
    stamped_calls = [
        {
            "tool_call_id": cid,
            "tool_name": "query_database",
            "args_hash": calls.loc[cid, "args_hash"],
            "decision": calls.loc[cid, "decision"],
            "outcome": calls.loc[cid, "outcome"],
            "rows": int(calls.loc[cid, "rows"]),
            "audit_hash": last[cid],
        }
        for cid in ("c-read", "c-write")
    ]
    data = {
        "text/html": "<div class='pi-rec pi-record' data-run='run-1'><p>Added one item.</p>"
        "<pre>INSERT INTO items VALUES (1, 'a')</pre></div>",
        "text/markdown": "Added one item.",
        "text/plain": "Added one item.",
    }
    digest = output_digest(data)
    # As the notebook writes it: the record also binds the cell's prompt.
    record_hash = await log.commit(
        "notebook_output",
        {
            "run_id": "run-1",
            "output_digest": digest,
            "calls": stamped_calls,
            "prompt_digest": prompt_digest("add an item"),
        },
    )
    assert record_hash is not None and len(record_hash) == 64
    meta = {
        "run_id": "run-1",
        "session_id": log.session_id,
        "model": "scripted",
        "output_digest": digest,
        "record_hash": record_hash,
        "calls": stamped_calls,
    }
    return {"output_type": "display_data", "data": data, "metadata": {"pi_notebook": meta}}


def write_notebook(
    path: Path,
    output: dict[str, Any],
    *extra: nbformat.NotebookNode,
    source: str = "%%pi\nadd an item\n",
) -> Path:
    nb = nbformat.v4.new_notebook()
    nb.cells = [
        nbformat.v4.new_markdown_cell("# Report"),
        nbformat.v4.new_code_cell(
            "print('hi')", outputs=[nbformat.v4.new_output("stream", name="stdout", text="hi\n")]
        ),
        nbformat.v4.new_code_cell(source, outputs=[nbformat.from_dict(output)]),
        *extra,
    ]
    nbformat.write(nb, str(path))
    return path


@pytest.fixture
async def case(tmp_path: Path) -> tuple[AuditLog, dict[str, Any]]:
    log = AuditLog(f"sqlite:///{tmp_path}/audit.sqlite")
    output = await stamped_output(tmp_path, log)
    yield log, output
    log.close()


async def test_an_untouched_notebook_verifies(tmp_path: Path, case: Any) -> None:
    log, output = case
    path = write_notebook(tmp_path / "run.ipynb", output)
    report = verify_notebook(path, log)
    assert report.ok, report.problems
    assert (report.outputs, report.calls) == (1, 2)
    assert str(report) == "OK: 1 stamped output(s) and 2 call(s) match the audit."
    # By URL too, as a colleague would with the shared store.
    assert verify_notebook(path, f"sqlite:///{tmp_path}/audit.sqlite").ok


async def test_an_edited_output_is_named(tmp_path: Path, case: Any) -> None:
    log, output = case
    edited = copy.deepcopy(output)
    edited["data"]["text/html"] = edited["data"]["text/html"].replace("one", "ten")
    report = verify_notebook(write_notebook(tmp_path / "run.ipynb", edited), log)
    assert not report.ok
    assert report.problems == [
        "cell 2 output 0: altered (its content does not match its audit record)"
    ]
    assert str(report).splitlines() == [
        "NOT OK: 1 problem(s) in 1 stamped output(s):",
        "- cell 2 output 0: altered (its content does not match its audit record)",
    ]


async def test_an_unknown_output_is_named(tmp_path: Path, case: Any) -> None:
    log, output = case
    forged = copy.deepcopy(output)
    forged["metadata"]["pi_notebook"]["record_hash"] = "f" * 64
    report = verify_notebook(write_notebook(tmp_path / "run.ipynb", forged), log)
    assert not report.ok and len(report.problems) == 1
    assert report.problems[0].startswith("cell 2 output 0: unknown output")


@pytest.mark.parametrize(
    ("field", "value", "expected"),
    [
        ("decision", "allowed", "its calls differ"),
        ("audit_hash", "0" * 64, "its calls differ"),
        ("outcome", "ok-ish", "its calls differ"),
    ],
)
async def test_an_edited_call_stamp_is_named(
    tmp_path: Path, case: Any, field: str, value: str, expected: str
) -> None:
    log, output = case
    edited = copy.deepcopy(output)
    edited["metadata"]["pi_notebook"]["calls"][1][field] = value
    report = verify_notebook(write_notebook(tmp_path / "run.ipynb", edited), log)
    assert not report.ok
    assert any(expected in p and p.startswith("cell 2 output 0") for p in report.problems)


async def test_a_stamp_that_disagrees_with_the_call_records_is_named(
    tmp_path: Path, case: Any
) -> None:
    log, output = case
    # Record a second notebook_output whose calls claim another decision and hash: the
    # record matches the stamp, but the call records do not.
    meta = copy.deepcopy(output["metadata"]["pi_notebook"])
    meta["calls"][1] |= {"decision": "rejected", "audit_hash": "1" * 64, "args_hash": "2" * 64}
    meta["record_hash"] = await log.commit(
        NotebookOutput(run_id="run-1", output_digest=meta["output_digest"], calls=meta["calls"])
    )
    forged = {**output, "metadata": {"pi_notebook": meta}}
    problems = verify_notebook(write_notebook(tmp_path / "run.ipynb", forged), log).problems
    assert problems == [
        "cell 2 output 0: call 'c-write' is altered (its audit_hash is not the hash of its "
        "last audit record)",
        "cell 2 output 0: call 'c-write' is altered (args_hash differs from the audit)",
        "cell 2 output 0: call 'c-write' is altered (decision 'rejected', the audit recorded "
        "'approved')",
    ]


@pytest.mark.parametrize(
    ("change", "expected"),
    [
        ({"decision": "granted"}, "(decision 'granted', the audit recorded 'approved')"),
        ({"outcome": "error"}, "(outcome 'error', the audit recorded success)"),
        ({"rows": 7}, "(rows 7, the audit recorded 1)"),
    ],
)
async def test_a_stamp_that_misstates_decision_outcome_or_rows_is_named(
    tmp_path: Path, case: Any, change: dict[str, Any], expected: str
) -> None:
    """A record whose own notebook_output was written with the wrong word, outcome or row
    count (the record and its stamp agree) is still caught against the call's records."""
    log, output = case
    meta = copy.deepcopy(output["metadata"]["pi_notebook"])
    meta["calls"][1] |= change
    meta["record_hash"] = await log.commit(
        NotebookOutput(run_id="run-1", output_digest=meta["output_digest"], calls=meta["calls"])
    )
    forged = {**output, "metadata": {"pi_notebook": meta}}
    problems = verify_notebook(write_notebook(tmp_path / "run.ipynb", forged), log).problems
    assert problems == [f"cell 2 output 0: call 'c-write' is altered {expected}"]


async def test_a_tampered_store_fails_the_notebook_too(tmp_path: Path, case: Any) -> None:
    log, output = case
    path = write_notebook(tmp_path / "run.ipynb", output)
    with log.engine.begin() as conn:
        conn.exec_driver_sql(
            "UPDATE pi_audit_records SET payload = replace(payload, 'INSERT', 'UPSERT') "
            "WHERE kind = 'final_args'"
        )
    report = verify_notebook(path, log)
    assert not report.ok
    assert any(p.startswith("the audit chain is broken") for p in report.problems)


def test_a_file_that_is_not_a_notebook_is_refused(tmp_path: Path) -> None:
    bad = tmp_path / "bad.ipynb"
    bad.write_text(json.dumps({"cells": "nope"}))
    with pytest.raises(AuditError, match="not a readable notebook"):
        verify_notebook(bad, f"sqlite:///{tmp_path}/audit.sqlite")
    with pytest.raises(FileNotFoundError):
        verify_notebook(tmp_path / "missing.ipynb", f"sqlite:///{tmp_path}/audit.sqlite")


UNSTAMPED = "unstamped (it looks like a pi_notebook record but has no provenance stamp"


async def test_a_record_whose_stamp_was_removed_is_named(tmp_path: Path, case: Any) -> None:
    log, output = case
    stripped = copy.deepcopy(output)
    stripped["metadata"] = {}
    stripped["data"]["text/html"] = stripped["data"]["text/html"].replace("one", "ten")
    report = verify_notebook(write_notebook(tmp_path / "run.ipynb", stripped), log)
    assert not report.ok
    assert report.outputs == 0
    assert [p.split(";")[0] for p in report.problems] == [f"cell 2 output 0: {UNSTAMPED}"]


async def test_a_record_pasted_into_a_new_cell_is_named(tmp_path: Path, case: Any) -> None:
    """A forged record: copied HTML with no stamp, or only a record-like text form."""
    log, output = case
    fake_html = copy.deepcopy(output)
    fake_html["metadata"] = {}
    fake_html["data"]["text/html"] = fake_html["data"]["text/html"].replace("one", "FORGED")
    fake_text = nbformat.v4.new_output(
        "display_data", data={"text/plain": "✔ done · 1 call · model offline\n\nAll good."}
    )
    extra = [
        nbformat.v4.new_code_cell("%%pi\nx", outputs=[nbformat.from_dict(fake_html)]),
        nbformat.v4.new_code_cell("%%pi\ny", outputs=[fake_text]),
    ]
    report = verify_notebook(write_notebook(tmp_path / "run.ipynb", output, *extra), log)
    assert not report.ok
    assert report.outputs == 1
    assert [p.split(";")[0] for p in report.problems] == [
        f"cell 3 output 0: {UNSTAMPED}",
        f"cell 4 output 0: {UNSTAMPED}",
    ]


async def test_ordinary_outputs_are_not_taken_for_records(tmp_path: Path, case: Any) -> None:
    log, output = case
    table = nbformat.v4.new_output(
        "execute_result",
        execution_count=1,
        data={
            "text/html": "<table class='dataframe'><tr><td>done</td></tr></table>",
            "text/plain": "done · 3 calls · model of the week",
        },
    )
    extra = [nbformat.v4.new_code_cell("df", outputs=[table])]
    report = verify_notebook(write_notebook(tmp_path / "run.ipynb", output, *extra), log)
    assert report.ok, report.problems


async def test_a_record_duplicated_into_a_second_cell_is_named(tmp_path: Path, case: Any) -> None:
    log, output = case
    copied = nbformat.v4.new_code_cell(
        "%%pi\nadd an item", outputs=[nbformat.from_dict(copy.deepcopy(output))]
    )
    report = verify_notebook(write_notebook(tmp_path / "run.ipynb", output, copied), log)
    assert not report.ok
    assert report.problems == [
        "cell 3 output 0: duplicated (run run-1… is already recorded at cell 2 output 0)"
    ]


async def test_an_edited_prompt_is_named(tmp_path: Path, case: Any) -> None:
    log, output = case
    path = write_notebook(tmp_path / "run.ipynb", output, source="%%pi\ndelete every item")
    report = verify_notebook(path, log)
    assert report.problems == [
        "cell 2 output 0: altered (its cell's prompt is not the prompt that ran)"
    ]
    # Whitespace around the prompt and the --background option are not edits.
    source = "%%pi --background\n\n  add an item  \n"
    assert verify_notebook(write_notebook(tmp_path / "bg.ipynb", output, source=source), log).ok


async def test_a_record_without_a_prompt_digest_still_verifies(tmp_path: Path, case: Any) -> None:
    """Records written before the prompt was bound: the prompt is not checked."""
    log, output = case
    meta = copy.deepcopy(output["metadata"]["pi_notebook"])
    meta["record_hash"] = await log.commit(
        NotebookOutput(run_id="run-1", output_digest=meta["output_digest"], calls=meta["calls"])
    )
    older = {**output, "metadata": {"pi_notebook": meta}}
    path = write_notebook(tmp_path / "run.ipynb", older, source="%%pi\nsomething else")
    assert verify_notebook(path, log).ok


def test_prompt_body_is_the_cell_below_the_magic() -> None:
    assert prompt_body("%%pi\n  count the orders \n") == "count the orders"
    assert prompt_body("%%pi --background\nhi") == "hi"
    assert prompt_body("print(1)") is None
    assert prompt_body("%%pip install x") is None


async def another_run(log: AuditLog, run_id: str, prompt: str) -> dict[str, Any]:
    """A second settled run of the same session (no calls), stamped as the notebook does."""
    data = {
        "text/html": f"<div class='pi-record'><p>{prompt}: done.</p></div>",
        "text/plain": f"{prompt}: done.",
    }
    digest = output_digest(data)
    record_hash = await log.commit(
        "notebook_output",
        {
            "run_id": run_id,
            "output_digest": digest,
            "calls": [],
            "prompt_digest": prompt_digest(prompt),
        },
    )
    meta = {
        "run_id": run_id,
        "session_id": log.session_id,
        "model": "scripted",
        "output_digest": digest,
        "record_hash": record_hash,
        "calls": [],
    }
    return {"output_type": "display_data", "data": data, "metadata": {"pi_notebook": meta}}


def _pi_cell(prompt: str, *outputs: dict[str, Any]) -> nbformat.NotebookNode:
    return nbformat.v4.new_code_cell(
        f"%%pi\n{prompt}", outputs=[nbformat.from_dict(o) for o in outputs]
    )


MISSING = "missing: run run-2… of session"


async def test_a_deleted_record_is_named_and_a_renamed_copy_verifies_the_same(
    tmp_path: Path, case: Any
) -> None:
    log, output = case
    second = await another_run(log, "run-2", "drop the old items")
    whole = write_notebook(tmp_path / "run.ipynb", output, _pi_cell("drop the old items", second))
    assert verify_notebook(whole, log).ok, verify_notebook(whole, log).problems
    # The second record's output deleted (its cell kept), or its whole cell deleted.
    for extra in ([_pi_cell("drop the old items")], []):
        path = write_notebook(tmp_path / "shared.ipynb", output, *extra)
        report = verify_notebook(path, log)
        assert not report.ok and [p[: len(MISSING)] for p in report.problems] == [MISSING]
        assert log.session_id in report.problems[0]
        renamed = path.rename(tmp_path / "renamed copy.ipynb")
        assert verify_notebook(renamed, log).problems == report.problems


async def test_a_cell_run_again_with_the_same_prompt_replaces_its_record(
    tmp_path: Path, case: Any
) -> None:
    log, output = case
    await another_run(log, "run-2", "count the items")
    third = await another_run(log, "run-3", "count the items")  # the same cell, run again
    path = write_notebook(tmp_path / "run.ipynb", output, _pi_cell("count the items", third))
    assert verify_notebook(path, log).ok, verify_notebook(path, log).problems


async def test_a_deleted_record_of_one_of_two_cells_with_one_prompt_is_named(
    tmp_path: Path, case: Any
) -> None:
    log, output = case
    await another_run(log, "run-2", "count the items")
    third = await another_run(log, "run-3", "count the items")  # a second cell, same prompt
    path = write_notebook(
        tmp_path / "run.ipynb",
        output,
        _pi_cell("count the items"),
        _pi_cell("count the items", third),
    )
    report = verify_notebook(path, log)
    assert [p[: len(MISSING)] for p in report.problems] == [MISSING]
