"""`Content`: a rich result of text, images and resource links (contract 0.2's
`output.parts`), the Python twin of the Rust SDK's `lovia::Content`.

Nothing here knows the WIT contract; `lovia._plugin` maps the parts onto it.
The host checks the parts (at most 256, raster image types only, bounded
link fields) and refuses a result outside them as an error the model reads
(docs/contract.md, "Rich content"); the SDK checks only the Python types, so
a wrong type is caught where the tool wrote it.
"""

from __future__ import annotations

import dataclasses
from typing import Union


@dataclasses.dataclass(frozen=True)
class TextPart:
    text: str


@dataclasses.dataclass(frozen=True)
class ImagePart:
    mime_type: str
    data: bytes


@dataclasses.dataclass(frozen=True)
class LinkPart:
    uri: str
    name: str
    mime_type: str | None


Part = Union[TextPart, ImagePart, LinkPart]


def _text(what: str, value: object) -> str:
    if not isinstance(value, str):
        raise TypeError(f"Content: {what} must be a str, got {type(value).__name__}")
    return value


class Content:
    """A result made of parts, in order, for clients that show images and links.

    ```python
    @tool(read_only=True)
    def sales_chart() -> Content:
        return (Content().text("Sales rose 12% this week.")
                .image("image/png", png_bytes)
                .link("https://example.com/sales.csv", "sales.csv", "text/csv"))
    ```

    A model that reads only text sees each part's rendering, one per line:
    the text verbatim, `[image: image/png, 1.4 KB]`,
    `[resource link: <name>, <uri>, <mime type>]` (docs/semantics.md §11).
    Each method adds a part and returns the same `Content`, so calls chain.
    """

    __slots__ = ("_parts",)

    def __init__(self) -> None:
        self._parts: list[Part] = []

    def text(self, text: str) -> Content:
        """Adds a text part, shown verbatim."""
        self._parts.append(TextPart(_text("text", text)))
        return self

    def image(self, mime_type: str, data: bytes | bytearray | memoryview) -> Content:
        """Adds an image: its media type (`image/png`, `image/jpeg`, `image/gif`, `image/webp`) and encoded bytes."""
        if not isinstance(data, (bytes, bytearray, memoryview)):
            raise TypeError(f"Content: image data must be bytes, got {type(data).__name__}")
        self._parts.append(ImagePart(_text("the image's mime_type", mime_type), bytes(data)))
        return self

    def link(self, uri: str, name: str, mime_type: str | None = None) -> Content:
        """Adds a link to a resource: where it is, what to call it, and its media type when known."""
        if mime_type is not None:
            _text("the link's mime_type", mime_type)
        self._parts.append(LinkPart(_text("the link's uri", uri), _text("the link's name", name), mime_type))
        return self

    @property
    def parts(self) -> tuple[Part, ...]:
        """The parts so far, in order."""
        return tuple(self._parts)

    def __len__(self) -> int:
        return len(self._parts)

    def __repr__(self) -> str:
        return f"Content({list(self._parts)!r})"
