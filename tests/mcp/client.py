"""Drives `lovia mcp` with the official Python MCP client (PyPI `mcp`).

Usage:
  client.py MODE stdio LOVIA_ARGS...      # spawns `lovia mcp ...` itself
  client.py MODE http URL SERVER_PID
  client.py MODE neighbour URL            # two clients: one attacks, one works
  client.py MODE approvals SERVER         # approvals answered in every way
  client.py MODE forged SERVER            # request states forged, replayed, moved
  client.py MODE logging SERVER           # a tool's log line, asked for at info and not asked for
  client.py MODE pages SERVER             # tools/list page by page, and a bad cursor
  client.py MODE loose SERVER             # tools/call with arguments that are not an object
  client.py MODE progress SERVER          # 1,000 progress messages in a tight loop
  client.py MODE watch FILE NEW SERVER    # FILE (watched) replaced by NEW, then by garbage
  client.py MODE workspace SERVER         # a coding session with the workspace tools (lovia mcp --workspace)
  client.py MODE questions SERVER         # ask_human answered in every way (lovia mcp --ask-human)
  client.py MODE always SERVER            # an approval with "always allow" ticked, then the same tool again
  client.py MODE program_asks SERVER      # a run_code program that calls ask_human, answered "tea"
  client.py MODE withdraw SERVER          # a call cancelled while its approval or question is open
  client.py MODE hints SERVER             # the tools' annotations, and those a client auto-approves
  client.py MODE probe SERVER             # connect (auto: server/discover alone), then leave
  client.py MODE watch_call FILE NEW TOOL ARGS SERVER
                                          # TOOL called, FILE replaced by NEW, TOOL called again

SERVER is `stdio LOVIA_ARGS...` or `http URL`.

MODE is the client's `mode`: "auto" negotiates 2026-07-28 through
server/discover, "legacy" uses the initialize handshake (2025-11-25).
Prints one JSON object of observations on stdout; tests/all/mcp.rs asserts
on it. Anything unexpected raises, so the process fails loudly.
"""

import json
import os
import shutil
import sys
import time

import anyio
import mcp_types as types
from mcp import Client, StdioServerParameters
from mcp.shared.exceptions import MCPError
from mcp_types import ElicitResult, InputRequiredResult


def cpu_seconds(pid):
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    # utime and stime are fields 14 and 15 of the whole line (1-based).
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def child_pid():
    me = os.getpid()
    with open(f"/proc/{me}/task/{me}/children") as f:
        kids = f.read().split()
    assert len(kids) == 1, kids
    return int(kids[0])


def rpc_error(e):
    """A JSON-RPC error answer as the client raised it: code, message, data."""
    error = getattr(e, "error", None)
    if error is None:
        return {"raised": type(e).__name__, "message": str(e)}
    return {"error": error.model_dump(by_alias=True, mode="json", exclude_none=True)}


def block(result):
    wire = result.model_dump(by_alias=True, mode="json")
    return {
        "is_error": bool(wire.get("isError")),
        "text": [c["text"] for c in wire["content"] if c["type"] == "text"],
        "structured": wire.get("structuredContent"),
    }


