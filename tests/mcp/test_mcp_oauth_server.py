"""``serve --http 0 --issuer URL --audience AUD``: the MCP server as an OAuth 2.1 resource server.

A test issuer (RSA keys made here, metadata and JWKS on 127.0.0.1) and one server process for
the module; each test connects with the SDK's client and its own token.
"""

from __future__ import annotations

import asyncio
import base64
import hashlib
import hmac
import json
import sqlite3
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx2
import mcp.client.session as client_session
import pytest
from cryptography.hazmat.primitives import serialization
from mcp import Client
from mcp.client.streamable_http import streamable_http_client
from mcp.types import ElicitResult, Implementation

from pi_notebook.audit import AuditLog
from tests.mcp.mcp_support import OwnedClient, child_env, stop
from tests.mcp.oauth_support import TestIssuer, rsa_key

pytestmark = pytest.mark.asyncio(loop_scope="module")

AUDIENCE = "pi-notebook"
INITIALIZE = {
    "jsonrpc": "2.0",
    "id": 1,
    "method": "initialize",
    "params": {
        "protocolVersion": "2025-06-18",
        "capabilities": {},
        "clientInfo": {"name": "raw", "version": "1"},
    },
}
HEADERS = {"Accept": "application/json, text/event-stream"}


class Server:
    def __init__(self, url: str, issuer: TestIssuer, db: Path, audit_url: str, stderr: Path):
        self.url, self.issuer, self.db, self.audit_url = url, issuer, db, audit_url
        self.stderr = stderr
        self.tokens: list[str] = []

    def count(self) -> int:
        with sqlite3.connect(self.db) as conn:
            return conn.execute("SELECT count(*) FROM t").fetchone()[0]

    def token(self, **claims: Any) -> str:
        token = self.issuer.token(**claims)
        self.tokens.append(token)
        return token

    async def post(self, token: str | None) -> httpx2.Response:
        headers = dict(HEADERS)
        if token is not None:
            headers["Authorization"] = f"Bearer {token}"
        async with httpx2.AsyncClient() as plain:
            return await plain.post(self.url, json=INITIALIZE, headers=headers)

    def client(self, token: str, *, elicit: Any = None, mode: str = "auto") -> OwnedClient:
        def make() -> Any:
            http = httpx2.AsyncClient(headers={"Authorization": f"Bearer {token}"})
            client = Client(
                streamable_http_client(self.url, http_client=http),
                mode=mode,
                client_info=Implementation(name="oauth-test", version="1"),
                elicitation_callback=elicit,
            )
            return _Joined(http, client)

        return OwnedClient(make)


class _Joined:
    def __init__(self, http: httpx2.AsyncClient, client: Client) -> None:
        self.http, self.mcp = http, client

    async def __aenter__(self) -> Client:
        await self.http.__aenter__()
        return await self.mcp.__aenter__()

    async def __aexit__(self, *exc: Any) -> None:
        await self.mcp.__aexit__(*exc)
        await self.http.__aexit__(*exc)


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Server]:
    data = tmp_path_factory.mktemp("mcp_oauth")
    db = data / "shop.sqlite"
    with sqlite3.connect(db) as conn:
        conn.execute("CREATE TABLE t (a INTEGER)")
        conn.execute("INSERT INTO t VALUES (1)")
    audit_url = f"sqlite:///{data / 'audit.sqlite'}"
    stderr = data / "server.log"
    with TestIssuer() as issuer, stderr.open("w") as err:
        proc = subprocess.Popen(
            [
                sys.executable,
                "-m",
                "pi_notebook.mcp",
                "serve",
                "--database-url",
                f"sqlite:///{db}",
                "--audit-url",
                audit_url,
                "--http",
                "0",
                "--issuer",
                issuer.url,
                "--audience",
                AUDIENCE,
            ],
            stdout=subprocess.PIPE,
            stderr=err,
            text=True,
            env=child_env(PI_NOTEBOOK_DATA_DIR=str(data)),
        )
        assert proc.stdout is not None
        listening, accepting = proc.stdout.readline(), proc.stdout.readline()
        try:
            assert listening.startswith("pi_notebook MCP server listening on http://127.0.0.1:")
            assert accepting.strip() == f"Accepting tokens of {issuer.url}"
            yield Server(listening.split()[-1], issuer, db, audit_url, stderr)
        finally:
            stop(proc)


