# ruff: noqa: F811 - the kernel fixture ``kernel`` is imported from test_nb_kernel
"""The notebook side of the approval protocol: ``NotebookUI.request_approval`` renders the request it is given on
its own call's card (preview, editable SQL, a scope to grant) and returns the outcome."""

from __future__ import annotations

import asyncio
import re
from dataclasses import dataclass
from typing import Any

import pandas as pd
import pytest
from IPython.core.error import UsageError
from pydantic import BaseModel

from pi_notebook import TextContent, ToolDefinition, ToolResult, create_agent_session, define_tool
from pi_notebook.approvals import ApprovalOutcome, ApprovalRequest, Grant, WritePreview
from pi_notebook.database import query_call_view
from pi_notebook.notebook import ApprovalPrompt, NotebookUI, Run
from pi_notebook.testing import ScriptedModel, text, tool_call


@dataclass(frozen=True, kw_only=True)
class _Request(ApprovalRequest):
    grant_scope: Grant | None = None  # the consent protocol's field, on any version of it


class _Sql(BaseModel):
    sql: str


def _gated_session(
    ui: NotebookUI,
    outcomes: dict[str, Any],
    calls: list[tuple[str, str]],
    timeout: float | None = None,
) -> Any:
    """Two ``write`` calls in one batch; a gate asks ``request_approval`` for each."""

    async def write(
        tool_call_id: str, params: _Sql, signal: Any, on_update: Any, ctx: Any
    ) -> ToolResult:
        return ToolResult(content=[TextContent(text=f"ran {params.sql}")])

    def extension(pi: Any) -> None:
        # It shows its calls as SQL (its statement is the editable code), as the database does.
        pi.register_tool(
            define_tool(
                ToolDefinition(
                    name="write",
                    label="Write",
                    description="Write.",
                    parameters=_Sql,
                    execute=write,
                    describe_call=query_call_view,
                )
            )
        )

        async def gate(event: Any, ctx: Any) -> dict[str, Any] | None:
            sample = pd.DataFrame({"customer_id": [7, 8], "city": ["Bergen", "Oslo"]})
            request = _Request(
                tool_call_id=event.tool_call_id,
                tool_name="write",
                title="Database write",
                args={"sql": event.input.sql},
                args_hash="h-" + event.tool_call_id,
                reasons=("UPDATE changes data",),
                editable=True,
                timeout_s=timeout,
                preview=WritePreview(
                    affected_rows=1234,
                    plan="SCAN customers",
                    sample=sample,
                    method="counted in a transaction that was rolled back",
                ),
                grant_scope=Grant(
                    operations=("UPDATE",), tables=("customers",), max_rows=1234, ttl_s=1800
                ),
            )
            try:
                outcome = await asyncio.wait_for(ctx.ui.request_approval(request), timeout)
            except TimeoutError:
                outcome = ApprovalOutcome("expired")
            outcomes[event.tool_call_id] = outcome
            if outcome.decision != "approved":
                return {"block": True, "reason": f"Not approved: {outcome.decision}"}
            if outcome.edited_args:
                event.input.sql = outcome.edited_args["sql"]
            return None

        pi.on("tool_call", gate)

    steps = [[tool_call("write", {"sql": sql}, id=call_id) for call_id, sql in calls], text("ok")]
    return create_agent_session(
        model=ScriptedModel(steps), extensions=[extension], ui=ui, audit=False, builtin_tools=False
    )


def _run(
    ui: NotebookUI,
    outcomes: dict[str, Any],
    calls: list[tuple[str, str]],
    timeout: float | None = None,
) -> Run:
    holder: dict[str, Run] = {}
    ui._get_run = lambda: holder.get("run")  # pyright: ignore[reportPrivateUsage]
    run = Run(_gated_session(ui, outcomes, calls, timeout), "go")
    holder["run"] = run
    run.start()
    return run


