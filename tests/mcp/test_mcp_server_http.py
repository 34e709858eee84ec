"""``python -m pi_notebook.mcp serve --http 0``: streamable HTTP on loopback behind a bearer
token. One server process serves the module; each test opens its own client."""

from __future__ import annotations

import asyncio
import json
import sqlite3
import subprocess
import sys
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import httpx2
import mcp.client.session as client_session
import pytest
from mcp import Client
from mcp.client.streamable_http import streamable_http_client
from mcp.types import ElicitResult, Implementation

from tests.mcp.mcp_support import OwnedClient, child_env, stop

pytestmark = pytest.mark.asyncio(loop_scope="module")


class Http:
    def __init__(self, url: str, token: str, db: Path) -> None:
        self.url, self.token, self.db = url, token, db

    def count(self) -> int:
        with sqlite3.connect(self.db) as conn:
            return conn.execute("SELECT count(*) FROM t").fetchone()[0]

    def client(
        self, *, elicit: Any = None, mode: str = "auto", name: str = "http-test"
    ) -> OwnedClient:
        def make() -> Any:
            http = httpx2.AsyncClient(headers={"Authorization": f"Bearer {self.token}"})
            return _Joined(
                http,
                Client(
                    streamable_http_client(self.url, http_client=http),
                    mode=mode,
                    client_info=Implementation(name=name, version="1"),
                    elicitation_callback=elicit,
                ),
            )

        return OwnedClient(make)


class _Joined:
    """Enter an httpx client and an MCP client as one context, left in reverse order."""

    def __init__(self, http: httpx2.AsyncClient, client: Client) -> None:
        self.http, self.mcp = http, client

    async def __aenter__(self) -> Client:
        await self.http.__aenter__()
        return await self.mcp.__aenter__()

    async def __aexit__(self, *exc: Any) -> None:
        await self.mcp.__aexit__(*exc)
        await self.http.__aexit__(*exc)


@pytest.fixture(scope="module")
def http(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Http]:
    data = tmp_path_factory.mktemp("mcp_http")
    db = data / "shop.sqlite"
    with sqlite3.connect(db) as conn:
        conn.execute("CREATE TABLE t (a INTEGER, email TEXT)")
        conn.execute("INSERT INTO t VALUES (1, 'ada@example.com')")
    policy = data / "policy.json"
    policy.write_text(json.dumps({"t.email": "mask"}))
    proc = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "pi_notebook.mcp",
            "serve",
            "--database-url",
            f"sqlite:///{db}",
            "--data-policy",
            str(policy),
            "--http",
            "0",
        ],
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        text=True,
        env=child_env(PI_NOTEBOOK_DATA_DIR=str(data)),
    )
    assert proc.stdout is not None
    listening, token_line = proc.stdout.readline(), proc.stdout.readline()
    try:
        assert listening.startswith("pi_notebook MCP server listening on http://127.0.0.1:")
        assert token_line.startswith("Bearer token (shown once")
        yield Http(listening.split()[-1], token_line.split()[-1], db)
    finally:
        stop(proc)


def approving(answers: list[bool]) -> Callable[..., Any]:
    async def elicit(context: Any, params: Any) -> ElicitResult:
        yes = answers.pop(0) if answers else False
        return ElicitResult(action="accept", content={"approve": yes})

    return elicit


async def test_requests_without_the_token_are_refused(http: Http) -> None:
    async with httpx2.AsyncClient() as plain:
        response = await plain.post(
            http.url, json={"jsonrpc": "2.0", "id": 1, "method": "tools/list"}
        )
        assert response.status_code == 401
        wrong = await plain.post(
            http.url,
            json={"jsonrpc": "2.0", "id": 1, "method": "tools/list"},
            headers={"Authorization": "Bearer nope"},
        )
        assert wrong.status_code == 401


@pytest.mark.parametrize("era", ["2025-06-18", "2026-07-28"])
async def test_an_approved_write_runs_once_on_each_era(
    http: Http, era: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    if era != "2026-07-28":
        monkeypatch.setattr(client_session, "LATEST_HANDSHAKE_VERSION", era)
    answers = [True]
    owned = http.client(elicit=approving(answers), mode="legacy" if era != "2026-07-28" else "auto")
    client = await owned.__aenter__()
    try:
        assert client.protocol_version == era
        before = http.count()
        result = await client.call_tool("query_database", {"sql": "INSERT INTO t (a) VALUES (2)"})
        assert not result.is_error, result.content
        assert http.count() == before + 1 and answers == []
        read = await client.call_tool("query_database", {"sql": "SELECT count(*) AS n FROM t"})
        assert f"{before + 1}" in read.content[0].text
    finally:
        await owned.__aexit__()


async def test_a_client_without_elicitation_is_refused_with_the_reason(http: Http) -> None:
    owned = http.client(name="no-forms")
    client = await owned.__aenter__()
    try:
        before = http.count()
        result = await client.call_tool("query_database", {"sql": "DELETE FROM t"})
        assert result.is_error
        assert result.content[0].text.startswith(
            "Refused: no-forms did not declare MCP elicitation"
        )
        assert http.count() == before
        read = await client.call_tool("query_database", {"sql": "SELECT a FROM t"})
        assert not read.is_error  # reads still work
    finally:
        await owned.__aexit__()


async def test_the_data_policy_keeps_protected_values_from_the_client(http: Http) -> None:
    owned = http.client()
    client = await owned.__aenter__()
    try:
        result = await client.call_tool("query_database", {"sql": "SELECT a, email FROM t"})
        assert not result.is_error, result.content
        text = result.content[0].text
        assert "ada@example.com" not in text and "email" in text
        derived = await client.call_tool(
            "query_database", {"sql": "SELECT upper(email) AS shout FROM t WHERE a = 1"}
        )
        assert "ADA@EXAMPLE.COM" not in derived.content[0].text  # nor anything computed from it
    finally:
        await owned.__aexit__()


async def test_an_empty_token_setting_is_refused_with_a_message(tmp_path: Path) -> None:
    """An empty PI_NOTEBOOK_MCP_TOKEN would start a server that refuses every request, silently."""
    done = await asyncio.to_thread(
        subprocess.run,
        [
            sys.executable,
            "-m",
            "pi_notebook.mcp",
            "serve",
            "--database-url",
            f"sqlite:///{tmp_path / 'x.sqlite'}",
            "--http",
            "0",
        ],
        capture_output=True,
        text=True,
        timeout=60,
        env=child_env(PI_NOTEBOOK_DATA_DIR=str(tmp_path), PI_NOTEBOOK_MCP_TOKEN=" "),
    )
    assert done.returncode != 0
    assert "PI_NOTEBOOK_MCP_TOKEN is set but empty" in done.stderr
    assert "listening" not in done.stdout
