"""Search over a small built-in documentation set.

The Python version of example-tools/docs (the same tool, schema and answers;
tests/all/python.rs checks both). Build it with

    python -m lovia build example-tools/python/docs.py -o target/plugins/docs-py.wasm
"""

from __future__ import annotations

import enum
from dataclasses import dataclass
from typing import Annotated, Optional

from lovia import Field, plugin, tool

plugin(name="docs")


class Section(enum.Enum):
    """Which part of the documentation to search."""

    GUIDE = "guide"
    REFERENCE = "reference"
    FAQ = "faq"


@dataclass
class Filter:
    """Narrows a search."""

    section: Annotated[Optional[Section], "Only this section."] = None
    since_year: Annotated[Optional[int], Field(ge=0, le=65535), "Only pages updated in or after this year."] = None


PAGES = [
    ("Installing lovia", Section.GUIDE, 2026, "install the lovia binary and add the wasm32-wasip2 target"),
    ("Writing a tool", Section.GUIDE, 2026, "a tool is a function with #[lovia::tool]; build it for wasm32-wasip2"),
    ("Limits", Section.REFERENCE, 2026, "memory, time and output limits of a call"),
    ("Approvals", Section.REFERENCE, 2025, "tools that need approval ask a human before running"),
    ("Why WebAssembly?", Section.FAQ, 2025, "a component can touch nothing it was not granted"),
    ("Timeouts", Section.FAQ, 2026, "a timed out call is interrupted, not abandoned"),
]


@tool(strict=True, read_only=True)
def search_docs(
    query: Annotated[str, Field(min_length=1), "Search terms"],
    limit: Annotated[Optional[int], Field(ge=1, le=10), "How many titles to return"] = 5,
    filter: Annotated[Optional[Filter], "Optional filter"] = None,
) -> list[str]:
    """Search internal documentation.

    Returns the titles of matching pages, best match first.
    """
    terms = query.lower().split()
    hits = []
    for title, section, year, body in PAGES:
        if filter is not None:
            if filter.section is not None and filter.section is not section:
                continue
            if filter.since_year is not None and year < filter.since_year:
                continue
        text = f"{title} {body}".lower()
        score = sum(1 for t in terms if t in text)
        if score > 0:
            hits.append((score, title))
    # A stable sort by score, best first, like the Rust version's sort_by_key(Reverse).
    hits.sort(key=lambda h: -h[0])
    return [title for _, title in hits[: limit if limit is not None else 5]]
