"""The SDK's own client against ``python -m pi_notebook.mcp serve`` over stdio.

On SQLite and PostgreSQL, and on both protocol eras: ``2025-06-18`` (what desktop clients
negotiate today: the server asks mid-call with ``elicitation/create``) and the SDK's default,
``2026-07-28`` (the server answers ``input_required`` and the client retries). One server
process per database and era serves every test of that combination.
"""

from __future__ import annotations

import asyncio
import sqlite3
import sys
import time
import uuid
from collections.abc import AsyncIterator
from typing import Any

import mcp.client.session as client_session
import pytest
import pytest_asyncio
import sqlalchemy as sa
from mcp import Client, StdioServerParameters
from mcp.client.stdio import stdio_client
from mcp.types import CallToolResult, ElicitResult, Implementation, InputRequiredResult

from pi_notebook.audit import AuditLog
from tests.mcp.mcp_support import OwnedClient, child_env

pytestmark = pytest.mark.asyncio(loop_scope="module")

CLIENT = Implementation(name="pi-test-client", version="9.9")


class Served:
    """One running server: its client, the scratch table, and the person's scripted answers."""

    def __init__(self, url: str, table: str, audit_url: str, era: str) -> None:
        self.url, self.table, self.audit_url, self.era = url, table, audit_url, era
        self.answers: list[bool] = []
        self.asked: list[str] = []
        self.client: Client
        self.engine = sa.create_engine(url)

    async def elicit(self, context: Any, params: Any) -> ElicitResult:
        self.asked.append(params.message)
        approve = self.answers.pop(0) if self.answers else False
        return ElicitResult(
            action="accept" if approve else "decline",
            content={"approve": True} if approve else None,
        )

    def count(self) -> int:
        with self.engine.connect() as conn:
            return conn.execute(sa.text(f"SELECT count(*) FROM {self.table}")).scalar_one()

    async def query(self, sql: str) -> CallToolResult:
        return await self.client.call_tool("query_database", {"sql": sql})


def _setup(url: str, table: str) -> None:
    engine = sa.create_engine(url)
    with engine.begin() as conn:
        conn.execute(sa.text(f"CREATE TABLE {table} (id INTEGER PRIMARY KEY, name VARCHAR(20))"))
        conn.execute(sa.text(f"INSERT INTO {table} VALUES (1, 'ada'), (2, 'grace')"))
    engine.dispose()