async def test_each_request_lands_on_its_own_card_with_its_preview() -> None:
    ui, outcomes = NotebookUI(lambda: None), {}
    run = _run(
        ui,
        outcomes,
        [("c1", "UPDATE customers SET city = 'A'"), ("c2", "UPDATE customers SET city = 'B'")],
    )
    first = await run.next_prompt(timeout=10)
    assert isinstance(first, ApprovalPrompt) and first.tool_call_id == "c1"
    assert run.view.card("c1").prompt is first  # the card the request names
    shown = " ".join(getattr(w, "value", "") for w in first.children)
    assert "Would change 1,234 rows" in shown and "rolled back" in shown
    assert "Bergen" in shown and "SCAN customers" in shown and "UPDATE changes data" in shown
    assert first.editor is not None and first.editor.value == "UPDATE customers SET city = 'A'"
    first.approve_button.click()
    second = await run.next_prompt(timeout=10)
    assert second.tool_call_id == "c2" and run.view.card("c2").prompt is second  # type: ignore[attr-defined]
    second.reject_button.click()  # type: ignore[attr-defined]
    state = await run.wait(timeout=10)
    assert outcomes["c1"] == ApprovalOutcome("approved")
    assert outcomes["c2"].decision == "rejected"
    assert (state.cards["c1"].word, state.cards["c2"].word) == ("approved", "rejected")
    assert first.approve_button.disabled and first.editor.disabled


async def test_edit_then_approve_carries_the_edited_sql() -> None:
    ui, outcomes = NotebookUI(lambda: None), {}
    run = _run(ui, outcomes, [("e1", "UPDATE customers SET city = 'A'")])
    prompt = await run.next_prompt(timeout=10)
    assert isinstance(prompt, ApprovalPrompt) and prompt.editor is not None
    prompt.editor.value = "UPDATE customers SET city = 'A' WHERE customer_id = 7"
    prompt.approve_button.click()
    state = await run.wait(timeout=10)
    assert outcomes["e1"].edited_args == {
        "sql": "UPDATE customers SET city = 'A' WHERE customer_id = 7"
    }
    assert state.cards["e1"].content == (
        "ran UPDATE customers SET city = 'A' WHERE customer_id = 7",
    )


async def test_granting_a_scope_returns_the_grant_as_edited() -> None:
    ui, outcomes = NotebookUI(lambda: None), {}
    run = _run(ui, outcomes, [("g1", "UPDATE customers SET city = 'A'")])
    prompt = await run.next_prompt(timeout=10)
    assert isinstance(prompt, ApprovalPrompt) and prompt.grant_form is not None
    form = prompt.grant_form
    assert (form.operations.value, form.tables.value, form.max_rows.value, form.minutes.value) == (
        "UPDATE",
        "customers",
        1234,
        30,
    )
    form.tables.value = "customers, staging_*"
    form.max_rows.value = 500
    form.minutes.value = 10
    form.grant_button.click()
    state = await run.wait(timeout=10)
    grant = outcomes["g1"].grant
    assert outcomes["g1"].decision == "approved"
    assert grant == Grant(
        operations=("UPDATE",), tables=("customers", "staging_*"), max_rows=500, ttl_s=600.0
    )
    assert state.cards["g1"].word == "approved"  # asked, and answered with a grant
    assert form.grant_button.disabled and prompt.approve_button.disabled


async def test_an_edit_goes_with_the_grant_click() -> None:
    """Audit 12.2: editing the SQL and then clicking Grant runs the edit, not the original."""
    ui, outcomes = NotebookUI(lambda: None), {}
    run = _run(ui, outcomes, [("g2", "DELETE FROM customers")])
    prompt = await run.next_prompt(timeout=10)
    assert isinstance(prompt, ApprovalPrompt) and prompt.editor is not None
    assert prompt.grant_form is not None
    prompt.editor.value = "DELETE FROM customers WHERE customer_id = 7"
    prompt.grant_form.grant_button.click()
    state = await run.wait(timeout=10)
    outcome = outcomes["g2"]
    assert outcome.decision == "approved" and outcome.grant is not None
    assert outcome.edited_args == {"sql": "DELETE FROM customers WHERE customer_id = 7"}
    assert state.cards["g2"].content == ("ran DELETE FROM customers WHERE customer_id = 7",)
    assert prompt.editor.disabled and not prompt.approve()  # decided once


