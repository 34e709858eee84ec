"""A server that accepts TCP and never answers: connects time out, and an abort
returns the call at once while the stuck thread gives up on its own."""

from __future__ import annotations

import asyncio
import socket
import threading
import time
from collections.abc import Iterator
from typing import Any

import pytest

from pi_notebook import create_agent_session
from pi_notebook.ai.abort import AbortController
from pi_notebook.database import database_extension
from pi_notebook.sql.backend import DatabaseBackend, QueryAborted, QueryError
from pi_notebook.testing import ScriptedModel, text, tool_call

SCHEMES = {"postgres": "postgresql+psycopg", "mysql": "mysql+pymysql"}


@pytest.fixture
def hung_port() -> Iterator[int]:
    """A listening socket nobody accepts on: the kernel completes the TCP handshake, then
    nothing is ever sent."""
    server = socket.create_server(("127.0.0.1", 0), backlog=16)
    try:
        yield server.getsockname()[1]
    finally:
        server.close()


def _url(engine: str, port: int) -> str:
    return f"{SCHEMES[engine]}://app:secret@127.0.0.1:{port}/shop"


@pytest.mark.parametrize("engine", list(SCHEMES))
async def test_abort_returns_a_hung_connect_at_once(engine: str, hung_port: int) -> None:
    backend = DatabaseBackend(_url(engine, hung_port), connect_timeout_s=2)
    try:
        for call in ("c1", "c2"):  # the second call is not stuck behind the first thread
            controller = AbortController()
            asyncio.get_running_loop().call_later(0.3, controller.abort)
            # Only the abort path says "cancelled while connecting"; the 2 s connect timeout
            # would say "Could not connect".
            with pytest.raises(QueryAborted, match="cancelled while connecting"):
                await backend.run(call, "SELECT 1", signal=controller.signal)
    finally:
        backend.dispose()
    stuck = [t for t in threading.enumerate() if t.name == "pi-db-worker"]
    assert stuck  # still in connect() now; they give up at the connect timeout
    await asyncio.to_thread(lambda: [t.join(4) for t in stuck])
    assert not any(t.is_alive() for t in stuck)


@pytest.mark.parametrize("engine", list(SCHEMES))
async def test_a_hung_connect_times_out_with_a_short_error(engine: str, hung_port: int) -> None:
    backend = DatabaseBackend(_url(engine, hung_port), connect_timeout_s=2)
    try:
        started = time.perf_counter()
        with pytest.raises(QueryError) as info:
            await backend.run("c1", "SELECT 1")
        elapsed = time.perf_counter() - started
    finally:
        backend.dispose()
    assert 1.5 < elapsed < 15  # the 2 s connect timeout, not the socket's own minutes
    message = str(info.value)
    assert message.startswith(f"Could not connect to {SCHEMES[engine]}://app:***@127.0.0.1")
    assert "secret" not in message and not isinstance(info.value, QueryAborted)


@pytest.mark.parametrize("schema_budget", [0, 2000], ids=["no-schema-summary", "schema-summary"])
async def test_stop_ends_a_session_run_stuck_in_a_connect(
    hung_port: int, schema_budget: int
) -> None:
    """With the schema summary on, the stuck connect is the schema read before the first
    request; Stop releases it the same way."""
    ext = database_extension(_url("postgres", hung_port), schema_budget_chars=schema_budget)
    model = ScriptedModel([[tool_call("query_database", {"sql": "SELECT 1"}, id="q1")], text("x")])
    session = create_agent_session(model=model, extensions=[ext], audit=False)
    ends: list[Any] = []
    session.subscribe(lambda e: ends.append(e) if e.type == "tool_execution_end" else None)
    try:
        asyncio.get_running_loop().call_later(0.3, session.abort)
        started = time.perf_counter()
        await session.prompt("go")
        assert time.perf_counter() - started < 8  # before the 10 s connect timeout
    finally:
        await session.close()
    if schema_budget == 0:
        [end] = ends
        assert end.is_error and "aborted" in str(end.result.content[0].text)


@pytest.mark.mysql
async def test_mysql_handshake_bound_does_not_cut_long_statements(mysql_url: str) -> None:
    """The connect timeout bounds the handshake only; a statement may run past it."""
    backend = DatabaseBackend(mysql_url, connect_timeout_s=1)
    try:
        out = await backend._run_as("read", "SELECT SLEEP(1.5) AS s")  # pyright: ignore[reportPrivateUsage]
    finally:
        backend.dispose()
    assert out.dataframe["s"].tolist() == [0]


async def test_offload_returns_a_stuck_blocking_call_on_abort(hung_port: int) -> None:
    """What a schema read needs: a blocking call on the worker that abort releases."""
    import sqlalchemy as sa

    backend = DatabaseBackend(_url("postgres", hung_port), connect_timeout_s=2)
    try:
        controller = AbortController()
        asyncio.get_running_loop().call_later(0.3, controller.abort)
        with pytest.raises(QueryAborted):  # the connect timeout would raise QueryError instead
            await backend.offload(sa.inspect, backend.engine, signal=controller.signal)
        assert await backend.offload(sum, [1, 2]) == 3
    finally:
        backend.dispose()
