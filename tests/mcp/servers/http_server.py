"""A real streamable-HTTP MCP server (the SDK's MCPServer under uvicorn) for the hub's tests.

`python http_server.py`: listens on 127.0.0.1 port 0 and prints `PORT <n>` on stdout once the
socket listens (connections wait in its backlog until uvicorn accepts them). Its `whoami`
tool returns the Authorization header it was sent.
"""

from __future__ import annotations

import asyncio
import socket

import uvicorn
from mcp.server.mcpserver import Context, MCPServer

server = MCPServer("http-test-server")


@server.tool(description="Return the text it was given.")
def echo(text: str) -> str:
    return text


@server.tool(description="Return the Authorization header of the request.")
def whoami(ctx: Context) -> str:
    request = ctx.request_context.request
    headers = getattr(request, "headers", {})
    return str(headers.get("authorization", "<none>"))


async def main() -> None:
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.bind(("127.0.0.1", 0))
    sock.listen(64)
    print(f"PORT {sock.getsockname()[1]}", flush=True)
    config = uvicorn.Config(server.streamable_http_app(), log_level="warning", lifespan="on")
    await uvicorn.Server(config).serve(sockets=[sock])


if __name__ == "__main__":
    asyncio.run(main())
