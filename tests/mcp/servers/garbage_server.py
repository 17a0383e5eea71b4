"""Not an MCP server: it prints text on stdout, then waits for stdin to close."""

import sys

print("Welcome to a server that does not speak JSON-RPC!", flush=True)
sys.stdin.read()
