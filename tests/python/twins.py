"""The Python twins of the Rust golden tools (tests/fixtures/py-twins): the
same names and shapes of arguments (keyword-only parameters keep the Rust
order where a default comes before a required argument), so tests/all/python.rs can check that
the two SDKs derive byte-identical schemas for every type they share."""

from __future__ import annotations

import enum
from dataclasses import dataclass, field
from typing import Annotated, Optional

from lovia import Field, tool

U16 = Field(ge=0, le=65535)


class Order(enum.Enum):
    """Which way to sort."""

    ASC = "asc"
    DESC = "desc"


class Only(enum.Enum):
    """The one supported mode."""

    ONLY = "only"


@dataclass
class Point:
    """A point on the map."""

    x: Annotated[float, "East-west position."]
    y: float
    tags: list[str]
    rank: Annotated[int, U16]
    label: Annotated[Optional[str], "What to call it."] = None


@dataclass
class Route:
    """A path through points."""

    stops: Annotated[list[Point], "The stops, in order."]
    name: str
    order: Optional[Order] = None


@tool
def scalars(text: str, count: int, ratio: float, flag: bool) -> str:
    """Plain scalars."""
    return f"{text} {count} {ratio} {flag}"


@tool
def constrained(
    *,
    query: Annotated[str, Field(description="Search terms", min_length=1, max_length=100)],
    limit: Annotated[int, "How many"] = Field(5, ge=1, le=10),
    code: Annotated[str, Field(pattern="^[A-Z]-[0-9]+$")],
    scale: Annotated[float, Field(ge=0.5, le=2.5)],
    ids: Annotated[list[int], Field(min_length=1, max_length=3)],
    small: Annotated[int, Field(ge=0, le=255)],
) -> str:
    """Descriptions and constraints."""
    return f"{query} {limit} {code} {scale} {len(ids)} {small}"


@tool
def optionals(
    a: Optional[str] = None,
    b: Annotated[Optional[int], Field(ge=1), "the x"] = None,
    c: Optional[int] = 5,
    d: str = "x",
    e: bool = True,
    f: float = 1.5,
    g: Optional[list[str]] = None,
) -> str:
    """Optional arguments and defaults.

    A second paragraph.
    """
    return f"{a} {b} {c} {d} {e} {f} {g}"


@tool
def containers(
    xs: list[str], grid: list[list[float]], pair: tuple[str, int], scores: dict[str, float], unique: set[str]
) -> str:
    """Containers."""
    return f"{len(xs)} {len(grid)} {pair[0]} {len(scores)} {len(unique)}"


@tool
def nested(
    *,
    order: Annotated[Order, "Sort order"] = Order.ASC,
    only: Only,
    point: Point,
    route: Optional[Route] = None,
    points: Annotated[list[Point], "Many points"],
) -> str:
    """Enums and nested structs."""
    return f"{len(points)}"


@tool(strict=True)
def strict_tool(a: str, b: Optional[int] = None, c: int = 3) -> str:
    """Strict: every argument required."""
    return f"{a} {b} {c}"


@tool(name="renamed", description="")
def no_args() -> str:
    """Not shown: the description is explicitly empty."""
    return ""
