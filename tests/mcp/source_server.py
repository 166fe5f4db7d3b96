"""A small MCP server (official Python `mcp` package, low-level API) that
lovia uses as a tool source in tests/all/mcp_sources.rs.

Tools:
  echo {text}          text back
  add {a: int, b: int} the sum, as text
  fail {message}       an isError result with the message
  picture              a text part and a 5-byte PNG image part
  crash                the process exits in the middle of the call
  grow                 lists a new tool `extra` and sends tools/list_changed
  extra                (after grow) answers "extra"
  secret               for exclude tests
  bare                 a schema without `properties`
  broken               a schema no validator compiles (refused by lovia)

Every call that reaches the server is appended to the file named by the
CALL_LOG environment variable (one JSON object per line), so a test can
tell that lovia rejected a call before the server saw it.
"""

import base64
import json
import os

import anyio
import mcp.server.stdio
import mcp.types as types
from mcp.server.lowlevel import NotificationOptions, Server

PNG = base64.b64encode(b"\x89PNG\r").decode()
grown = False


def log(name, arguments):
    path = os.environ.get("CALL_LOG")
    if path:
        with open(path, "a") as f:
            f.write(json.dumps({"pid": os.getpid(), "tool": name, "arguments": arguments}) + "\n")


def tool(name, schema, description=""):
    return types.Tool(name=name, description=description, input_schema=schema)


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
    if params.name == "grow":
        grown = True
        await ctx.session.send_tool_list_changed()
        return types.CallToolResult(content=[text("grown")])
    if params.name == "extra" and grown:
        return types.CallToolResult(content=[text("extra")])
    if params.name in ("secret", "bare"):
        return types.CallToolResult(content=[text(params.name)])
    return types.CallToolResult(content=[text(f"unknown tool {params.name}")], is_error=True)


server = Server("source-server", on_list_tools=list_tools, on_call_tool=call_tool)


async def main():
    async with mcp.server.stdio.stdio_server() as (read, write):
        options = server.create_initialization_options(NotificationOptions(tools_changed=True))
        await server.run(read, write, options)


if __name__ == "__main__":
    anyio.run(main)