def test_the_grant_form_keeps_tables_only_read_apart() -> None:
    request = ApprovalRequest(
        tool_call_id="r",
        tool_name="query_database",
        title="Database write",
        args={"sql": "INSERT INTO staging_x SELECT a FROM accounts"},
        args_hash="h",
        editable=True,
        grant_scope=Grant(
            operations=("INSERT",), tables=("staging_x",), reads=("accounts",), max_rows=3
        ),
    )
    prompt = ApprovalPrompt.for_request(request, timeout=None)
    form = prompt.grant_form
    assert form is not None and (form.tables.value, form.reads.value) == ("staging_x", "accounts")
    form.reads.value = "accounts, orders"
    form.grant_button.click()
    assert prompt.outcome().grant == Grant(
        operations=("INSERT",), tables=("staging_x",), reads=("accounts", "orders"), max_rows=3
    )
    assert prompt.outcome().edited_args is None  # nothing edited


async def test_the_gate_owns_the_deadline_and_the_prompt_shows_expired() -> None:
    ui, outcomes = NotebookUI(lambda: None), {}
    run = _run(ui, outcomes, [("x1", "DELETE FROM t")], timeout=0.3)
    prompt = await run.next_prompt(timeout=10)
    state = await run.wait(timeout=10)
    assert prompt.decision == "expired" and outcomes["x1"].decision == "expired"
    assert state.cards["x1"].word == "expired" and state.status == "blocked"
    assert prompt.approve_button.disabled  # type: ignore[attr-defined]


async def test_stop_while_asking_answers_aborted() -> None:
    ui, outcomes = NotebookUI(lambda: None), {}
    run = _run(ui, outcomes, [("s1", "DELETE FROM t")])
    prompt = await run.next_prompt(timeout=10)
    run.view.stop_button.click()
    state = await run.wait(timeout=10)
    assert prompt.decision == "aborted"
    assert outcomes["s1"].decision == "aborted"
    assert state.status == "stopped"


# -- the database extension's own requests, in a notebook ---------------------------------
import sqlite3  # noqa: E402

from IPython.core.interactiveshell import InteractiveShell  # noqa: E402

from pi_notebook.notebook import current  # noqa: E402


def _cities(ids: list[int]) -> list[str]:
    path = current().database_url.removeprefix("sqlite:///")
    with sqlite3.connect(path) as conn:
        marks = ",".join("?" * len(ids))
        rows = conn.execute(
            f"SELECT city FROM customers WHERE customer_id IN ({marks}) ORDER BY customer_id", ids
        )
        return [r[0] for r in rows]


async def _prompted(shell: InteractiveShell, sql: str) -> tuple[Run, ApprovalPrompt]:
    shell.run_cell_magic("pi", "", sql)
    run = current().last_run
    assert run is not None
    prompt = await run.next_prompt(timeout=30)
    assert isinstance(prompt, ApprovalPrompt)
    return run, prompt


async def test_database_prompt_shows_the_preview_and_runs_the_edited_sql(
    loaded: InteractiveShell,
) -> None:
    before = _cities([40, 41])
    run, prompt = await _prompted(
        loaded, "UPDATE customers SET city = 'Edited' WHERE customer_id IN (40, 41)"
    )
    assert run.view.card(run.state.order[0]).prompt is prompt
    shown = " ".join(getattr(w, "value", "") for w in prompt.children)
    assert "Would change 2 rows" in shown
    assert prompt.editor is not None
    prompt.editor.value = "UPDATE customers SET city = 'Edited' WHERE customer_id = 40"
    prompt.approve_button.click()
    # The edit changes 1 row, not the 2 shown: the person is asked again, with its preview.
    again = await run.next_prompt(timeout=30)
    assert isinstance(again, ApprovalPrompt) and again is not prompt
    assert run.view.card(run.state.order[0]).prompt is again
    shown = " ".join(getattr(w, "value", "") for w in again.children)
    assert "Would change 1 row" in shown and "you edited the statement" in shown
    assert again.editor is not None and again.editor.value.endswith("customer_id = 40")
    assert _cities([40, 41]) == before  # nothing ran yet
    again.approve_button.click()
    state = await run.wait(timeout=30)
    assert _cities([40, 41]) == ["Edited", before[1]]  # the statement as edited, not as asked
    card = state.card_list()[0]
    assert card.word == "approved" and card.details["row_count"] == 1
    assert "1 row changed" in (run.record or {})["text/html"]


