"""`@tool`: a typed function becomes a tool spec and a way to call it.

Everything a declaration can get wrong is a `DeclarationError` raised by
the decorator, that is while the tool file is imported: `lovia build`
imports it before it builds anything, so a bad declaration never becomes a
component. Nothing here knows the WIT contract; `lovia._plugin` maps
`Spec`, `Output` and `failure_of` onto it.
"""

from __future__ import annotations

# Every module the SDK needs at call time is imported here, at the top, never
# inside a function: componentize-py keeps only the modules imported while it
# builds the component, so a module first imported during a call is missing
# from it ("No module named 'asyncio'" for an `async def` tool whose file
# imports nothing else). tests/test_imports.py holds the SDK to this.
import asyncio
import asyncio.base_events
import copy
import dataclasses
import inspect
import json
import re
import time
import typing
import unicodedata
from typing import Any, Callable

from ._content import Content
from ._context import RunContext
from ._errors import BudgetExceeded, DeclarationError, InvalidToolArguments, RunCancelled, ToolError
from ._fields import _MISSING, Field
from ._schema import Defs, Unsupported, clean_doc, convert, dumps, matches, schema_for, sort_keys, strip_annotated
from ._schema import to_json_value

# The tool-name grammar of the contract (docs/semantics.md §2 rule 10, §15).
NAME = re.compile(r"[a-zA-Z0-9_-]{1,64}")
_U32_MAX = 2**32 - 1
_U64_MAX = 2**64 - 1

OPTIONS = (
    "name", "title", "description", "strict", "parallel", "retries", "timeout", "max_output_chars", "needs_approval",
    "read_only", "destructive", "idempotent", "open_world",
)


@dataclasses.dataclass(frozen=True)
class Spec:
    """What the host is told about one tool (the contract's `tool-spec`)."""

    name: str
    title: str | None
    description: str
    parameters: str
    strict: bool
    parallel: bool
    retries: int | None
    timeout_ms: int | None
    max_output_chars: int | None
    approval: str  # "never", "always" or "ask-plugin"
    read_only: bool
    destructive: bool
    idempotent: bool
    open_world: bool


@dataclasses.dataclass(frozen=True)
class Param:
    name: str
    annotation: Any
    default: Any  # _MISSING when the model must send it


@dataclasses.dataclass(frozen=True)
class Output:
    """A successful result: `kind` is "text" (shown verbatim, `value` a str),
    "json" (`value` the JSON text) or "parts" (`value` a tuple of
    `lovia._content` parts, from a returned `Content`)."""

    kind: str
    value: Any


class Tool:
    """One declared tool: its spec, and how to call its function."""

    def __init__(self, function: Callable[..., Any], spec: Spec, params: list[Param], context: str | None,
                 predicate: Callable[..., Any] | None, predicate_takes_context: bool) -> None:
        self.function = function
        self.spec = spec
        self.params = params
        self.context = context
        self.predicate = predicate
        self.predicate_takes_context = predicate_takes_context
        self.is_async = inspect.iscoroutinefunction(function)


# Every tool declared in this interpreter, in declaration order.
REGISTRY: dict[str, Tool] = {}


def tool(function: Callable[..., Any] | None = None, /, **options: Any) -> Any:
    """Declares a tool: `@tool` or `@tool(strict=True, retries=2, ...)`.

    Options (all keyword-only; defaults in brackets): `name` [the function's
    name], `title` [None; a display title for people, at most 128 bytes],
    `description` [its docstring; an explicit "" is kept], `strict`
    [False], `parallel` [True; False makes every call a barrier], `retries`
    [None: the host's default, 0], `timeout` [None: the host's default;
    seconds per attempt], `max_output_chars` [None: the host's default,
    200,000], `needs_approval` [False; True, or a synchronous predicate
    `(args)` or `(args, ctx)` over the argument object], and the client hints
    `read_only`, `destructive`, `idempotent`, `open_world` [all False].
    The function comes back unchanged, so it can still be called directly.
    """
    def decorate(f: Callable[..., Any]) -> Callable[..., Any]:
        t = declare(f, **options)
        if t.spec.name in REGISTRY and REGISTRY[t.spec.name].function is not f:
            raise DeclarationError(_fname(f), f"a tool named '{t.spec.name}' is already declared")
        REGISTRY[t.spec.name] = t
        f.__lovia_tool__ = t  # type: ignore[attr-defined]
        return f

    if function is not None:
        if not callable(function):
            raise TypeError(f"@tool takes a function, got {function!r}; options are keywords: @tool(name=...)")
        return decorate(function)
    return decorate


