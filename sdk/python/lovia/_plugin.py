"""The binding glue: the only module that knows the WIT contract
(lovia:tools@0.2.0, `wit/lovia.wit` in the repository). componentize-py
generates `wit_world` from that WIT while it builds the component; moving to
another contract version changes this module and nothing else.
"""

from __future__ import annotations

import importlib

from componentize_py_types import Err
from wit_world import exports
from wit_world.imports import context as _context
from wit_world.imports import store as _store
from wit_world.imports import types

from . import _content, _info, _tool

_LEVELS = {
    "trace": types.LogLevel.TRACE,
    "debug": types.LogLevel.DEBUG,
    "info": types.LogLevel.INFO,
    "warn": types.LogLevel.WARN,
    "error": types.LogLevel.ERROR,
}
_APPROVAL = {"never": types.Approval.NEVER, "always": types.Approval.ALWAYS, "ask-plugin": types.Approval.ASK_PLUGIN}


class _Backend:
    """What `RunContext` asks the host, through the `context` and `store` imports."""

    run_id = staticmethod(_context.run_id)
    session_id = staticmethod(_context.session_id)
    call_id = staticmethod(_context.call_id)
    agent = staticmethod(_context.agent)
    turn = staticmethod(_context.turn)
    dependency = staticmethod(_context.dependency)
    cancelled = staticmethod(_context.cancelled)
    progress = staticmethod(_context.progress)

    @staticmethod
    def log(level: str, message: str) -> None:
        _context.log(_LEVELS[level], message)

    store_get = staticmethod(_store.get)
    store_delete = staticmethod(_store.delete)
    store_keys = staticmethod(_store.keys)

    @staticmethod
    def store_set(key: str, value: bytes) -> str | None:
        try:
            _store.set(key, value)
        except Err as e:
            return str(e.value)
        return None


_BACKEND = _Backend()


def load(module: str) -> None:
    """Imports the tool module, which declares its tools; its name is the
    plugin's default name. Runs while componentize-py builds the component."""
    _info.default_name(module)
    importlib.import_module(module)
    if not _tool.REGISTRY:
        raise RuntimeError(f"module {module!r} declares no @tool function")


def _spec(s: _tool.Spec) -> types.ToolSpec:
    return types.ToolSpec(
        name=s.name, title=s.title, description=s.description, parameters=s.parameters, output_schema=None, strict=s.strict,
        parallel=s.parallel, retries=s.retries, timeout_ms=s.timeout_ms, max_output_chars=s.max_output_chars,
        approval=_APPROVAL[s.approval],
        hints=types.ToolHints(read_only=s.read_only, destructive=s.destructive, idempotent=s.idempotent,
                              open_world=s.open_world),
    )


def _part(p: _content.Part) -> types.ContentPart:
    if isinstance(p, _content.TextPart):
        return types.ContentPart_Text(p.text)
    if isinstance(p, _content.ImagePart):
        return types.ContentPart_Image(types.Image(mime_type=p.mime_type, data=p.data))
    return types.ContentPart_ResourceLink(types.ResourceLink(uri=p.uri, name=p.name, mime_type=p.mime_type))


def _call_error(exc: BaseException) -> Err:
    kind, message, hint, error_kind = _tool.failure_of(exc)
    if kind == "tool":
        return Err(types.CallError_Tool(types.ToolError(message=message, hint=hint, kind=error_kind)))
    if kind == "invalid-arguments":
        return Err(types.CallError_InvalidArguments(message))
    if kind == "cancel-run":
        return Err(types.CallError_CancelRun(message))
    return Err(types.CallError_BudgetExceeded(message))


class Plugin(exports.Plugin):
    def info(self) -> exports.plugin.PluginInfo:
        i = _info.current()
        return exports.plugin.PluginInfo(name=i.name, version=i.version, instructions=i.instructions)

    def tools(self) -> list[types.ToolSpec]:
        return [_spec(t.spec) for t in _tool.REGISTRY.values()]

    def call(self, tool: str, arguments: str) -> types.Output:
        try:
            out = _tool.call(tool, arguments, _BACKEND)
        except Exception as exc:
            raise _call_error(exc) from None
        if out.kind == "text":
            return types.Output_Text(out.value)
        if out.kind == "parts":
            return types.Output_Parts([_part(p) for p in out.value])
        return types.Output_Json(out.value)

    def needs_approval(self, tool: str, arguments: str) -> bool:
        try:
            return _tool.needs_approval(tool, arguments, _BACKEND)
        except Exception as exc:
            # An error denies the call (the contract); the host says the check failed.
            raise Err(str(exc) or type(exc).__name__) from None