async def observe(client, pid_of_server):
    out = {"protocol": client.protocol_version}
    listed = await client.list_tools()
    # The wire names (inputSchema, outputSchema, annotations, ...), as a client receives them.
    out["tools"] = [t.model_dump(by_alias=True, exclude_none=True, mode="json") for t in listed.tools]
    out["text"] = block(await client.call_tool("echo", {"text": "hi"}))
    out["json"] = block(await client.call_tool("count_calls", {}))
    out["array"] = block(await client.call_tool("search_docs", {"query": "timeouts"}))
    out["invalid"] = block(await client.call_tool("search_docs", {"limit": 99}))
    out["tool_error"] = block(await client.call_tool("lookup_order", {"order_id": "A-0000"}))
    out["unknown"] = block(await client.call_tool("no_such_tool", {}))
    try:
        out["approval"] = block(await client.call_tool("apply_migration", {"version": 7}))
    except MCPError as e:
        out["approval"] = rpc_error(e)
    out["stdout_flood"] = block(await client.call_tool("flood_stdout", {"kib": 64}))
    seen = []

    async def on_progress(progress, total, message):
        seen.append([progress, message])

    out["progress_result"] = block(await client.call_tool("progress", {"steps": 3}, progress_callback=on_progress))
    out["progress"] = seen
    out["timeout"] = block(await client.call_tool("spin_ms", {"ms": 20000}))
    chart = await client.call_tool("bar_chart", {"values": [3, 1, 2], "label": "visits"})
    out["chart"] = chart.model_dump(by_alias=True, exclude_none=True, mode="json")["content"]
    out["legacy"] = block(await client.call_tool("legacy_echo", {"text": "old"}))

    # Cancellation: the client gives up after 0.5 s and sends notifications/cancelled.
    pid = pid_of_server()
    started = time.monotonic()
    try:
        await client.call_tool("spin_ms", {"ms": 3_000_000}, read_timeout_seconds=0.5)
        out["cancel_error"] = None
    except Exception as e:  # noqa: BLE001 - the kind is what we record
        out["cancel_error"] = type(e).__name__
    out["cancel_returned_after_s"] = time.monotonic() - started
    await anyio.sleep(0.5)
    before = cpu_seconds(pid)
    await anyio.sleep(2.0)
    out["cpu_after_cancel_s"] = cpu_seconds(pid) - before
    t = time.monotonic()
    out["after_cancel"] = block(await client.call_tool("echo", {"text": "still here"}))
    out["after_cancel_ms"] = (time.monotonic() - t) * 1000
    return out


async def neighbours(mode, url):
    """Client A runs a component that never yields; client B, on its own
    session, keeps calling echo meanwhile and records its slowest answer."""
    out = {}
    async with Client(url, mode=mode) as a, Client(url, mode=mode) as b:
        async def attack():
            out["attack"] = block(await a.call_tool("loop_forever", {}))

        async def work():
            await anyio.sleep(0.3)
            answers, slowest = [], 0.0
            for i in range(10):
                t = time.monotonic()
                answers.append(block(await b.call_tool("echo", {"text": f"b{i}"})))
                slowest = max(slowest, time.monotonic() - t)
                await anyio.sleep(0.1)
            out["neighbour"] = answers
            out["neighbour_slowest_ms"] = slowest * 1000

        async with anyio.create_task_group() as tg:
            tg.start_soon(attack)
            tg.start_soon(work)
    return out


def answering(action, delay_s=0.0, asked=None):
    """An elicitation callback that records each prompt, waits `delay_s`, then answers `action`."""

    async def callback(context, params):
        if asked is not None:
            asked.append(params.message)
        await anyio.sleep(delay_s)
        return ElicitResult(action=action, content={} if action == "accept" else None)

    return callback


def server_of(argv):
    if argv[0] == "stdio":
        return StdioServerParameters(command=argv[1], args=argv[2:])
    return argv[1]


async def approvals(mode, server):
    """Each way a client can answer an approval, each on its own client."""
    out = {}
    for name, tool, args, callback in [
        ("accept", "apply_migration", {"version": 7}, "accept"),
        ("accept_launch", "launch", {"target": "approved"}, "accept"),
        ("decline", "launch", {"target": "declined"}, "decline"),
        ("cancel", "launch", {"target": "cancelled"}, "cancel"),
        ("unable", "launch", {"target": "unasked"}, None),
        ("late", "launch", {"target": "late"}, "late"),
    ]:
        asked = []
        if callback is None:
            kwargs = {}
        elif callback == "late":
            # Answers accept after the server's approval timeout (1 s in the tests).
            kwargs = {"elicitation_callback": answering("accept", 2.5, asked)}
        else:
            kwargs = {"elicitation_callback": answering(callback, 0.0, asked)}
        async with Client(server, mode=mode, **kwargs) as client:
            out["protocol"] = client.protocol_version
            try:
                out[name] = block(await client.call_tool(tool, args))
            except Exception as e:  # noqa: BLE001 - what the client raised is what we record
                out[name] = rpc_error(e)
        out[name + "_asked"] = asked
    return out


