"""A real MCP server over stdio (the SDK's MCPServer) with the tools the hub's tests call.

`python stdio_server.py [many]`: `many` adds 40 more tools, for the search path.
"""

from __future__ import annotations

import os
import sys

import anyio
from mcp.server.mcpserver import MCPServer
from mcp.server.mcpserver.exceptions import ToolError

server = MCPServer("test-server")


@server.tool(description="Return the text it was given.")
def echo(text: str) -> str:
    return text


@server.tool(description="Return this server process's pid.")
def pid() -> str:
    return str(os.getpid())


@server.tool(description="Return the value of an environment variable, or <unset>.")
def env(name: str) -> str:
    return os.environ.get(name, "<unset>")


@server.tool(description="Write 'started' into the FIFO at `fifo` (if any), then never answer.")
async def slow(fifo: str = "") -> str:
    if fifo:
        with open(fifo, "w") as signal:  # noqa: ASYNC230 (a FIFO the test is already reading)
            signal.write("started\n")
    await anyio.sleep_forever()
    return "unreachable"


@server.tool(description="Always fail with a message the model can read.")
def fail(reason: str) -> str:
    raise ToolError(f"failed on purpose: {reason}")


@server.tool(description="Try to write `text` into the file at `path`; say what happened.")
def write_file(path: str, text: str) -> str:
    try:
        with open(path, "w") as file:
            file.write(text)
    except OSError as exc:
        return f"refused: {exc.strerror}"
    return "written"


@server.tool(description="A tool whose input schema is broken.")
def bad_schema(x: int) -> str:
    return str(x)


@server.tool(name="dotted.name", description="A tool whose name has a dot.")
def dotted() -> str:
    return "dotted"


# An input schema that is not valid JSON Schema: `type` must be a string or an array.
server._tool_manager.get_tool("bad_schema").parameters = {  # pyright: ignore[reportOptionalMemberAccess]
    "type": "object",
    "properties": {"x": {"type": 12}},
}

if "many" in sys.argv[1:]:
    topics = ["weather", "calendar", "invoice", "ticket", "deploy", "backup", "email", "search"]
    verbs = ["create", "delete", "list", "update", "archive"]
    for index in range(40):
        topic, verb = topics[index % len(topics)], verbs[index // len(topics)]

        def make(topic: str = topic, verb: str = verb) -> str:
            return f"{verb} {topic} done"

        server.add_tool(make, name=f"{verb}_{topic}", description=f"{verb.title()} a {topic} item.")

if __name__ == "__main__":
    server.run("stdio")
