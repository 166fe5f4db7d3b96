"""Order lookups and refunds for a small shop: a refund over $50 needs a human's approval.

The Python version of example-tools/orders (the same tools, schemas and
answers; tests/all/python.rs checks both). Build it with

    python -m lovia build example-tools/python/orders.py -o target/plugins/orders-py.wasm
"""

from __future__ import annotations

import enum
from typing import Annotated, Optional

from lovia import Field, InvalidToolArguments, ToolError, plugin, tool

plugin(name="orders", instructions="Amounts are in cents. Look an order up before refunding it.")

ORDERS = [
    ("A-1001", "ada", "shipped", 4_250),
    ("A-1002", "grace", "processing", 12_000),
    ("A-1003", "ada", "delivered", 990),
    ("A-1004", "linus", "cancelled", 5_600),
    ("A-1005", "grace", "delivered", 3_100),
]


def _find(order_id: str) -> tuple[str, str, str, int] | None:
    return next((o for o in ORDERS if o[0] == order_id), None)


@tool(read_only=True, idempotent=True)
def lookup_order(order_id: Annotated[str, Field(pattern="^A-[0-9]{4}$"), "The order id, like A-1001"]) -> dict:
    """Look up an order by its id (for example `A-1001`)."""
    order = _find(order_id)
    if order is None:
        raise ToolError(f"no order {order_id}", hint="ids look like A-1001")
    id_, customer, status, total = order
    return {"id": id_, "customer": customer, "status": status, "total_cents": total}


def _refund_needs_approval(args: dict) -> bool:
    return args["amount_cents"] > 5000


@tool(destructive=True, needs_approval=_refund_needs_approval)
def refund(
    order_id: Annotated[str, "The order id, like A-1001"],
    amount_cents: Annotated[int, Field(ge=1), "Amount to refund, in cents"],
    reason: Annotated[Optional[str], "Why the customer gets a refund"] = None,
) -> str:
    """Refund part or all of an order. Refunds over 5000 cents need approval."""
    order = _find(order_id)
    if order is None:
        raise ToolError(f"no order {order_id}")
    if amount_cents > order[3]:
        raise InvalidToolArguments(f"amount_cents {amount_cents} exceeds the order total {order[3]}")
    why = f" ({reason})" if reason is not None else ""
    return f"Refunded {amount_cents} cents on {order_id}{why}"


class RankBy(enum.Enum):
    """How to rank customers."""

    SPEND = "spend"
    ORDERS = "orders"


@tool(read_only=True)
def top_customers(
    limit: Annotated[int, Field(ge=1, le=50), "How many customers"] = 3,
    by: Annotated[Optional[RankBy], "Ranking criterion"] = None,
) -> list[dict]:
    """The customers who spend the most, best first."""
    rows: dict[str, dict] = {}
    for _, customer, status, total in ORDERS:
        if status == "cancelled":
            continue
        row = rows.setdefault(customer, {"customer": customer, "orders": 0, "total_cents": 0})
        row["orders"] += 1
        row["total_cents"] += total
    ranked = list(rows.values())
    if (by or RankBy.SPEND) is RankBy.SPEND:
        ranked.sort(key=lambda r: -r["total_cents"])
    else:
        ranked.sort(key=lambda r: (-r["orders"], -r["total_cents"]))
    return ranked[:limit]
