"""The Python guest fixture of tests/all/python.rs: one component holding the
golden twins (twins.py), the Python examples (example-tools/python) and tools that exercise the SDK's behaviour in the
real host: typed values, every error type, async tools, RunContext, the
store, progress, content parts, approvals, and the retries/timeouts/caps declared in Python."""

from __future__ import annotations

import asyncio
import enum
from dataclasses import dataclass
from typing import Annotated, Literal, Optional, TypedDict, Union

import docs  # noqa: F401  (example-tools/python: compared with the Rust examples)
import orders  # noqa: F401
import twins  # noqa: F401  (declares the golden twins in the same component)
from lovia import (
    BudgetExceeded, Content, Field, InvalidToolArguments, RunCancelled, RunContext, ToolError, plugin, tool,
)
from twins import Order, Point, Route

plugin(name="pytools", version="0.2.0", instructions="Python fixture tools.")


class Priority(enum.Enum):
    LOW = 1
    HIGH = 2


class Tag(TypedDict):
    key: str
    value: int


@dataclass
class Box:
    w: int
    h: int = 1


@dataclass
class Report:
    kind: str
    order: Order
    point: Point
    count: int


@tool(read_only=True)
def describe(point: Point, order: Order, priority: Priority, route: Optional[Route] = None,
             tags: Optional[list[Tag]] = None, mode: Literal["fast", "slow"] = "fast",
             size: Union[int, str] = 0, box: Optional[Box] = None) -> str:
    """Says which Python types the arguments arrived as."""
    parts = [
        f"point={type(point).__name__}(x={point.x!r}, y={point.y!r}, label={point.label!r}, tags={point.tags!r})",
        f"order={type(order).__name__}.{order.name}",
        f"priority={type(priority).__name__}.{priority.name}",
    ]
    if route is not None:
        parts.append(f"route={type(route).__name__}(stops={[type(s).__name__ for s in route.stops]}, "
                     f"order={route.order!r})")
    if tags is not None:
        parts.append(f"tags={[(type(t).__name__, t['key'], t['value']) for t in tags]}")
    parts.append(f"mode={mode} size={type(size).__name__}:{size!r}")
    return "; ".join(parts)


@tool
def report(point: Point, count: int = 1) -> Report:
    """Returns a dataclass holding an Enum: becomes JSON."""
    return Report(kind="report", order=Order.DESC, point=point, count=count)


@tool
def fail_hint() -> str:
    raise ToolError("db down", hint="retry later")


@tool
def fail_only_hint() -> str:
    raise ToolError(hint="only a hint")


@tool
def fail_empty() -> str:
    raise ValueError()


class ConnectError(ToolError):
    """A failure with a name of its own: contract 0.2's error kind."""


@tool(title="Fail with a named error")
def fail_named(message: str) -> str:
    raise ConnectError(message)


@tool
def fail_plain(message: str) -> str:
    raise RuntimeError(message)


@tool
def fail_invalid(amount: int) -> str:
    raise InvalidToolArguments(f"amount {amount} exceeds the order total 990")


@tool
def fail_cancel() -> str:
    raise RunCancelled("operator pressed stop")


@tool
def fail_budget() -> str:
    raise BudgetExceeded("total tokens 2 exceeds budget 1")


@tool
def bad_result() -> object:
    return {1, object()}


async def _double(x: int) -> int:
    await asyncio.sleep(0)
    return 2 * x


@tool
async def async_add(a: int, b: int) -> int:
    """An async tool that awaits other coroutines, a real timer and a gather of tasks."""
    await asyncio.sleep(0.01)
    doubled, same = await asyncio.gather(_double(a), asyncio.sleep(0.01, result=b))
    return doubled + same


def _blocking_square(x: int) -> int:
    return x * x


@tool
async def offloaded(x: int) -> list:
    """Blocking work handed to asyncio.to_thread and loop.run_in_executor, as
    code written for a server does; a component runs it inline."""
    first = await asyncio.to_thread(_blocking_square, x)
    second = await asyncio.get_running_loop().run_in_executor(None, _blocking_square, x + 1)
    return [first, second]


@tool
def whoami(ctx: RunContext, greeting: str = "hi") -> dict:
    """Reports the run context; the context parameter is not in the schema."""
    ctx.progress("looking")
    ctx.log("info", "whoami ran")
    return {
        "greeting": greeting,
        "run_id": ctx.run_id,
        "session_id": ctx.session_id,
        "call_id": ctx.call_id,
        "agent": ctx.agent,
        "turn": ctx.turn,
        "config": ctx.dependency("config"),
        "missing": ctx.dependency("nope", "absent"),
        "cancelled": ctx.cancelled(),
    }


@tool
def count_up(ctx: RunContext[dict], by: int = 1) -> str:
    """Adds `by` to a counter kept in the session store."""
    n = int(ctx.store.get_text("n") or "0") + by
    ctx.store.set("n", str(n))
    return f"n={n} keys={ctx.store.keys()}"


@tool
def steps(ctx: RunContext, n: Annotated[int, Field(ge=0, le=50)]) -> str:
    """Reports `n` progress steps, then finishes."""
    for i in range(1, n + 1):
        ctx.progress(f"step {i} of {n}")
    return f"done in {n} steps"


@tool(read_only=True)
def rich(label: str, size: Annotated[int, Field(ge=0, le=65536)] = 256) -> Content:
    """A text part, an image of `size` bytes (a PNG signature, then every byte value in turn), and two links."""
    data = (b"\x89PNG\r\n\x1a\n" + bytes(i % 256 for i in range(size)))[:size]
    return (Content().text(f"{label}: {size} bytes")
            .image("image/png", data)
            .link("https://example.com/a.csv", "a.csv", "text/csv")
            .link("data:,x", "x"))


@tool(retries=2)
def flaky(ctx: RunContext) -> str:
    """Fails twice, then succeeds: counts its attempts in the session store."""
    key = f"attempts/{ctx.call_id}"
    n = int(ctx.store.get_text(key) or "0") + 1
    ctx.store.set(key, str(n))
    if n < 3:
        raise ToolError(f"attempt {n} failed")
    return f"succeeded on attempt {n}"


@tool(timeout=0.2)
def spin() -> str:
    """Spins forever; its declared 0.2 s timeout stops it."""
    n = 0
    while True:
        n += 1


@tool(max_output_chars=20)
def chatty(n: Annotated[int, Field(ge=0, le=100000)]) -> str:
    return "x" * n


@tool
def hog(mib: int) -> str:
    """Holds `mib` MiB of memory."""
    block = bytearray(mib * 1024 * 1024)
    return f"held {len(block)} bytes"


def _big_refund(args: dict) -> bool:
    return args["amount"] > 100


@tool(needs_approval=_big_refund, parallel=False, destructive=True)
def gated_refund(amount: int) -> str:
    return f"refunded {amount}"


@tool(needs_approval=True)
def always_gated() -> str:
    return "gated ran"


def _raises(args: dict, ctx: RunContext) -> bool:
    raise KeyError("boom")


@tool(needs_approval=_raises)
def broken_gate() -> str:
    return "never"