def _fname(f: Any) -> str:
    return getattr(f, "__qualname__", None) or getattr(f, "__name__", None) or repr(f)


def _is_context(annotation: Any) -> bool:
    tp, _ = strip_annotated(annotation)
    return tp is RunContext or typing.get_origin(tp) is RunContext


def _flag(fname: str, key: str, value: Any) -> bool:
    if not isinstance(value, bool):
        raise DeclarationError(fname, f"option {key}= must be True or False, got {value!r}")
    return value


def _count(fname: str, key: str, value: Any, maximum: int) -> int | None:
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int) or not 0 <= value <= maximum:
        raise DeclarationError(fname, f"option {key}= must be None or an integer from 0 to {maximum}, got {value!r}")
    return value


def declare(f: Callable[..., Any], **options: Any) -> Tool:
    """The `Tool` for `f`, or a `DeclarationError` naming what is wrong."""
    fname = _fname(f)
    unknown = sorted(set(options) - set(OPTIONS))
    if unknown:
        raise DeclarationError(fname, f"unknown tool option {unknown[0]!r}; expected one of: {', '.join(OPTIONS)}")
    if not inspect.isfunction(f):
        raise DeclarationError(fname, "@tool applies to a function (def or async def)")
    if inspect.isgeneratorfunction(f) or inspect.isasyncgenfunction(f):
        raise DeclarationError(fname, "a generator cannot be a tool: return the whole result")

    name = options.get("name", f.__name__)
    if not isinstance(name, str) or not NAME.fullmatch(name):
        raise DeclarationError(fname, f"invalid tool name {name!r}: a name must match ^[a-zA-Z0-9_-]{{1,64}}$")
    description = options.get("description")
    doc, arg_docs = split_args_section(clean_doc(f.__doc__) if f.__doc__ else "", fname, f)
    if description is None:
        description = doc
    elif not isinstance(description, str):
        raise DeclarationError(fname, f"option description= must be a string, got {description!r}")

    title = options.get("title")
    if title is not None and (not isinstance(title, str) or len(title.encode()) > 128
                              or any(unicodedata.category(c) == "Cc" for c in title)):
        raise DeclarationError(fname, f"option title= must be a string of at most 128 bytes without control characters, got {title!r}")
    strict = _flag(fname, "strict", options.get("strict", False))
    parallel = _flag(fname, "parallel", options.get("parallel", True))
    hints = {k: _flag(fname, k, options.get(k, False)) for k in ("read_only", "destructive", "idempotent", "open_world")}
    retries = _count(fname, "retries", options.get("retries"), _U32_MAX)
    max_output_chars = _count(fname, "max_output_chars", options.get("max_output_chars"), _U64_MAX)
    timeout = options.get("timeout")
    timeout_ms = None
    if timeout is not None:
        if isinstance(timeout, bool) or not isinstance(timeout, (int, float)) or not 0 < timeout < 2**53 / 1000:
            raise DeclarationError(fname, f"option timeout= must be None or a positive number of seconds, got {timeout!r}")
        timeout_ms = max(1, round(timeout * 1000))

    needs = options.get("needs_approval", False)
    predicate, takes_ctx = None, False
    if isinstance(needs, bool):
        approval = "always" if needs else "never"
    elif callable(needs):
        if inspect.iscoroutinefunction(needs):
            raise DeclarationError(fname, "needs_approval= must be synchronous: the host asks it before the call runs")
        try:
            positional = [p for p in inspect.signature(needs).parameters.values()
                          if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD) and p.default is p.empty]
        except (TypeError, ValueError):
            positional = [None]
        if len(positional) not in (1, 2):
            raise DeclarationError(fname, "needs_approval= takes (args) or (args, ctx)")
        approval, predicate, takes_ctx = "ask-plugin", needs, len(positional) == 2
    else:
        raise DeclarationError(fname, f"needs_approval= must be a bool or a function, got {needs!r}")

    params, context, parameters = _signature(f, fname, strict, arg_docs)
    spec = Spec(name=name, title=title, description=description, parameters=parameters, strict=strict, parallel=parallel,
                retries=retries, timeout_ms=timeout_ms, max_output_chars=max_output_chars, approval=approval, **hints)
    return Tool(f, spec, params, context, predicate, takes_ctx)