class Elicitations:
    """The elicitation callback: answers from a script and counts what it was asked."""

    def __init__(self, answers: list[bool]) -> None:
        self.answers = answers
        self.asked: list[str] = []

    async def __call__(self, context: Any, params: Any) -> ElicitResult:
        self.asked.append(params.message)
        yes = self.answers.pop(0) if self.answers else False
        return ElicitResult(action="accept", content={"approve": yes})


async def test_no_token_gets_401_naming_the_protected_resource_metadata(server: Server) -> None:
    response = await server.post(None)
    assert response.status_code == 401
    challenge = response.headers["www-authenticate"]
    base = server.url.removesuffix("/mcp")
    metadata_url = f"{base}/.well-known/oauth-protected-resource/mcp"
    assert challenge.startswith("Bearer ")
    assert f'resource_metadata="{metadata_url}"' in challenge
    async with httpx2.AsyncClient() as plain:
        metadata = (await plain.get(metadata_url)).json()
    assert metadata["resource"] == server.url
    assert metadata["authorization_servers"] == [server.issuer.url]
    assert metadata["scopes_supported"] == ["db:read", "db:write"]
    assert metadata["bearer_methods_supported"] == ["header"]


def _unsigned(header: dict[str, Any], claims: dict[str, Any], secret: bytes | None) -> str:
    def b64(data: bytes) -> str:
        return base64.urlsafe_b64encode(data).rstrip(b"=").decode()

    signing_input = f"{b64(json.dumps(header).encode())}.{b64(json.dumps(claims).encode())}"
    signature = (
        b"" if secret is None else hmac.new(secret, signing_input.encode(), hashlib.sha256).digest()
    )
    return f"{signing_input}.{b64(signature)}"


def _forged(server: Server, case: str) -> str:
    issuer = server.issuer
    if case == "wrong audience":
        return server.token(aud="another-api")
    if case == "expired":
        return server.token(lifetime=-600)
    if case == "not yet valid":
        return server.token(nbf=int(time.time()) + 600)
    if case == "bad signature":  # the right kid, another key
        return server.token(key=rsa_key())
    if case == "wrong issuer":
        return server.token(iss="http://127.0.0.1:1/other")
    if case == "unknown key":
        return server.token(key=rsa_key(), kid="k-unknown")
    if case == "no subject":
        return server.token(sub=None)
    claims = {
        "iss": issuer.url,
        "aud": AUDIENCE,
        "sub": "mallory",
        "scope": "db:read db:write",
        "exp": int(time.time()) + 300,
    }
    if case == "alg none":
        return _unsigned({"alg": "none", "kid": "k1"}, claims, None)
    if case == "HS256 keyed with the public key":
        public = issuer.keys["k1"].public_key()
        pem = public.public_bytes(
            serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo
        )
        return _unsigned({"alg": "HS256", "kid": "k1", "typ": "JWT"}, claims, pem)
    raise AssertionError(case)


@pytest.mark.parametrize(
    "case",
    [
        "wrong audience",
        "expired",
        "not yet valid",
        "bad signature",
        "wrong issuer",
        "unknown key",
        "no subject",
        "alg none",
        "HS256 keyed with the public key",
    ],
)
async def test_a_token_that_does_not_verify_gets_401(server: Server, case: str) -> None:
    good = await server.post(server.token())
    assert good.status_code == 200, good.text  # the same request with a valid token passes
    response = await server.post(_forged(server, case))
    assert response.status_code == 401
    assert 'resource_metadata="' in response.headers["www-authenticate"]


async def test_a_token_without_db_read_gets_403_insufficient_scope(server: Server) -> None:
    response = await server.post(server.token(scope=None, scp=["db:write"]))
    assert response.status_code == 403
    assert 'error="insufficient_scope"' in response.headers["www-authenticate"]


