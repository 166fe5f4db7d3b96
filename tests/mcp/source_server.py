"""A small MCP server (official Python `mcp` package, low-level API) that
lovia uses as a tool source in tests/all/mcp_sources.rs.

Tools:
  echo {text}          text back
  add {a: int, b: int} the sum, as text
  fail {message}       an isError result with the message
  picture              a text part and a 16-byte PNG image part
  crash                the process exits in the middle of the call
  grow                 lists a new tool `extra` and sends tools/list_changed
  extra                (after grow) answers "extra"
  secret               for exclude tests
  bare                 a schema without `properties`
  broken               a schema no validator compiles (refused by lovia)
  header {name}        the value of that HTTP request header, or "(none)"
  huge {bytes: int}    a text result of that many bytes (for the message bound)
  crash_once           as crash the first time (a marker file beside CALL_LOG),
                       then answers "survived"
  write_file {path}    annotated as server-filesystem's: destructiveHint true,
                       readOnlyHint false, the other two unsaid
  tasks_only           execution.taskSupport "required" (rmcp 3.11 drops the field);
                       this SDK runs no tasks, so it answers at once, with
                       "asked as a task" when the call carried `task`
  rpc_error            answers with a JSON-RPC error (-32602) instead of a result
  steps                sends three progress notifications, then answers "stepped"

Run as `source_server.py --http PORT` it serves streamable HTTP at
http://127.0.0.1:PORT/mcp instead of stdio (PORT 0: any free port); it
prints the port it listens on as its first line of stdout.

Every call that reaches the server is appended to the file named by the
CALL_LOG environment variable (one JSON object per line), so a test can
tell that lovia rejected a call before the server saw it.
"""

import base64
import json
import os
import socket
import sys

import anyio
import mcp.server.stdio
import mcp.types as types
from mcp.server.lowlevel import NotificationOptions, Server
from mcp.shared.exceptions import MCPError

# The PNG signature and the start of an IHDR chunk: 16 bytes that read as a PNG.
PNG = base64.b64encode(b"\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR").decode()
grown = False
# Which process answered, as a number no other start of this server has
# (a confined server is pid 1 of its own PID namespace at every start).
INSTANCE = int.from_bytes(os.urandom(6), "big")


def log(name, arguments):
    path = os.environ.get("CALL_LOG")
    if path:
        with open(path, "a") as f:
            f.write(json.dumps({"instance": INSTANCE, "tool": name, "arguments": arguments}) + "\n")


def tool(name, schema, description="", **extra):
    return types.Tool(name=name, description=description, input_schema=schema, **extra)


def text_schema(key):
    return {"type": "object", "properties": {key: {"type": "string"}}, "required": [key]}


async def list_tools(ctx, params):
    tools = [
        tool("echo", text_schema("text"), "Echoes text."),
        tool(
            "add",
            {
                "type": "object",
                "properties": {"a": {"type": "integer"}, "b": {"type": "integer"}},
                "required": ["a", "b"],
            },
            "Adds two integers.",
        ),
        tool("fail", text_schema("message"), "Always an error result."),
        tool("picture", {"type": "object", "properties": {}}, "A picture."),
        tool("crash", {"type": "object", "properties": {}}, "Exits mid-call."),
        tool("grow", {"type": "object", "properties": {}}, "Adds the tool `extra`."),
        tool("secret", {"type": "object", "properties": {}}, "Excluded in tests."),
        tool("bare", {"type": "object"}, "No properties at all."),
        tool("broken", {"type": "object", "properties": {"a": {"type": 5}}}, "A schema that does not compile."),
        tool("header", text_schema("name"), "A request header's value."),
        tool(
            "huge",
            {"type": "object", "properties": {"bytes": {"type": "integer"}}, "required": ["bytes"]},
            "A long text.",
        ),
        tool("crash_once", {"type": "object", "properties": {}}, "Exits mid-call the first time."),
        tool(
            "write_file",
            text_schema("path"),
            "Writes a file.",
            annotations=types.ToolAnnotations(destructive_hint=True, read_only_hint=False),
        ),
        tool(
            "tasks_only",
            {"type": "object", "properties": {}},
            "Runs only as a task.",
            execution=types.ToolExecution(task_support="required"),
        ),
        tool("rpc_error", {"type": "object", "properties": {}}, "A JSON-RPC error."),
        tool("steps", {"type": "object", "properties": {}}, "Reports progress."),
    ]
    if grown:
        tools.append(tool("extra", {"type": "object", "properties": {}}, "Listed after grow."))
    return types.ListToolsResult(tools=tools)