async def forged(mode, server):
    """Drives input_required by hand (2026-07-28) and sends back states the
    server did not issue for this call: each must be refused, never run."""
    out = {}
    accept = {"approval": {"action": "accept", "content": {}}}
    async with Client(server, mode=mode, elicitation_callback=answering("accept")) as client:
        s = client.session

        async def first(target):
            r = await s.call_tool("launch", {"target": target}, allow_input_required=True)
            assert isinstance(r, InputRequiredResult), r
            return r

        out["first"] = (await first("x")).model_dump(by_alias=True, exclude_none=True, mode="json")

        async def retry(target, state, responses=accept):
            try:
                r = await s.call_tool(
                    "launch", {"target": target}, input_responses=responses, request_state=state,
                    allow_input_required=True
                )
            except MCPError as e:
                return rpc_error(e)
            if isinstance(r, InputRequiredResult):
                return {"input_required_again": True}
            return block(r)

        state = (await first("tampered")).request_state
        # One character of the tag changed: the HMAC no longer matches.
        flipped = state[:-1] + ("A" if state[-1] != "A" else "B")
        out["tampered"] = await retry("tampered", flipped)
        out["made_up"] = await retry("made_up", "rs1.e30.AAAA")
        # A state issued for one call's arguments, sent with another's.
        state = (await first("harmless")).request_state
        out["moved"] = await retry("dangerous", state)
        # The genuine state works once; the same state again is a replay.
        state = (await first("once")).request_state
        out["genuine"] = await retry("once", state)
        out["replayed"] = await retry("once", state)
        # A genuine state with a decline: no.
        state = (await first("declined")).request_state
        out["declined"] = await retry("declined", state, {"approval": {"action": "decline"}})
        # A genuine state but no answer at all: no.
        state = (await first("unanswered")).request_state
        out["unanswered"] = await retry("unanswered", state, None)
    return out


async def logging_(mode, server):
    """The approved `launch` logs a warning: a client that asked for info
    gets it as notifications/message; one that asked for nothing gets none."""
    out = {}
    for name, level in [("asked", "info"), ("unasked", None), ("above", "error")]:
        seen = []

        async def on_log(params, seen=seen):
            seen.append(params.model_dump(by_alias=True, mode="json", exclude_none=True))

        kwargs = {"elicitation_callback": answering("accept"), "logging_callback": on_log}
        # 2026-07-28 asks per request in `_meta`; 2025-11-25 with logging/setLevel.
        if mode != "legacy" and level is not None:
            kwargs["log_level"] = level
        async with Client(server, mode=mode, **kwargs) as client:
            out["protocol"] = client.protocol_version
            if mode == "legacy" and level is not None:
                await client.set_logging_level(level)
            out[name + "_result"] = block(await client.call_tool("launch", {"target": name}))
            # Notifications ride the call's stream before its result; a moment for any straggler.
            await anyio.sleep(0.3)
        out[name] = seen
    return out


async def pages(mode, server):
    out = {"pages": [], "names": []}
    async with Client(server, mode=mode) as client:
        cursor = None
        while True:
            page = await client.list_tools(cursor=cursor)
            out["pages"].append(len(page.tools))
            out["names"].extend(t.name for t in page.tools)
            cursor = page.next_cursor
            if cursor is None:
                break
            out["cursor"] = cursor
        try:
            await client.list_tools(cursor="not-a-lovia-cursor")
            out["bad_cursor"] = None
        except Exception as e:  # noqa: BLE001 - the message is what we record
            out["bad_cursor"] = str(e)
    return out