_ARGS_HEADERS = ("Args:", "Arguments:", "Parameters:", "Params:")
_ENTRY = re.compile(r"^(\*{0,2}\w+)\s*(?:\([^)]*\))?\s*:\s*(.*)$")


def split_args_section(doc: str, fname: str, f: Callable[..., Any]) -> tuple[str, dict[str, str]]:
    """A Google-style docstring's `Args:` section, taken out of the
    description: each `name (type): text` entry (continued on more-indented
    lines) describes that parameter, as the reference reads docstrings. An
    entry that names no parameter is an error, never silently dropped."""
    lines = doc.split("\n")
    start = next((i for i, line in enumerate(lines) if line.strip() in _ARGS_HEADERS and not line.startswith(" ")), None)
    if start is None:
        return doc, {}
    end = start + 1
    while end < len(lines) and (not lines[end].strip() or lines[end].startswith((" ", "\t"))):
        end += 1
    entries: dict[str, str] = {}
    current: str | None = None
    indent: int | None = None
    for line in lines[start + 1:end]:
        if not line.strip():
            continue
        depth = len(line) - len(line.lstrip())
        if indent is None:
            indent = depth
        match = _ENTRY.match(line.strip())
        if depth <= indent and match:
            current = match.group(1).lstrip("*")
            entries[current] = match.group(2).strip()
        elif depth > indent and current is not None:
            entries[current] = f"{entries[current]} {line.strip()}".strip()
        else:
            raise DeclarationError(fname, f"the docstring's {lines[start].strip()} section has a line that is not "
                                          f"`name: description`: {line.strip()!r}")
    names = set(inspect.signature(f).parameters)
    for name in entries:
        if name not in names:
            raise DeclarationError(fname, f"the docstring's {lines[start].strip()} section describes {name!r}, "
                                          f"which is not a parameter of {f.__name__}")
    rest = lines[:start] + lines[end:]
    return "\n".join(rest).strip(), {k: v for k, v in entries.items() if v}