async def call_tool(ctx, params):
    global grown
    args = params.arguments or {}
    log(params.name, args)
    text = lambda t: types.TextContent(type="text", text=t)
    if params.name == "echo":
        return types.CallToolResult(content=[text(args["text"])])
    if params.name == "tasks_only":
        asked = getattr(params, "task", None) is not None
        return types.CallToolResult(content=[text("asked as a task" if asked else "asked as a plain call")])
    if params.name == "add":
        return types.CallToolResult(content=[text(str(args["a"] + args["b"]))])
    if params.name == "fail":
        return types.CallToolResult(content=[text(args["message"])], is_error=True)
    if params.name == "picture":
        return types.CallToolResult(
            content=[text("a chart"), types.ImageContent(type="image", data=PNG, mime_type="image/png")]
        )
    if params.name == "crash":
        os._exit(3)
    if params.name == "crash_once":
        marker = os.environ["CALL_LOG"] + ".crashed"
        if not os.path.exists(marker):
            open(marker, "w").close()
            os._exit(3)
        return types.CallToolResult(content=[text("survived")])
    if params.name == "header":
        # Over HTTP, `ctx.request` is the Starlette request that carried the call.
        headers = ctx.request.headers if ctx.request is not None else {}
        return types.CallToolResult(content=[text(headers.get(args["name"].lower(), "(none)"))])
    if params.name == "huge":
        return types.CallToolResult(content=[text("x" * args["bytes"])])
    if params.name == "grow":
        grown = True
        await ctx.session.send_tool_list_changed()
        return types.CallToolResult(content=[text("grown")])
    if params.name == "extra" and grown:
        return types.CallToolResult(content=[text("extra")])
    if params.name == "write_file":
        return types.CallToolResult(content=[text(f"wrote {args['path']}")])
    if params.name == "rpc_error":
        raise MCPError(-32602, "no such row")
    if params.name == "steps":
        token = ((ctx.params or {}).get("_meta") or {}).get("progressToken")
        if token is None:
            return types.CallToolResult(content=[text("no progress token")], is_error=True)
        for i in range(1, 4):
            await ctx.session.send_progress_notification(
                token, i, 3, f"step {i} of 3", related_request_id=ctx.request_id
            )
        return types.CallToolResult(content=[text("stepped")])
    if params.name in ("secret", "bare"):
        return types.CallToolResult(content=[text(params.name)])
    return types.CallToolResult(content=[text(f"unknown tool {params.name}")], is_error=True)


server = Server("source-server", on_list_tools=list_tools, on_call_tool=call_tool)


async def main():
    async with mcp.server.stdio.stdio_server() as (read, write):
        options = server.create_initialization_options(NotificationOptions(tools_changed=True))
        await server.run(read, write, options)


async def main_http(port):
    import uvicorn

    # Bound here (SO_REUSEADDR, so that a restart can take the port of a
    # server that died) and announced, so that the test needs no guess.
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind(("127.0.0.1", port))
    # Listening before the port is announced: a client that comes before
    # uvicorn has started waits in the backlog instead of being refused.
    sock.listen(128)
    print(sock.getsockname()[1], flush=True)
    app = server.streamable_http_app(host="127.0.0.1")
    config = uvicorn.Config(app, log_level="warning")
    await uvicorn.Server(config).serve(sockets=[sock])


if __name__ == "__main__":
    if len(sys.argv) == 3 and sys.argv[1] == "--http":
        anyio.run(main_http, int(sys.argv[2]))
    else:
        anyio.run(main)
