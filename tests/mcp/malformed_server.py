"""A raw JSON-RPC MCP stdio server for the tests whose tool list holds malformed entries
beside good ones (the SDK's servers cannot list such tools).

Tools listed: ``good`` (read-only, echoes ``text``), an entry whose ``inputSchema`` is not an
object, an entry without a name, and ``also_good``. Run it as ``python malformed_server.py``.
"""

from __future__ import annotations

import json
import sys
from typing import Any

_SCHEMA = {"type": "object", "properties": {"text": {"type": "string"}}, "required": ["text"]}
TOOLS: list[Any] = [
    {
        "name": "good",
        "description": "Echo text.",
        "inputSchema": _SCHEMA,
        "annotations": {"readOnlyHint": True},
    },
    {"name": "broken_schema", "description": "Its schema is a string.", "inputSchema": "nope"},
    {"description": "No name at all.", "inputSchema": _SCHEMA},
    {
        "name": "also_good",
        "description": "Echo text too.",
        "inputSchema": _SCHEMA,
        "annotations": {"readOnlyHint": True},
    },
]


def _answer(request: dict[str, Any]) -> dict[str, Any] | None:
    method, params = request.get("method"), request.get("params") or {}
    if "id" not in request:  # a notification
        return None
    if method == "initialize":
        result: Any = {
            "protocolVersion": params.get("protocolVersion"),
            "capabilities": {"tools": {}},
            "serverInfo": {"name": "malformed", "version": "1.0"},
        }
    elif method == "tools/list":
        result = {"tools": TOOLS}
    elif method == "tools/call":
        text = f"{params.get('name')}: {(params.get('arguments') or {}).get('text')}"
        result = {"content": [{"type": "text", "text": text}], "isError": False}
    elif method == "ping":
        result = {}
    else:
        return {
            "jsonrpc": "2.0",
            "id": request["id"],
            "error": {"code": -32601, "message": f"no method {method}"},
        }
    return {"jsonrpc": "2.0", "id": request["id"], "result": result}


def main() -> None:
    for line in sys.stdin:
        if not line.strip():
            continue
        answer = _answer(json.loads(line))
        if answer is not None:
            sys.stdout.write(json.dumps(answer) + "\n")
            sys.stdout.flush()


if __name__ == "__main__":
    main()