async def test_granting_a_scope_then_pi_grants_lists_and_revokes_it(
    loaded: InteractiveShell, capsys
) -> None:
    run, prompt = await _prompted(loaded, "UPDATE customers SET city = 'G1' WHERE customer_id = 42")
    assert prompt.grant_form is not None
    assert prompt.grant_form.operations.value == "UPDATE"
    assert "customers" in prompt.grant_form.tables.value
    prompt.grant_form.max_rows.value = 5
    prompt.grant_form.grant_button.click()
    state = await run.wait(timeout=30)
    assert state.card_list()[0].word in ("approved", "granted")
    grants = loaded.run_line_magic("pi_grants", "")
    assert len(grants) == 1 and list(grants.operations.iloc[0]) == ["UPDATE"]
    grant_id = grants.grant_id.iloc[0]
    # A later statement inside the scope runs without asking; its card says so.
    loaded.run_cell_magic("pi", "", "UPDATE customers SET city = 'G2' WHERE customer_id = 43")
    later = current().last_run
    state = await later.wait(timeout=30)  # type: ignore[union-attr]
    assert later.prompts == []  # type: ignore[union-attr]
    assert state.card_list()[0].word == "granted"
    assert later.metadata["calls"][0]["decision"] == "granted"  # type: ignore[union-attr,index]
    assert _cities([42, 43]) == ["G1", "G2"]
    assert loaded.run_line_magic("pi_grants", "").uses.iloc[0] == 1
    capsys.readouterr()
    assert loaded.run_line_magic("pi_grants", f"--revoke {grant_id}").empty
    assert "Revoked" in capsys.readouterr().out
    with pytest.raises(UsageError, match="No grant"):
        loaded.run_line_magic("pi_grants", f"--revoke {grant_id}")
    _, again = await _prompted(loaded, "UPDATE customers SET city = 'G3' WHERE customer_id = 44")
    again.reject()  # revoked: asked again


# -- kernel level: a real ipykernel over jupyter_client, edits and clicks as a browser sends them
from tests.notebook.test_nb_kernel import Kernel, kernel  # noqa: E402, F401


def _widgets(k: Kernel, model: str, description: str | None = None) -> list[str]:
    k._pump()  # pyright: ignore[reportPrivateUsage]
    return [
        m["content"]["comm_id"]
        for m in k.log
        if m["msg_type"] == "comm_open"
        and m["content"]["data"].get("state", {}).get("_model_name") == model
        and (description is None or m["content"]["data"]["state"].get("description") == description)
    ]


def _set(k: Kernel, comm_id: str, **state: Any) -> None:
    """What the browser sends when the person changes a widget's value."""
    content = {"comm_id": comm_id, "data": {"method": "update", "state": state, "buffer_paths": []}}
    k.kc.shell_channel.send(k.kc.session.msg("comm_msg", content))


def _kernel_city(data: Any, customer_id: int) -> str:
    with sqlite3.connect(data / "sample.sqlite") as conn:
        return conn.execute(
            "SELECT city FROM customers WHERE customer_id = ?", (customer_id,)
        ).fetchone()[0]