async def test_read_scope_reads_and_describes_but_a_write_is_refused_unasked(
    server: Server,
) -> None:
    elicit = Elicitations([True])
    owned = server.client(
        server.token(sub="reader-rita", scp=["db:read"], scope=None), elicit=elicit
    )
    client = await owned.__aenter__()
    try:
        described = await client.call_tool("describe_database", {})
        assert not described.is_error and "t" in described.content[0].text
        read = await client.call_tool("query_database", {"sql": "SELECT count(*) AS n FROM t"})
        assert not read.is_error, read.content
        before = server.count()
        for sql in ["INSERT INTO t (a) VALUES (99)", "DELETE FROM t", "SELECT 1; DELETE FROM t"]:
            write = await client.call_tool("query_database", {"sql": sql})
            assert write.is_error
            text = write.content[0].text
            assert text.startswith("Refused:") and "db:write" in text, text
        assert elicit.asked == []  # nobody was asked
        assert server.count() == before
    finally:
        await owned.__aexit__()


@pytest.mark.parametrize("era", ["2025-06-18", "2026-07-28"])
async def test_write_scope_asks_and_the_write_runs_only_when_approved(
    server: Server, era: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    if era != "2026-07-28":
        monkeypatch.setattr(client_session, "LATEST_HANDSHAKE_VERSION", era)
    elicit = Elicitations([False, True])
    token = server.token(sub="writer-wes", scope="db:read db:write")
    owned = server.client(token, elicit=elicit, mode="legacy" if era != "2026-07-28" else "auto")
    client = await owned.__aenter__()
    try:
        assert client.protocol_version == era
        before = server.count()
        rejected = await client.call_tool("query_database", {"sql": "INSERT INTO t VALUES (7)"})
        assert rejected.is_error and server.count() == before
        approved = await client.call_tool("query_database", {"sql": "INSERT INTO t VALUES (7)"})
        assert not approved.is_error, approved.content
        assert server.count() == before + 1
        assert len(elicit.asked) == 2 and "INSERT INTO t VALUES (7)" in elicit.asked[1]
        assert elicit.asked[1].startswith("Database write: writer-wes via oauth-test asks")
        assert approved.meta is not None
        records = await _records(
            server.audit_url, approved.meta["pi-notebook/call"]["tool_call_id"]
        )
        approval = records[records["kind"] == "approval"].iloc[-1]["payload"]
        assert approval["decision"] == "approved"
        assert approval["approver"] == "writer-wes via oauth-test"
        assert approval["requester"] == "writer-wes"  # whom the call acted for, not the server
        assert records.iloc[0]["payload"]["requester"] == "writer-wes"
    finally:
        await owned.__aexit__()


async def _records(audit_url: str, call_id: str) -> Any:
    log = AuditLog(audit_url)
    try:
        deadline = time.monotonic() + 20  # the server's writer commits just after it answers
        while True:
            records = log.to_dataframe(tool_call_id=call_id)
            if "tool_execution_end" in list(records["kind"]) or time.monotonic() > deadline:
                return records
            await asyncio.sleep(0.05)
    finally:
        log.close()


async def test_the_audit_names_each_token_subject_and_never_holds_a_token(server: Server) -> None:
    seen: dict[str, str] = {}
    for sub, scope, sql in [
        ("ana", "db:read", "INSERT INTO t VALUES (5)"),
        ("bo", "db:read", "SELECT a FROM t"),
    ]:
        owned = server.client(server.token(sub=sub, scope=scope), elicit=Elicitations([]))
        client = await owned.__aenter__()
        try:
            result = await client.call_tool("query_database", {"sql": sql})
            assert result.meta is not None
            seen[sub] = result.meta["pi-notebook/call"]["tool_call_id"]
        finally:
            await owned.__aexit__()
    ana = await _records(server.audit_url, seen["ana"])
    bo = await _records(server.audit_url, seen["bo"])
    request = ana.iloc[0]["payload"]
    assert ana.iloc[0]["kind"] == "mcp_request"
    assert request["requester"] == "ana" and request["scopes"] == ["db:read"]
    assert request["issuer"] == server.issuer.url and request["client_id"] == "test-client"
    decision = ana[ana["kind"] == "tool_call"].iloc[0]["payload"]
    assert decision["decision"] == "blocked" and "db:write" in decision["reason"]
    assert bo.iloc[0]["payload"]["requester"] == "bo"
    assert "approval" not in list(ana["kind"])  # refused before anyone could be asked
    # No token reaches the audit store or the server's log.
    audit_file = Path(server.audit_url.removeprefix("sqlite:///"))
    stored = b"".join(p.read_bytes() for p in audit_file.parent.glob(audit_file.name + "*"))
    logged = server.stderr.read_text()
    for token in server.tokens:
        signature = token.rsplit(".", 1)[1]
        assert signature.encode() not in stored and signature not in logged


async def test_concurrent_callers_each_act_with_their_own_scopes_and_name(
    server: Server, monkeypatch: pytest.MonkeyPatch
) -> None:
    """One server, two people at once: wes's write waits on his answer while ana's arrives."""
    monkeypatch.setattr(client_session, "LATEST_HANDSHAKE_VERSION", "2025-06-18")
    wes_asked, ana_done = asyncio.Event(), asyncio.Event()

    async def wes_answers(context: Any, params: Any) -> ElicitResult:
        wes_asked.set()
        await asyncio.wait_for(ana_done.wait(), 20)  # answer only after ana's call is over
        return ElicitResult(action="accept", content={"approve": True})

    ana_elicit = Elicitations([True])
    wes = server.client(
        server.token(sub="wes", scope="db:read db:write"), elicit=wes_answers, mode="legacy"
    )
    ana = server.client(server.token(sub="ana", scope="db:read"), elicit=ana_elicit, mode="legacy")
    wes_client, ana_client = await wes.__aenter__(), await ana.__aenter__()
    try:
        wes_call = asyncio.ensure_future(
            wes_client.call_tool("query_database", {"sql": "INSERT INTO t VALUES (12)"})
        )
        await asyncio.wait_for(wes_asked.wait(), 20)
        ana_result = await ana_client.call_tool(
            "query_database", {"sql": "INSERT INTO t VALUES (11)"}
        )
        ana_done.set()
        wes_result = await wes_call
        assert ana_result.is_error and "db:write" in ana_result.content[0].text
        assert not wes_result.is_error, wes_result.content
        assert ana_elicit.asked == []
        with sqlite3.connect(server.db) as conn:
            values = {row[0] for row in conn.execute("SELECT a FROM t WHERE a IN (11, 12)")}
        assert values == {12}
        for result, sub in [(ana_result, "ana"), (wes_result, "wes")]:
            assert result.meta is not None
            records = await _records(
                server.audit_url, result.meta["pi-notebook/call"]["tool_call_id"]
            )
            assert records.iloc[0]["payload"]["requester"] == sub
        approval = records[records["kind"] == "approval"].iloc[-1]["payload"]
        assert approval["approver"] == "wes via oauth-test"
        assert approval["requester"] == "wes"
    finally:
        await ana.__aexit__()
        await wes.__aexit__()


async def test_behind_a_proxy_the_metadata_names_the_public_resource_url(tmp_path: Path) -> None:
    public = "https://mcp.example.com/mcp"
    with TestIssuer() as issuer:
        proc = await asyncio.to_thread(
            subprocess.Popen,
            [
                sys.executable,
                "-m",
                "pi_notebook.mcp",
                "serve",
                "--database-url",
                f"sqlite:///{tmp_path / 'x.sqlite'}",
                "--http",
                "0",
                "--issuer",
                issuer.url,
                "--audience",
                AUDIENCE,
                "--resource-url",
                public,
            ],
            stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL,
            text=True,
            env=child_env(PI_NOTEBOOK_DATA_DIR=str(tmp_path)),
        )
        assert proc.stdout is not None
        try:
            lines = [await asyncio.to_thread(proc.stdout.readline) for _ in range(3)]
            assert lines[2].strip() == f"Clients reach it at {public}", lines
            local = lines[0].split()[-1]
            async with httpx2.AsyncClient() as plain:
                refused = await plain.post(local, json=INITIALIZE, headers=HEADERS)
                base = local.removesuffix("/mcp")
                metadata = await plain.get(f"{base}/.well-known/oauth-protected-resource/mcp")
            challenge = refused.headers["www-authenticate"]
            assert refused.status_code == 401
            assert (
                'resource_metadata="https://mcp.example.com/.well-known/oauth-protected-resource/mcp"'
                in challenge
            )
            assert metadata.json()["resource"] == public
            assert metadata.json()["authorization_servers"] == [issuer.url]
        finally:
            stop(proc)
