"""Drives `/mcp` of `lovia serve` with the official Python MCP client (PyPI
`mcp`), sending a tenant's key as `Authorization: Bearer`.

Usage:
  serve_client.py MODE tenant URL KEY OTHER_TOOL   # list, call echo, call another tenant's tool
  serve_client.py MODE calls URL KEY N             # N calls of echo, one after the other
  serve_client.py MODE elicit URL KEY              # launch, accepted through elicitation
  serve_client.py MODE wait URL KEY                # launch, whose elicitation is never answered in time
  serve_client.py MODE sessions URL KEY N          # N sessions held open at once
  serve_client.py MODE sealed URL_A URL_B KEY      # input_required sealed on A, redeemed on B, replayed on A
  serve_client.py MODE upload URL KEY WASM         # WASM uploaded to /api/plugins while connected
  serve_client.py MODE source URL KEY              # the listing of MCP-sourced tools, and src__picture's blocks

MODE is the client's `mode`: "auto" negotiates 2026-07-28, "legacy" uses
the initialize handshake (2025-11-25). Prints one JSON object of
observations on stdout; tests/all/serve/mcp.rs asserts on it.
"""

import contextlib
import json
import sys
import time

import anyio
import mcp_types as types
from mcp import Client
from mcp.client.streamable_http import streamable_http_client
from mcp.shared._httpx_utils import create_mcp_http_client
from mcp.shared.exceptions import MCPError
from mcp_types import InputRequiredResult

# The elicitation answerer of the stdio and HTTP tests (same folder).
from client import answering


def block(result):
    wire = result.model_dump(by_alias=True, mode="json")
    return {
        "is_error": bool(wire.get("isError")),
        "text": [c["text"] for c in wire["content"] if c["type"] == "text"],
    }


def client(mode, url, key, **kwargs):
    http = create_mcp_http_client(headers={"Authorization": f"Bearer {key}"})
    return Client(streamable_http_client(url, http_client=http), mode=mode, **kwargs)


async def tenant(mode, url, key, other_tool):
    out = {}
    async with client(mode, url, key) as c:
        out["protocol"] = c.protocol_version
        out["tools"] = [t.name for t in (await c.list_tools()).tools]
        out["echo"] = block(await c.call_tool("echo", {"text": "mine"}))
        out["other"] = block(await c.call_tool(other_tool, {"order_id": "A-1001"}))
    return out


async def workspace(mode, url, key):
    """One client writes a file into the tenant's /mcp workspace, a second
    client (its own session) reads it back; and the instructions name the
    workspace."""
    out = {}
    async with client(mode, url, key) as c:
        out["instructions"] = c.instructions
        out["write"] = block(await c.call_tool("write_file", {"path": "notes/plan.md", "content": "ship it"}))
    async with client(mode, url, key) as c:
        out["read"] = block(await c.call_tool("read_file", {"path": "notes/plan.md"}))
        out["outside"] = block(await c.call_tool("write_file", {"path": "../escape.md", "content": "no"}))
    return out


async def names_only(mode, url, key):
    async with client(mode, url, key) as c:
        return {"tools": [t.name for t in (await c.list_tools()).tools]}


async def calls(mode, url, key, n):
    out = {"results": []}
    async with client(mode, url, key) as c:
        for i in range(n):
            out["results"].append(block(await c.call_tool("echo", {"text": f"n{i}"})))
    return out


async def elicit(mode, url, key):
    asked = []
    async with client(mode, url, key, elicitation_callback=answering("accept", 0.0, asked)) as c:
        out = {"protocol": c.protocol_version, "result": block(await c.call_tool("launch", {"target": "elicited"}))}
    out["asked"] = asked
    return out


async def wait(mode, url, key):
    """The client would decline after 60 s; the test decides through the
    approve route meanwhile, which must win."""
    async with client(mode, url, key, elicitation_callback=answering("decline", 60.0)) as c:
        started = time.monotonic()
        out = {"protocol": c.protocol_version, "result": block(await c.call_tool("launch", {"target": "routed"}))}
        out["seconds"] = time.monotonic() - started
    return out


async def sessions(mode, url, key, n):
    out = {"opened": 0, "refused": None}
    async with contextlib.AsyncExitStack() as stack:
        for _ in range(n):
            try:
                await stack.enter_async_context(client(mode, url, key))
                out["opened"] += 1
            except Exception as e:  # noqa: BLE001 - the message is what we record
                out["refused"] = repr(e)
                break
    return out


