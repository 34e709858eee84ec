"""A threaded HTTP server on loopback whose requests go to the methods of one object
(the scripted ClickHouse and Trino servers of the server-engine tests), and a session that
reads and then asks to write through one of them."""

from __future__ import annotations

import http.server
import socket
import threading
from pathlib import Path
from typing import Any

import pi_notebook.database
from pi_notebook import create_agent_session
from pi_notebook.approvals.protocol import Decision
from pi_notebook.testing import ScriptedApprovalUI, ScriptedModel, text, tool_call

__all__ = ["LoopbackServer", "free_port", "read_then_write"]


class LoopbackServer:
    """Serves on 127.0.0.1 (a free port) from ``start()`` to ``stop()``: each POST, GET and
    DELETE goes to ``self.post(handler, body)``, ``self.get(handler)``, ``self.delete(handler)``
    (``handler``: the request's :class:`http.server.BaseHTTPRequestHandler`)."""

    _server: Any = None

    @property
    def port(self) -> int:
        return int(self._server.server_address[1])

    def start(self) -> Any:
        owner = self

        class Handler(http.server.BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def do_POST(self) -> None:
                length = int(self.headers.get("Content-Length") or 0)
                owner.post(self, self.rfile.read(length).decode() if length else "")

            def do_GET(self) -> None:
                owner.get(self)

            def do_DELETE(self) -> None:
                owner.delete(self)

            def log_message(self, format: str, *args: Any) -> None:
                pass

        self._server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self._server.daemon_threads = True
        threading.Thread(target=self._server.serve_forever, daemon=True).start()
        return self

    def stop(self) -> None:
        self._server.shutdown()
        self._server.server_close()

    def post(self, handler: Any, body: str) -> None:
        handler.send_error(405)

    def get(self, handler: Any) -> None:
        handler.send_error(405)

    def delete(self, handler: Any) -> None:
        handler.send_error(405)


def free_port() -> int:
    """A loopback port with nothing listening on it (for a refused connection)."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


async def read_then_write(
    url: str, read: str, write: str, decision: Decision, audit: Path
) -> tuple[Any, Any, Any]:
    """A session on ``url`` whose model sends ``read``, then ``write``, which the person
    answers with ``decision``: the two tool results and the one approval request."""
    ui = ScriptedApprovalUI(decision)
    session = create_agent_session(
        model=ScriptedModel(
            [
                [tool_call("query_database", {"sql": read}, id="q1")],
                [tool_call("query_database", {"sql": write}, id="q2")],
                text("done"),
            ]
        ),
        ui=ui,
        audit=f"sqlite:///{audit}",
        extensions=[pi_notebook.database.database_extension(url)],
    )
    try:
        await session.prompt("go")
    finally:
        await session.close()
    first, second = [m for m in session.messages if m.role == "toolResult"]
    [request] = ui.requests
    return first, second, request
