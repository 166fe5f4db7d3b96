# The seed's first example, as a new user writes it: an `async def` tool in a
# file that imports nothing but `lovia` (tests/all/python.rs builds it with
# `lovia build`). The SDK must bring every module an async call needs.
from lovia import tool


@tool
async def lookup_order(order_id: str) -> str:
    """Look up an order by its id."""
    return f"Order {order_id}: shipped"