async def sealed(mode, url_a, url_b, key):
    """One approval round trip across two replicas, by hand."""
    out = {}
    accept = {"approval": {"action": "accept", "content": {}}}
    cb = answering("accept")
    async with client(mode, url_a, key, elicitation_callback=cb) as a, client(
        mode, url_b, key, elicitation_callback=cb
    ) as b:
        out["protocol"] = a.protocol_version
        first = await a.session.call_tool("launch", {"target": "across"}, allow_input_required=True)
        assert isinstance(first, InputRequiredResult), first
        state = first.request_state

        async def retry(c):
            try:
                r = await c.session.call_tool(
                    "launch", {"target": "across"}, input_responses=accept, request_state=state,
                    allow_input_required=True
                )
            except MCPError as e:
                # A state that does not open is a JSON-RPC error (-32602).
                return {"error": {"code": e.error.code, "message": e.error.message}}
            if isinstance(r, InputRequiredResult):
                return {"input_required_again": True}
            return block(r)

        out["on_b"] = await retry(b)
        out["replayed_on_a"] = await retry(a)
    return out


async def upload(mode, url, key, wasm):
    """Connected to /mcp, uploads WASM through /api/plugins with the same
    key: the client hears tools/list_changed and lists the new tools."""
    out = {}
    changed = anyio.Event()

    async def on_message(message):
        if isinstance(message, types.ToolListChangedNotification):
            changed.set()

    async def names(c):
        return [t.name for t in (await c.list_tools()).tools]

    async with client(mode, url, key, message_handler=on_message) as c:
        out["protocol"] = c.protocol_version
        async with anyio.create_task_group() as tg:
            if c.protocol_version >= "2026-07-28":
                listening = anyio.Event()

                async def listen():
                    async with c.listen(tools_list_changed=True) as sub:
                        listening.set()
                        async for _event in sub:
                            changed.set()

                tg.start_soon(listen)
                await listening.wait()
            else:
                # A moment for the session's GET stream to open.
                await anyio.sleep(0.3)
            out["before"] = await names(c)
            http = create_mcp_http_client(headers={"Authorization": f"Bearer {key}"})
            async with http:
                with open(wasm, "rb") as f:
                    r = await http.post(url.removesuffix("/mcp") + "/api/plugins", content=f.read())
            out["upload_status"] = r.status_code
            with anyio.fail_after(15):
                await changed.wait()
            out["after"] = await names(c)
            out["new_tool"] = block(await c.call_tool("lookup_order", {"order_id": "A-1001"}))
            tg.cancel_scope.cancel()
    return out


async def source(mode, url, key):
    out = {}
    async with client(mode, url, key) as c:
        listed = (await c.list_tools()).tools
        out["tools"] = {t.name: t.model_dump(by_alias=True, mode="json", exclude_none=True) for t in listed}
        wire = (await c.call_tool("src__picture", {})).model_dump(by_alias=True, mode="json")
        out["picture"] = [{k: v for k, v in b.items() if k in ("type", "text", "mimeType", "data")} for b in wire["content"]]
    return out


async def main():
    mode, what = sys.argv[1], sys.argv[2]
    args = sys.argv[3:]
    if what == "tenant":
        out = await tenant(mode, args[0], args[1], args[2])
    elif what == "workspace":
        out = await workspace(mode, args[0], args[1])
    elif what == "names":
        out = await names_only(mode, args[0], args[1])
    elif what == "calls":
        out = await calls(mode, args[0], args[1], int(args[2]))
    elif what == "elicit":
        out = await elicit(mode, args[0], args[1])
    elif what == "wait":
        out = await wait(mode, args[0], args[1])
    elif what == "sessions":
        out = await sessions(mode, args[0], args[1], int(args[2]))
    elif what == "upload":
        out = await upload(mode, args[0], args[1], args[2])
    elif what == "source":
        out = await source(mode, args[0], args[1])
    elif what == "sealed":
        out = await sealed(mode, args[0], args[1], args[2])
    else:
        raise SystemExit(f"unknown what {what!r}")
    print(json.dumps(out))


anyio.run(main)
