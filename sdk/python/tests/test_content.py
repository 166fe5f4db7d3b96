"""`Content` results: the parts a tool returns, in order and intact, without
building a component (tests/all/python.rs checks they reach the host)."""

from __future__ import annotations

import unittest

from lovia import Content, tool
from lovia import _tool
from lovia._content import ImagePart, LinkPart, TextPart


class ContentParts(unittest.TestCase):
    def test_parts_keep_their_order_and_bytes(self) -> None:
        data = bytes(range(256))
        c = Content().text("hi").image("image/png", bytearray(data)).link("https://x.test/a", "a", "text/csv").link(
            "data:,x", "x")
        self.assertEqual(c.parts, (
            TextPart("hi"), ImagePart("image/png", data), LinkPart("https://x.test/a", "a", "text/csv"),
            LinkPart("data:,x", "x", None),
        ))
        self.assertIs(type(c.parts[1].data), bytes, "a bytearray is copied into immutable bytes")
        self.assertEqual(len(c), 4)

    def test_a_chain_returns_the_same_content(self) -> None:
        c = Content()
        self.assertIs(c.text("a"), c)
        self.assertEqual(len(Content()), 0)

    def test_wrong_types_are_refused_where_they_are_written(self) -> None:
        with self.assertRaisesRegex(TypeError, "text must be a str, got int"):
            Content().text(3)  # type: ignore[arg-type]
        with self.assertRaisesRegex(TypeError, "image data must be bytes, got str"):
            Content().image("image/png", "not bytes")  # type: ignore[arg-type]
        with self.assertRaisesRegex(TypeError, "the link's mime_type must be a str"):
            Content().link("https://x.test", "x", 7)  # type: ignore[arg-type]

    def test_a_tool_returning_content_yields_parts(self) -> None:
        @tool(name="content_tool_for_test")
        def chart(label: str) -> Content:
            return Content().text(label).image("image/gif", b"GIF89a")

        try:
            out = _tool.call("content_tool_for_test", '{"label": "sales"}', backend=None)
        finally:
            del _tool.REGISTRY["content_tool_for_test"]
        self.assertEqual(out.kind, "parts")
        self.assertEqual(out.value, (TextPart("sales"), ImagePart("image/gif", b"GIF89a")))


if __name__ == "__main__":
    unittest.main()