async def loose(mode, server):
    """tools/call with arguments that are not a JSON object, sent as is."""
    out = {}
    async with Client(server, mode=mode) as client:
        out["protocol"] = client.protocol_version
        for name, arguments in [("array", [1, "a"]), ("string", "hi"), ("number", 5), ("boolean", True)]:
            request = types.Request[dict, str](method="tools/call", params={"name": "echo", "arguments": arguments})
            result = await client.session.send_request(request, types.CallToolResult)
            out[name] = block(result)
        # A name that is not a string leaves the call unroutable: a protocol error.
        request = types.Request[dict, str](method="tools/call", params={"name": 5, "arguments": [1]})
        try:
            await client.session.send_request(request, types.CallToolResult)
            out["bad_name"] = None
        except Exception as e:  # noqa: BLE001 - the message is what we record
            out["bad_name"] = str(e)
        out["after"] = block(await client.call_tool("echo", {"text": "still here"}))
    return out


async def calls(mode, server, wanted):
    """Each [tool, arguments] of `wanted`, called in turn: what the client reads of each."""
    out = {"results": []}
    async with Client(server, mode=mode) as client:
        out["protocol"] = client.protocol_version
        for tool, arguments in wanted:
            out["results"].append(block(await client.call_tool(tool, arguments)))
    return out


async def progress_burst(mode, server, steps):
    """A tool reporting progress in a tight loop: what reaches the client."""
    out = {}
    seen = []

    async def on_progress(progress, total, message):
        seen.append([progress, message])

    async with Client(server, mode=mode) as client:
        out["protocol"] = client.protocol_version
        started = time.monotonic()
        out["result"] = block(await client.call_tool("progress", {"steps": steps}, progress_callback=on_progress))
        out["call_ms"] = (time.monotonic() - started) * 1000
    out["progress"] = seen
    return out


async def watched(mode, server, target, replacement):
    """Replaces the watched plugin file with another component, then with
    garbage, and records the tools/list_changed notifications and listings."""
    out = {}
    changed = anyio.Event()
    count = [0]

    def note():
        count[0] += 1
        changed.set()

    async def on_message(message):
        if isinstance(message, types.ToolListChangedNotification):
            note()

    async def names(client):
        return [t.name for t in (await client.list_tools()).tools]

    async with Client(server, mode=mode, message_handler=on_message) as client:
        out["protocol"] = client.protocol_version
        async with anyio.create_task_group() as tg:
            if client.protocol_version >= "2026-07-28":
                listening = anyio.Event()

                async def listen():
                    async with client.listen(tools_list_changed=True) as sub:
                        out["honored"] = bool(sub.honored.tools_list_changed)
                        listening.set()
                        async for _event in sub:
                            note()

                tg.start_soon(listen)
                await listening.wait()
            else:
                # A moment for the session's stream to open.
                await anyio.sleep(0.3)
            out["before"] = await names(client)
            shutil.copyfile(replacement, target)
            started = time.monotonic()
            with anyio.fail_after(15):
                await changed.wait()
            out["notified_after_s"] = time.monotonic() - started
            out["after"] = await names(client)
            out["new_tool"] = block(await client.call_tool("search_docs", {"query": "timeouts"}))
            out["old_tool"] = block(await client.call_tool("lookup_order", {"order_id": "A-1001"}))
            out["notifications"] = count[0]
            with open(target, "wb") as f:
                f.write(b"\0asm but not a component")
            await anyio.sleep(3.0)
            out["after_broken"] = await names(client)
            out["notifications_after_broken"] = count[0]
            out["still_works"] = block(await client.call_tool("search_docs", {"query": "timeouts"}))
            tg.cancel_scope.cancel()
    return out


