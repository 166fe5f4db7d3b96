"""A lovia tool plugin written in Python, built with componentize-py.

It is the large component of `lovia bench`'s cold-start figure (the Python
interpreter makes it tens of MB) and shows that the contract is not tied to
the Rust SDK.
"""

import json

from wit_world import exports
from componentize_py_types import Err
from wit_world.imports import types

SCHEMA = json.dumps({
    "type": "object",
    "properties": {"text": {"type": "string", "description": "Text to return"}},
    "required": ["text"],
    "additionalProperties": False,
})


class Plugin(exports.Plugin):
    def info(self) -> exports.plugin.PluginInfo:
        return exports.plugin.PluginInfo(name="pyecho", version="0.1.0", instructions=None)

    def tools(self) -> list[types.ToolSpec]:
        hints = types.ToolHints(read_only=True, destructive=False, idempotent=True, open_world=False)
        return [types.ToolSpec(
            name="echo", description="Return the text unchanged.", parameters=SCHEMA, output_schema=None,
            strict=False, parallel=True, retries=None, timeout_ms=None, max_output_chars=None,
            approval=types.Approval.NEVER, hints=hints,
        )]

    def call(self, tool: str, arguments: str) -> types.Output:
        if tool != "echo":
            raise Err(types.CallError_Tool(types.ToolError(message=f"no tool {tool}", hint=None)))
        return types.Output_Text(json.loads(arguments)["text"])

    def needs_approval(self, tool: str, arguments: str) -> bool:
        return False