@pytest.mark.kernel
def test_kernel_edit_the_sql_in_the_prompt_then_approve_its_new_preview(
    kernel: tuple[Kernel, Any],
) -> None:
    """The person edits the statement in the prompt's editor and approves; the edit changes 1
    row, not the 2 shown, so the real database gate asks again with the edit's preview; the
    edit runs, the model's statement does not."""
    k, data = kernel
    before, edits = len(k.buttons("Approve")), len(_widgets(k, "TextareaModel"))
    untouched = _kernel_city(data, 62)
    msg_id = k.kc.execute(
        "%%pi\nUPDATE customers SET city = 'K-Edit' WHERE customer_id IN (61, 62)"
    )
    approve = k.wait_for_button("Approve", before)
    editor = _widgets(k, "TextareaModel")[edits]
    _set(k, editor, value="UPDATE customers SET city = 'K-Edit' WHERE customer_id = 61")
    since = len(k.log)
    k.click(approve)
    again = k.wait_for_button("Approve", before + 1)
    k.wait_for_text("you edited the statement", since)
    k.wait_for_text("Would change 1 row", since)
    assert not k.idle(msg_id) and _kernel_city(data, 61) != "K-Edit"  # nothing ran yet
    k.click(again)
    k.finish(msg_id)
    assert (_kernel_city(data, 61), _kernel_city(data, 62)) == ("K-Edit", untouched)
    (call,) = k.record(msg_id)["metadata"]["pi_notebook"]["calls"]
    assert (call["decision"], call["outcome"]) == ("approved", "ok")
    out = k.execute("df = %pi_approvals\nprint(df.sql.iloc[-1])")
    assert "WHERE customer_id = 61" in out and "IN (61, 62)" not in out


@pytest.mark.kernel
def test_kernel_grant_a_scope_then_a_later_write_runs_without_asking(
    kernel: tuple[Kernel, Any],
) -> None:
    k, data = kernel
    before = len(k.buttons("Grant"))
    rows_fields = len(_widgets(k, "IntTextModel", "Max rows"))
    msg_id = k.kc.execute("%%pi\nUPDATE customers SET city = 'K-G1' WHERE customer_id = 63")
    grant = k.wait_for_button("Grant", before)
    _set(k, _widgets(k, "IntTextModel", "Max rows")[rows_fields], value=3)
    k.click(grant)
    k.finish(msg_id)
    assert _kernel_city(data, 63) == "K-G1"
    record = k.record(msg_id)
    # Asked, and answered with a grant: the person approved it; the record names the scope.
    assert record["metadata"]["pi_notebook"]["calls"][0]["decision"] == "approved"
    granted_scope = re.search(
        r"approved by \S+ · granted scope (g-\w+|\w+) "
        r"\(UPDATE customers, ≤ 3 rows, 30 min\)",
        record["data"]["text/plain"],
    )
    assert granted_scope, record["data"]["text/plain"]
    # The person's wait and the statement's own time are told apart.
    assert re.search(r"waited [\d.]+ m?s · ran [\d.]+ m?s", record["data"]["text/plain"])
    out = k.execute(
        "g = %pi_grants\nprint(len(g), list(g.operations.iloc[0]), "
        "list(g.tables.iloc[0]), g.max_rows.iloc[0])"
    )
    assert out.split("\n")[0] == "1 ['UPDATE'] ['customers'] 3"
    approvals = len(k.buttons("Approve"))
    msg_id = k.kc.execute("%%pi\nUPDATE customers SET city = 'K-G2' WHERE customer_id = 64")
    k.finish(msg_id)
    assert len(k.buttons("Approve")) == approvals  # no prompt: it ran inside the grant
    record = k.record(msg_id)
    assert record["metadata"]["pi_notebook"]["calls"][0]["decision"] == "granted"
    assert f"granted ({granted_scope.group(1)})" in record["data"]["text/plain"]
    assert (_kernel_city(data, 63), _kernel_city(data, 64)) == ("K-G1", "K-G2")
    out = k.execute(
        "g = %pi_grants\n%pi_grants --revoke {g.grant_id.iloc[0]}\n"
        "df = %pi_audit --kind grant_revoke\nprint(len(df))"
    )
    assert "Revoked" in out and out.strip().endswith("1")