async def watched_call(mode, server, target, replacement, tool, arguments):
    """Calls `tool`, replaces `target` (a watched plugin's config, say) with
    `replacement`, waits for tools/list_changed, and calls `tool` again."""
    out = {}
    changed = anyio.Event()

    async def on_message(message):
        if isinstance(message, types.ToolListChangedNotification):
            changed.set()

    async with Client(server, mode=mode, message_handler=on_message) as client:
        out["protocol"] = client.protocol_version
        # 2025-11-25 only: the session's stream carries the notification.
        await anyio.sleep(0.3)
        out["before"] = block(await client.call_tool(tool, arguments))
        shutil.copyfile(replacement, target)
        started = time.monotonic()
        with anyio.fail_after(15):
            await changed.wait()
        out["notified_after_s"] = time.monotonic() - started
        out["after"] = block(await client.call_tool(tool, arguments))
    return out


async def workspace_session(mode, server):
    """A scripted coding session over `lovia mcp --workspace`: write, list,
    grep, read, edit, a test command (asked, accepted), a background process
    polled then killed, a denied write; then a command declined on its own client."""
    out = {}
    asked = []
    async with Client(server, mode=mode, elicitation_callback=answering("accept", 0.0, asked)) as client:
        out["protocol"] = client.protocol_version
        out["instructions"] = client.instructions
        out["tools"] = [t.name for t in (await client.list_tools()).tools]
        for name, tool, args in [
            ("write", "write_file", {"path": "src/app.py", "content": "def main():\n    return 1\n"}),
            ("list", "list_files", {"pattern": "*.py"}),
            ("grep", "grep_files", {"pattern": "return"}),
            ("read", "read_file", {"path": "src/app.py", "start": 2}),
            ("edit", "edit_file", {"path": "src/app.py", "old": "return 1", "new": "return 2"}),
            ("test", "shell", {"command": "grep -c 'return 2' src/app.py"}),
            ("background", "shell", {"command": "echo serving; sleep 30", "background": True}),
            ("denied_write", "write_file", {"path": "../outside.txt", "content": "x"}),
        ]:
            out[name] = block(await client.call_tool(tool, args))
        process = out["background"]["text"][0].split()[3]
        await anyio.sleep(0.5)
        out["poll"] = block(await client.call_tool("read_process_output", {"process_id": process}))
        out["kill"] = block(await client.call_tool("kill_process", {"process_id": process}))
    out["asked"] = asked
    async with Client(server, mode=mode, elicitation_callback=answering("decline")) as client:
        out["declined"] = block(await client.call_tool("shell", {"command": "touch declined.txt"}))
    return out


def schema_of(params):
    """The requested schema as plain JSON, whatever type the client gives it."""
    schema = params.requested_schema
    if hasattr(schema, "model_dump"):
        return schema.model_dump(by_alias=True, mode="json", exclude_none=True)
    return schema


def replying(action, answer=None, asked=None):
    """An elicitation callback that records each request (message and
    schema) and answers `action` with `answer` in the form's field."""

    async def callback(context, params):
        if asked is not None:
            asked.append({"message": params.message, "schema": schema_of(params)})
        if action != "accept":
            return ElicitResult(action=action)
        return ElicitResult(action="accept", content={"answer": answer})

    return callback


async def questions(mode, server):
    """ask_human: a free answer, one option, several options, a decline, an
    answer outside the options (a hostile client), bad options (never asked),
    and a client that declared no elicitation; each on its own client."""
    out = {}
    options = [{"label": "Rust", "description": "the host's language"}, {"label": "Go"}, {"label": "Zig"}]
    for name, args, action, answer in [
        ("free", {"question": "What colour should the button be?"}, "accept", "teal, like the logo"),
        ("one", {"question": "Which language?", "options": options}, "accept", "Go"),
        ("several", {"question": "Which ones?", "options": options, "multi_select": True}, "accept", ["Zig", "Rust"]),
        ("declined", {"question": "May I?"}, "decline", None),
        ("outside", {"question": "Which language?", "options": options}, "accept", "rm -rf /"),
        ("bad_options", {"question": "Which?", "options": [{"label": "only one"}]}, "accept", "only one"),
        ("unable", {"question": "Anyone there?"}, None, None),
    ]:
        asked = []
        kwargs = {} if action is None else {"elicitation_callback": replying(action, answer, asked)}
        async with Client(server, mode=mode, **kwargs) as client:
            out["protocol"] = client.protocol_version
            out["tools"] = [t.name for t in (await client.list_tools()).tools]
            try:
                out[name] = block(await client.call_tool("ask_human", args))
            except Exception as e:  # noqa: BLE001 - what the client raised is what we record
                out[name] = rpc_error(e)
        out[name + "_asked"] = asked
    return out