def _signature(f: Callable[..., Any], fname: str, strict: bool,
               arg_docs: dict[str, str] | None = None) -> tuple[list[Param], str | None, str]:
    try:
        hints = typing.get_type_hints(f, include_extras=True)
    except Exception as e:  # a forward reference that does not resolve, most often
        raise DeclarationError(fname, f"the annotations cannot be resolved: {e}") from None
    defs = Defs()
    params: list[Param] = []
    properties: dict[str, Any] = {}
    required: list[str] = []
    context: str | None = None
    for p in inspect.signature(f).parameters.values():
        if p.kind in (p.VAR_POSITIONAL, p.VAR_KEYWORD):
            raise DeclarationError(fname, "*args and **kwargs cannot be tool arguments", p.name)
        if p.kind is p.POSITIONAL_ONLY:
            raise DeclarationError(fname, "a positional-only parameter cannot be a tool argument (arguments are named)",
                                   p.name)
        if p.name not in hints:
            raise DeclarationError(fname, "has no annotation; annotate it (for example `str`) so the model knows its type",
                                   p.name)
        annotation = hints[p.name]
        if _is_context(annotation):
            if context is not None:
                raise DeclarationError(
                    fname,
                    "Tool functions can have at most one RunContext parameter. "
                    "Remove the extra RunContext annotation or pass that value through ctx.dependency().",
                    p.name,
                )
            context = p.name
            continue
        default = p.default if p.default is not p.empty else _MISSING
        if isinstance(default, Field):
            annotation = typing.Annotated[annotation, default]
            default = default.default
        # The docstring's `Args:` entry, when the annotation says nothing of its own.
        described = (arg_docs or {}).get(p.name)
        if described is not None and _described(annotation) is None:
            annotation = typing.Annotated[annotation, described]
        try:
            schema = schema_for(annotation, defs)
        except Unsupported as e:
            raise DeclarationError(fname, str(e), p.name) from None
        if default is not _MISSING:
            try:
                value = to_json_value(default)
            except TypeError as e:
                raise DeclarationError(fname, f"the default {default!r} cannot be shown to the model: {e}",
                                       p.name) from None
            if not matches(annotation, value):
                raise DeclarationError(fname, f"the default {default!r} does not match the annotation "
                                              f"{_annotation_name(annotation)}", p.name)
            schema["default"] = value
        properties[p.name] = sort_keys(schema)
        if strict or default is _MISSING:
            required.append(p.name)
        params.append(Param(p.name, annotation, default))
    top: dict[str, Any] = {}
    if defs.schemas:
        top["$defs"] = {k: sort_keys(v) for k, v in defs.schemas.items()}
    top["properties"] = properties
    if required:
        top["required"] = required
    top["type"] = "object"
    top["additionalProperties"] = False
    return params, context, dumps(top)


def _described(annotation: Any) -> Any:
    """The description an annotation gives (a string or a `Field` with one), if any."""
    _, metadata = strip_annotated(annotation)
    for item in metadata:
        if isinstance(item, str) or (isinstance(item, Field) and item.description is not None):
            return item
    return None


def _annotation_name(tp: Any) -> str:
    tp, _ = strip_annotated(tp)
    return tp.__qualname__ if isinstance(tp, type) else repr(tp).replace("typing.", "")


# --- calls ------------------------------------------------------------------------------------

def find(name: str) -> Tool:
    t = REGISTRY.get(name)
    if t is None:
        # The host's wording for an unknown tool (docs/semantics.md §15).
        raise ToolError(f"Tool '{name}' is not available.")
    return t


def _parse(name: str, arguments: str) -> dict[str, Any]:
    text = arguments if arguments.strip() else "{}"
    try:
        value = json.loads(text)
    except ValueError as e:
        raise InvalidToolArguments(f"Invalid arguments for tool '{name}': arguments: {e}") from None
    if not isinstance(value, dict):
        raise InvalidToolArguments(f"Invalid arguments for tool '{name}': arguments: expected a JSON object")
    return value


def call(name: str, arguments: str, backend: Any) -> Output:
    """Runs tool `name` on the argument text (the host validated it already);
    raises what the tool raised, for `failure_of` to map."""
    t = find(name)
    args = _parse(name, arguments)
    kwargs: dict[str, Any] = {}
    for p in t.params:
        if p.name in args:
            kwargs[p.name] = convert(p.annotation, args[p.name])
        elif p.default is not _MISSING:
            # A fresh copy: a mutable default must not carry one call's changes into the next.
            kwargs[p.name] = copy.deepcopy(p.default)
        else:
            raise InvalidToolArguments(f"Invalid arguments for tool '{name}': arguments: missing field `{p.name}`")
    if t.context is not None:
        kwargs[t.context] = RunContext(backend)
    result = t.function(**kwargs)
    if t.is_async:
        result = run_coroutine(result)
    if isinstance(result, str):
        return Output("text", result)
    if isinstance(result, Content):
        return Output("parts", result.parts)
    try:
        return Output("json", dumps(to_json_value(result)))
    except (TypeError, ValueError) as e:
        raise ToolError(f"the result could not be serialised as JSON: {e}") from None


