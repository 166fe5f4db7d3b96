"""A small MCP server (official Python `mcp` package, low-level API) that
tests/all/mcp_sources/confined.rs starts under lovia's kernel confinement.

Tools:
  connect {port: int}  opens a TCP connection to 127.0.0.1:PORT and sends
                       "hello"; answers "sent" or "refused: <error>"
  spawn                starts `sleep 300.N` (a grandchild of lovia that ignores
                       SIGTERM) and answers {"sleep": "300.N", "cwd", "tmpdir"}
  write {path}         writes "written" to PATH; answers "wrote" or
                       "refused: <error>"
"""

import json
import os
import signal
import socket
import subprocess

import anyio
import mcp.server.stdio
import mcp.types as types
from mcp.server.lowlevel import NotificationOptions, Server


def tool(name, properties, required):
    schema = {"type": "object", "properties": properties, "required": required}
    return types.Tool(name=name, description=name, input_schema=schema)


async def list_tools(ctx, params):
    return types.ListToolsResult(
        tools=[
            tool("connect", {"port": {"type": "integer"}}, ["port"]),
            tool("spawn", {}, []),
            tool("write", {"path": {"type": "string"}}, ["path"]),
        ]
    )


def ignore_sigterm():
    signal.signal(signal.SIGTERM, signal.SIG_IGN)


async def call_tool(ctx, params):
    args = params.arguments or {}
    text = lambda t: types.CallToolResult(content=[types.TextContent(type="text", text=t)])
    if params.name == "connect":
        try:
            with socket.create_connection(("127.0.0.1", args["port"]), timeout=5) as s:
                s.sendall(b"hello")
            return text("sent")
        except OSError as e:
            return text(f"refused: {e}")
    if params.name == "spawn":
        # Not holding lovia's stderr: a survivor would not delay lovia's exit,
        # and the test's wait for its death fails fast.
        # A duration no other process has: the test finds the grandchild on
        # the host by its command line (its pid here is its PID namespace's).
        duration = "300.%d" % int.from_bytes(os.urandom(4), "big")
        subprocess.Popen(
            ["sleep", duration], preexec_fn=ignore_sigterm, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL
        )
        return text(json.dumps({"sleep": duration, "cwd": os.getcwd(), "tmpdir": os.environ.get("TMPDIR")}))
    if params.name == "write":
        try:
            with open(args["path"], "w") as f:
                f.write("written")
            return text("wrote")
        except OSError as e:
            return text(f"refused: {e}")
    return text(f"unknown tool {params.name}")


server = Server("confined-server", on_list_tools=list_tools, on_call_tool=call_tool)


async def main():
    async with mcp.server.stdio.stdio_server() as (read, write):
        await server.run(read, write, server.create_initialization_options(NotificationOptions()))


anyio.run(main)