async def always(mode, server):
    """`launch` approved with "always allow" ticked, then called again in the
    same session (not asked), then in a new session (asked again)."""
    out = {}
    asked = []

    async def ticking(context, params):
        asked.append({"message": params.message, "schema": schema_of(params)})
        return ElicitResult(action="accept", content={"always": True})

    async with Client(server, mode=mode, elicitation_callback=ticking) as client:
        out["protocol"] = client.protocol_version
        out["first"] = block(await client.call_tool("launch", {"target": "first"}))
        out["second"] = block(await client.call_tool("launch", {"target": "second"}))
    out["asked_in_first_session"] = len(asked)
    async with Client(server, mode=mode, elicitation_callback=answering("accept", 0.0, asked)) as client:
        out["third"] = block(await client.call_tool("launch", {"target": "third"}))
    out["asked"] = asked
    return out


REFUND_PROGRAM = """
const order = await tools.lookup_order({ order_id: "A-1002" });
try { return await tools.refund({ order_id: order.id, amount_cents: order.total_cents }); }
catch (e) { return `not refunded: ${e.message}`; }
"""


async def code_mode(mode, server):
    """`lovia mcp --code-mode`: run_code is listed with the tools' declarations;
    a program's gated refund is asked about (accepted), then on a new client declined."""
    out = {}
    asked = []
    async with Client(server, mode=mode, elicitation_callback=answering("accept", 0.0, asked)) as client:
        out["protocol"] = client.protocol_version
        tools = (await client.list_tools()).tools
        out["tools"] = [t.name for t in tools]
        out["description"] = next(t.description for t in tools if t.name == "run_code")
        out["accepted"] = block(await client.call_tool("run_code", {"code": REFUND_PROGRAM}))
    out["asked"] = asked
    async with Client(server, mode=mode, elicitation_callback=answering("decline")) as client:
        out["declined"] = block(await client.call_tool("run_code", {"code": REFUND_PROGRAM}))
    return out


async def probe(mode, server):
    """Connects and leaves at once, as SDKs probe a server: in "auto" mode
    the only request the server sees is server/discover."""
    started = time.monotonic()
    async with Client(server, mode=mode) as client:
        out = {"protocol": client.protocol_version, "connect_seconds": time.monotonic() - started}
    return out


async def program_asks(mode, server):
    """A program (run_code) that asks the person and returns the answer."""
    program = 'const drink = await tools.ask_human({ question: "Tea or coffee?" }); return `making ${drink}`;'
    asked = []
    async with Client(server, mode=mode, elicitation_callback=replying("accept", "tea", asked)) as client:
        out = {"protocol": client.protocol_version}
        out["result"] = block(await client.call_tool("run_code", {"code": program}))
    out["asked"] = [a["message"] for a in asked]
    return out


async def withdraw(mode, server):
    """A call cancelled while its approval (or its ask_human question) is
    open on the client: lovia must withdraw its elicitation/create with
    notifications/cancelled, which the SDK applies by cancelling the
    callback. Records, per case, whether the callback was withdrawn."""
    out = {}
    for name, tool, args in [("approval", "apply_migration", {"version": 8}),
                             ("question", "ask_human", {"question": "Go on?"})]:
        asked = anyio.Event()
        withdrawn = anyio.Event()

        async def callback(context, params, asked=asked, withdrawn=withdrawn):
            asked.set()
            try:
                await anyio.sleep(30)
            except anyio.get_cancelled_exc_class():
                withdrawn.set()
                raise
            return ElicitResult(action="decline")

        async with Client(server, mode=mode, elicitation_callback=callback) as client:
            scope = anyio.CancelScope()

            async def call(scope=scope):
                with scope:
                    await client.call_tool(tool, args)

            async with anyio.create_task_group() as tg:
                tg.start_soon(call)
                with anyio.fail_after(10):
                    await asked.wait()
                # The SDK sends notifications/cancelled for the call.
                scope.cancel()
            with anyio.move_on_after(5):
                await withdrawn.wait()
            out[name] = withdrawn.is_set()
    return out