def needs_approval(name: str, arguments: str, backend: Any) -> bool:
    """Whether this call needs approval; an exception denies it."""
    t = find(name)
    if t.predicate is None:
        return False
    args = _parse(name, arguments)
    if t.predicate_takes_context:
        return bool(t.predicate(args, RunContext(backend)))
    return bool(t.predicate(args))


def run_coroutine(coro: Any) -> Any:
    """Drives an `async def` tool to its end. A call is synchronous at the
    contract, so each call gets its own event loop, closed afterwards."""
    loop = _loop()
    try:
        return loop.run_until_complete(coro)
    finally:
        loop.close()


def _loop() -> Any:
    """An asyncio event loop with timers and tasks but no I/O selector.

    asyncio's default loop opens a socket pair to wake itself, and a
    component may open no socket, so that loop cannot start in the sandbox.
    This one waits for its next timer with `time.sleep` (the host's clock,
    interrupted by the call's deadline like any other wait)."""

    class _NoIo:
        def select(self, timeout: float | None) -> list:
            if timeout is None:
                # Nothing is scheduled and nothing can arrive: the coroutine awaits something that never completes.
                raise RuntimeError("the async tool is waiting for something that never happens "
                                   "(a component has no sockets or subprocesses to wait on)")
            if timeout > 0:
                time.sleep(timeout)
            return []

    class _Loop(asyncio.base_events.BaseEventLoop):
        def __init__(self) -> None:
            super().__init__()
            self._selector = _NoIo()

        def _process_events(self, event_list: list) -> None:
            pass

        def _write_to_self(self) -> None:
            # Only other threads wake a loop this way, and a component has one thread.
            pass

        def run_in_executor(self, executor: Any, func: Callable[..., Any], *args: Any) -> Any:
            """Runs `func` here, now, and returns its finished future: a
            component has one thread and no pool to hand it to. So
            `loop.run_in_executor(None, f)` and `asyncio.to_thread(f)` work
            as they do elsewhere, except that `f` blocks the loop while it
            runs (docs/python.md)."""
            future = self.create_future()
            try:
                future.set_result(func(*args))
            except (SystemExit, KeyboardInterrupt):
                raise
            except BaseException as e:  # noqa: BLE001 - the future carries it to the awaiting code
                future.set_exception(e)
            return future

    return _Loop()


# The error-kind grammar of contract 0.2 (`tool-error.kind`); the host drops any other kind.
_ERROR_KIND = re.compile(r"[A-Za-z][A-Za-z0-9_.]{0,63}")


def failure_of(exc: BaseException) -> tuple[str, str, str | None, str | None]:
    """(kind, message, hint, error_kind) of an exception that escaped a tool;
    kind is "tool", "invalid-arguments", "cancel-run" or "budget-exceeded",
    and error_kind the exception's class name (contract 0.2's named error
    kind) for a subclass of ToolError or any other exception."""
    if isinstance(exc, RunCancelled):
        return "cancel-run", str(exc), None, None
    if isinstance(exc, BudgetExceeded):
        return "budget-exceeded", str(exc), None, None
    if isinstance(exc, InvalidToolArguments):
        # One string in the contract: the hint is folded in as the host renders it.
        return "invalid-arguments", str(exc) or type(exc).__name__, None, None
    name = type(exc).__name__
    error_kind = name if type(exc) is not ToolError and _ERROR_KIND.fullmatch(name) else None
    if isinstance(exc, ToolError):
        message = exc.message
        if not message and exc.hint is None and error_kind is None and type(exc) is not ToolError:
            message = name  # a class name outside the kind grammar still names the failure
        return "tool", message, exc.hint, error_kind
    # Any other exception: its text; with none, the host reads its class name (docs/semantics.md §5).
    message = str(exc)
    return "tool", message if message or error_kind else name, None, error_kind
