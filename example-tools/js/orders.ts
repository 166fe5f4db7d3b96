// Order lookups and refunds for a small shop: a refund over $50 needs a
// human's approval.
//
// The TypeScript version of example-tools/orders (the same tools and
// answers; tests/all/typescript.rs checks both). Build it with
//
//     lovia build example-tools/js/orders.ts --node-modules sdk/js/node_modules -o target/plugins/orders-ts.wasm

import { InvalidToolArguments, ToolError, plugin, tool } from "lovia";
import { z } from "zod";

plugin({ name: "orders", instructions: "Amounts are in cents. Look an order up before refunding it." });

type Order = { id: string; customer: string; status: string; total: number };

const ORDERS: Order[] = [
  { id: "A-1001", customer: "ada", status: "shipped", total: 4_250 },
  { id: "A-1002", customer: "grace", status: "processing", total: 12_000 },
  { id: "A-1003", customer: "ada", status: "delivered", total: 990 },
  { id: "A-1004", customer: "linus", status: "cancelled", total: 5_600 },
  { id: "A-1005", customer: "grace", status: "delivered", total: 3_100 },
];

const find = (id: string) => ORDERS.find((o) => o.id === id);

export const lookupOrder = tool(
  {
    name: "lookup_order",
    description: "Look up an order by its id (for example `A-1001`).",
    parameters: z.object({
      order_id: z.string().regex(/^A-[0-9]{4}$/).describe("The order id, like A-1001"),
    }),
    hints: { readOnly: true, idempotent: true },
  },
  async ({ order_id }) => {
    const order = find(order_id);
    if (order === undefined) throw new ToolError(`no order ${order_id}`, { hint: "ids look like A-1001" });
    return { id: order.id, customer: order.customer, status: order.status, total_cents: order.total };
  },
);

export const refund = tool(
  {
    name: "refund",
    description: "Refund part or all of an order. Refunds over 5000 cents need approval.",
    parameters: z.object({
      order_id: z.string().describe("The order id, like A-1001"),
      amount_cents: z.number().int().min(1).describe("Amount to refund, in cents"),
      reason: z.string().nullable().optional().describe("Why the customer gets a refund"),
    }),
    needsApproval: (args) => args.amount_cents > 5000,
    hints: { destructive: true },
  },
  async ({ order_id, amount_cents, reason }) => {
    const order = find(order_id);
    if (order === undefined) throw new ToolError(`no order ${order_id}`);
    if (amount_cents > order.total) {
      throw new InvalidToolArguments(`amount_cents ${amount_cents} exceeds the order total ${order.total}`);
    }
    const why = reason != null ? ` (${reason})` : "";
    return `Refunded ${amount_cents} cents on ${order_id}${why}`;
  },
);

export const topCustomers = tool(
  {
    name: "top_customers",
    description: "The customers who spend the most, best first.",
    parameters: z.object({
      limit: z.number().int().min(1).max(50).default(3).describe("How many customers"),
      by: z.enum(["spend", "orders"]).nullable().optional().describe("Ranking criterion"),
    }),
    hints: { readOnly: true },
  },
  async ({ limit, by }) => {
    const rows = new Map<string, { customer: string; orders: number; total_cents: number }>();
    for (const o of ORDERS) {
      if (o.status === "cancelled") continue;
      const row = rows.get(o.customer) ?? { customer: o.customer, orders: 0, total_cents: 0 };
      row.orders += 1;
      row.total_cents += o.total;
      rows.set(o.customer, row);
    }
    const ranked = [...rows.values()];
    if ((by ?? "spend") === "spend") ranked.sort((a, b) => b.total_cents - a.total_cents);
    else ranked.sort((a, b) => b.orders - a.orders || b.total_cents - a.total_cents);
    return ranked.slice(0, limit);
  },
);
