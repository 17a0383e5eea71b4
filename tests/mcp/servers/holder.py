"""A process holding an McpHub: it starts one stdio server, prints `PID <pid>` and waits.

`python holder.py MODE WORKSPACE`: the test SIGKILLs this process and checks that the server
(and every process of it) dies with it.
"""

from __future__ import annotations

import asyncio
import os
import sys

from subagents.mcp import McpHub, parse_servers
from subagents.policy import SandboxPolicy, parse_mode

SERVERS = os.path.dirname(os.path.abspath(__file__))


async def main(mode: str, workspace: str) -> None:
    script = os.path.join(SERVERS, "stdio_server.py")
    servers = parse_servers({"t": {"command": sys.executable, "args": [script]}}, source="test")
    policy = SandboxPolicy(mode=parse_mode(mode), workspace_root=workspace)
    async with McpHub(servers, policy=policy, readable=[SERVERS]) as hub:
        await hub.tools("t")
        print(f"PID {hub.pid('t')}", flush=True)
        await asyncio.Event().wait()


if __name__ == "__main__":
    asyncio.run(main(sys.argv[1], sys.argv[2]))
