"""The Python plugin of `lovia bench --python`: one trivial tool, written
with lovia's Python SDK and built with componentize-py (bench/run does it):

    python -m lovia build bench/python-tool/app.py -o target/bench/pyecho.wasm

The interpreter inside makes it tens of MB, so its cold start and its
per-call costs differ from a Rust plugin's; `lovia bench` measures both.
"""

from typing import Annotated

from lovia import plugin, tool

plugin(name="pyecho", version="0.2.0")


@tool(read_only=True, idempotent=True)
def echo(text: Annotated[str, "Text to return"]) -> str:
    """Return the text unchanged."""
    return text