@pytest.fixture(scope="module", params=["sqlite", "postgres"])
def database(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> str:
    if request.param == "postgres":
        return request.getfixturevalue("pg_url")
    path = tmp_path_factory.mktemp("mcp_db") / "shop.sqlite"
    sqlite3.connect(path).close()
    return f"sqlite:///{path}"


@pytest_asyncio.fixture(scope="module", loop_scope="module", params=["2025-06-18", "2026-07-28"])
async def served(
    request: pytest.FixtureRequest, database: str, tmp_path_factory: pytest.TempPathFactory
) -> AsyncIterator[Served]:
    url, table, era = database, f"mcp_items_{uuid.uuid4().hex[:8]}", request.param
    _setup(url, table)
    data = tmp_path_factory.mktemp("mcp_data")
    audit_url = f"sqlite:///{data / 'audit.sqlite'}"
    state = Served(url, table, audit_url, era)
    params = StdioServerParameters(
        command=sys.executable,
        args=["-m", "pi_notebook.mcp", "serve", "--database-url", url, "--audit-url", audit_url],
        env=child_env(PI_NOTEBOOK_DATA_DIR=str(data)),
    )
    mp = pytest.MonkeyPatch()
    if era != "2026-07-28":  # offer the older revision, as desktop clients do
        mp.setattr(client_session, "LATEST_HANDSHAKE_VERSION", era)
    with (data / "server.err").open("w") as errlog:
        owned = OwnedClient(
            lambda: Client(
                stdio_client(params, errlog=errlog),
                mode="legacy" if era != "2026-07-28" else "auto",
                client_info=CLIENT,
                elicitation_callback=state.elicit,
            )
        )
        try:
            state.client = await owned.__aenter__()
        finally:
            mp.undo()
        assert state.client.protocol_version == era
        yield state
        await owned.__aexit__()
    state.engine.dispose()


async def test_tools_are_listed_with_annotations(served: Served) -> None:
    tools = {t.name: t for t in (await served.client.list_tools()).tools}
    assert "query_database" in tools
    hints = tools["query_database"].annotations
    assert hints is not None and hints.read_only_hint is False and hints.destructive_hint is True
    assert tools["query_database"].input_schema["required"] == ["sql"]
    described = tools["describe_database"].annotations
    assert described is not None and described.read_only_hint is True


async def test_describe_database_shows_the_table(served: Served) -> None:
    result = await served.client.call_tool("describe_database", {"tables": [served.table]})
    assert not result.is_error, result.content
    text = result.content[0].text
    assert served.table in text and "name" in text and "id" in text


async def test_a_read_returns_rows_without_asking(served: Served) -> None:
    served.asked.clear()
    result = await served.query(f"SELECT name FROM {served.table} ORDER BY id")
    assert not result.is_error
    text = result.content[0].text
    assert text.startswith("2 row(s), 1 column(s).") and "ada" in text and "grace" in text
    assert served.asked == []
    assert result.meta is not None
    assert result.meta["pi-notebook/annotations"] == {
        "readOnlyHint": True,
        "destructiveHint": False,
    }
    assert result.meta["pi-notebook/call"]["verdict"]["kind"] == "read"


async def test_a_declined_write_changes_nothing(served: Served) -> None:
    before, served.asked, served.answers = served.count(), [], [False]
    sql = f"INSERT INTO {served.table} VALUES (10, 'declined')"
    result = await served.query(sql)
    assert result.is_error and "Rejected by user." in result.content[0].text
    assert len(served.asked) == 1 and sql in served.asked[0]
    assert "pi-test-client asks" in served.asked[0]
    assert "Preview: 1 row(s) would change" in served.asked[0]  # the backend's preview, shown
    assert served.count() == before


async def test_an_accepted_write_runs_once_and_a_repeat_asks_again(served: Served) -> None:
    before, served.asked, served.answers = served.count(), [], [True]
    sql = f"UPDATE {served.table} SET name = 'ada2' WHERE id = 1"
    first = await served.query(f"INSERT INTO {served.table} VALUES (20, 'approved')")
    assert not first.is_error, first.content
    assert served.count() == before + 1 and len(served.asked) == 1
    assert first.meta is not None
    assert first.meta["pi-notebook/annotations"] == {"readOnlyHint": False, "destructiveHint": True}
    call_id = first.meta["pi-notebook/call"]["tool_call_id"]
    served.answers = [False]
    again = await served.query(f"INSERT INTO {served.table} VALUES (20, 'approved')")
    assert again.is_error and len(served.asked) == 2  # the same request is asked again
    assert again.meta is not None and again.meta["pi-notebook/call"]["tool_call_id"] != call_id
    assert served.count() == before + 1
    served.answers = [True]
    assert not (await served.query(sql)).is_error


async def test_replaying_an_approved_retry_asks_again(served: Served) -> None:
    session = served.client.session
    args = {"sql": f"INSERT INTO {served.table} VALUES (30, 'once')"}
    before = served.count()
    if served.era != "2026-07-28":
        # Up to 2025-11-25 the server asks mid-call: a call never comes back input_required,
        # and each request (a replay too) is a new call that asks again.
        served.asked, served.answers = [], [True, False]
        results = [
            await session.call_tool("query_database", args, allow_input_required=True)
            for _ in range(2)
        ]
        assert [isinstance(r, CallToolResult) and r.is_error for r in results] == [False, True]
        assert len(served.asked) == 2 and served.count() == before + 1
        return
    asked = await session.call_tool("query_database", args, allow_input_required=True)
    assert isinstance(asked, InputRequiredResult) and asked.input_requests
    ((key, request),) = asked.input_requests.items()
    assert args["sql"] in request.params.message  # the statement is shown
    assert served.count() == before  # asking ran nothing
    answer = {key: ElicitResult(action="accept", content={"approve": True})}
    done = await session.call_tool(
        "query_database",
        args,
        input_responses=answer,
        request_state=asked.request_state,
        allow_input_required=True,
    )
    assert isinstance(done, CallToolResult) and not done.is_error
    assert served.count() == before + 1
    replay = await session.call_tool(
        "query_database",
        args,
        input_responses=answer,
        request_state=asked.request_state,
        allow_input_required=True,
    )
    assert isinstance(replay, InputRequiredResult)  # asked again, not run again
    assert served.count() == before + 1
    other = {"sql": f"INSERT INTO {served.table} VALUES (31, 'other')"}
    with pytest.raises(Exception, match="Invalid or expired requestState"):
        # an approval cannot be moved to another statement: the state is bound to the request
        await session.call_tool(
            "query_database",
            other,
            input_responses=answer,
            request_state=replay.request_state,
            allow_input_required=True,
        )
    assert served.count() == before + 1


async def test_a_stacked_statement_is_refused_without_asking(served: Served) -> None:
    before, served.asked = served.count(), []
    result = await served.query(f"SELECT 1; DELETE FROM {served.table}")
    assert result.is_error and result.content[0].text.startswith("Refused:")
    assert served.asked == [] and served.count() == before


async def test_every_call_is_in_the_verified_audit_with_the_client_name(served: Served) -> None:
    served.answers = [True]
    result = await served.query(f"DELETE FROM {served.table} WHERE id = 20")
    assert not result.is_error and result.meta is not None
    call_id = result.meta["pi-notebook/call"]["tool_call_id"]
    log = AuditLog(served.audit_url)
    try:
        # The server's writer commits the last records just after it answers: wait for them.
        deadline = time.monotonic() + 20
        while True:
            records = log.to_dataframe(tool_call_id=call_id)
            kinds = list(records["kind"])
            if "tool_execution_end" in kinds or time.monotonic() > deadline:
                break
            await asyncio.sleep(0.05)
        assert (
            kinds[0] == "mcp_request" and "approval" in kinds and kinds[-1] == "tool_execution_end"
        )
        request = records.iloc[0]["payload"]
        assert request["client"] == "pi-test-client" and request["protocol_version"] == served.era
        if served.era == "2026-07-28":  # the approving call names the call that asked
            asking = log.to_dataframe(tool_call_id=request["answers_question_of"])
            kinds = list(asking["kind"])
            assert kinds[0] == "mcp_request" and "approval" in kinds
            # The asking leg decided nothing: it is recorded deferred, never rejected.
            legs = [
                p["decision"]
                for k, p in zip(asking["kind"], asking["payload"], strict=True)
                if k == "approval"
            ]
            assert legs == ["deferred"]
            answered = [
                p["decision"]
                for k, p in zip(records["kind"], records["payload"], strict=True)
                if k == "approval"
            ]
            assert answered == ["approved"]
        else:
            assert request["answers_question_of"] is None
        mcp_calls = log.to_dataframe(kind="mcp_request")
        assert set(mcp_calls["session_id"]) == {records.iloc[0]["session_id"]}  # one chain
        report = log.verify()
        assert report.ok, report
    finally:
        log.close()