async def hints(mode, server):
    """Each tool's annotations as sent, and the tools a client that
    auto-approves read-only tools (as coding assistants do) would run
    without asking."""
    async with Client(server, mode=mode) as client:
        listed = await client.list_tools()
    annotations = {}
    for tool in listed.tools:
        wire = tool.model_dump(by_alias=True, mode="json", exclude_none=True)
        annotations[tool.name] = wire.get("annotations", {})
    auto = [name for name, a in annotations.items() if a.get("readOnlyHint") is True]
    return {"annotations": annotations, "auto_approved": auto}


async def main():
    mode, transport = sys.argv[1], sys.argv[2]
    if transport == "program_asks":
        print(json.dumps(await program_asks(mode, server_of(sys.argv[3:]))))
        return
    if transport == "withdraw":
        print(json.dumps(await withdraw(mode, server_of(sys.argv[3:]))))
        return
    if transport == "hints":
        print(json.dumps(await hints(mode, server_of(sys.argv[3:]))))
        return
    if transport == "probe":
        print(json.dumps(await probe(mode, server_of(sys.argv[3:]))))
        return
    if transport == "code":
        print(json.dumps(await code_mode(mode, server_of(sys.argv[3:]))))
        return
    if transport == "questions":
        print(json.dumps(await questions(mode, server_of(sys.argv[3:]))))
        return
    if transport == "always":
        print(json.dumps(await always(mode, server_of(sys.argv[3:]))))
        return
    if transport == "workspace":
        print(json.dumps(await workspace_session(mode, server_of(sys.argv[3:]))))
        return
    if transport == "neighbour":
        print(json.dumps(await neighbours(mode, sys.argv[3])))
        return
    if transport == "approvals":
        print(json.dumps(await approvals(mode, server_of(sys.argv[3:]))))
        return
    if transport == "pages":
        print(json.dumps(await pages(mode, server_of(sys.argv[3:]))))
        return
    if transport == "loose":
        print(json.dumps(await loose(mode, server_of(sys.argv[3:]))))
        return
    if transport == "calls":
        print(json.dumps(await calls(mode, server_of(sys.argv[4:]), json.loads(sys.argv[3]))))
        return
    if transport == "progress":
        print(json.dumps(await progress_burst(mode, server_of(sys.argv[3:]), 1000)))
        return
    if transport == "watch":
        print(json.dumps(await watched(mode, server_of(sys.argv[5:]), sys.argv[3], sys.argv[4])))
        return
    if transport == "watch_call":
        args = sys.argv[3:7]
        print(json.dumps(await watched_call(mode, server_of(sys.argv[7:]), *args[:3], json.loads(args[3]))))
        return
    if transport == "logging":
        print(json.dumps(await logging_(mode, server_of(sys.argv[3:]))))
        return
    if transport == "forged":
        print(json.dumps(await forged(mode, server_of(sys.argv[3:]))))
        return
    if transport == "stdio":
        server = StdioServerParameters(command=sys.argv[3], args=sys.argv[4:])
        pid_of_server = child_pid
    else:
        server = sys.argv[3]
        pid = int(sys.argv[4])

        def pid_of_server():
            return pid

    async with Client(server, mode=mode) as client:
        out = await observe(client, pid_of_server)
    print(json.dumps(out))


# serve_client.py imports this file's helpers.
if __name__ == "__main__":
    anyio.run(main)
