"""An MCP server of an earlier spec revision (2024-11-05), written out by hand in JSON-RPC.

It knows only the `initialize` handshake (no `server/discover`: method not found), pins its
protocol version to 2024-11-05 whatever the client offers, and pages its tools two at a time,
so a client must negotiate down and follow `nextCursor`.
"""

import json
import sys
from typing import Any

VERSION = "2024-11-05"
TOOLS: list[dict[str, Any]] = [
    {
        "name": f"tool{i}",
        "description": f"Legacy tool number {i}.",
        "inputSchema": {"type": "object", "properties": {"n": {"type": "integer"}}},
    }
    for i in range(5)
]


def answer(request_id: Any, result: Any = None, error: Any = None) -> None:
    message: dict[str, Any] = {"jsonrpc": "2.0", "id": request_id}
    if error is not None:
        message["error"] = error
    else:
        message["result"] = result
    sys.stdout.write(json.dumps(message) + "\n")
    sys.stdout.flush()


for line in sys.stdin:
    message: dict[str, Any] = json.loads(line)
    method, request_id = message.get("method"), message.get("id")
    params: dict[str, Any] = message.get("params") or {}
    if request_id is None:
        continue  # a notification
    if method == "initialize":
        answer(
            request_id,
            {
                "protocolVersion": VERSION,
                "capabilities": {"tools": {}},
                "serverInfo": {"name": "legacy", "version": "1"},
            },
        )
    elif method == "tools/list":
        start = int(params.get("cursor") or 0)
        page: dict[str, Any] = {"tools": TOOLS[start : start + 2]}
        if start + 2 < len(TOOLS):
            page["nextCursor"] = str(start + 2)
        answer(request_id, page)
    elif method == "tools/call":
        arguments: dict[str, Any] = params.get("arguments") or {}
        n = arguments.get("n", 0)
        text = f"{params['name']} got {n} over {VERSION}"
        answer(request_id, {"content": [{"type": "text", "text": text}]})
    elif method == "ping":
        answer(request_id, {})
    else:
        answer(request_id, error={"code": -32601, "message": f"Method not found: {method}"})
