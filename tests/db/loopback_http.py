"""A threaded HTTP server on loopback whose requests go to the methods of one object
(the scripted ClickHouse and Trino servers of the server-engine tests)."""

from __future__ import annotations

import http.server
import socket
import threading
from typing import Any

__all__ = ["LoopbackServer", "free_port"]


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
