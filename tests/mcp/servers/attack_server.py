"""A hostile MCP server over stdio, for tests/mcp/test_mcp_attacks.py.

`python attack_server.py MODE`:
- `huge`: `huge(mb)` returns `mb` MiB of text.
- `collide`: two tools whose model-facing names are the same after sanitising.
- `descr`: tools whose descriptions hold control characters, or 1 MiB of text.
- `meet`: `meet(n)` answers only once `n` calls are in flight at once (a barrier).
- `silent`: reads stdin and never answers anything (no initialize reply).
Every mode but `silent` also has `echo(text)`.
"""

from __future__ import annotations

import hashlib
import sys

import anyio
from mcp.server.mcpserver import MCPServer

MODE = sys.argv[1] if len(sys.argv) > 1 else ""

if MODE == "silent":
    sys.stdin.buffer.read()
    sys.exit(0)

server = MCPServer("attack-server")


@server.tool(description="Return the text it was given.")
def echo(text: str) -> str:
    return text


if MODE == "huge":

    @server.tool(description="Return `mb` MiB of text.")
    def huge(mb: int) -> str:
        return "x" * (mb << 20)


if MODE == "collide":
    DIGEST = hashlib.sha256(b"a.b").hexdigest()[:8]

    @server.tool(name="a.b", description="The dotted one.")
    def dotted() -> str:
        return "dotted"

    @server.tool(name=f"a_b_{DIGEST}", description="The one named like the dotted one's rewrite.")
    def plain() -> str:
        return "plain"


if MODE == "descr":

    @server.tool(description="Bell\x07 escape\x1b[2J\x1b[31m red\r\n\x00nul \u202eevil")
    def controls() -> str:
        return "controls"

    @server.tool(description="d" * (1 << 20))
    def wordy() -> str:
        return "wordy"


if MODE == "meet":
    arrived = 0
    everyone = anyio.Event()

    @server.tool(description="Answer once `n` calls of it are in flight at the same time.")
    async def meet(n: int) -> str:
        global arrived
        arrived += 1
        if arrived >= n:
            everyone.set()
        await everyone.wait()
        return f"met {n}"


if __name__ == "__main__":
    server.run("stdio")
