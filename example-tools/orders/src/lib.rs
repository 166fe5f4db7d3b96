//! Order lookups and refunds for a small shop: a refund over $50 needs a human's approval.

use serde::{Deserialize, Serialize};

/// An order as the shop stores it.
#[derive(Serialize)]
struct Order {
    id: String,
    customer: String,
    status: &'static str,
    total_cents: u64,
}

/// A customer ranked by spend.
#[derive(Serialize)]
struct CustomerSpend {
    customer: String,
    orders: u32,
    total_cents: u64,
}

const ORDERS: &[(&str, &str, &str, u64)] = &[
    ("A-1001", "ada", "shipped", 4_250),
    ("A-1002", "grace", "processing", 12_000),
    ("A-1003", "ada", "delivered", 990),
    ("A-1004", "linus", "cancelled", 5_600),
    ("A-1005", "grace", "delivered", 3_100),
];

/// Look up an order by its id (for example `A-1001`).
#[lovia::tool(read_only, idempotent)]
fn lookup_order(
    #[arg(description = "The order id, like A-1001", pattern = "^A-[0-9]{4}$")] order_id: String,
) -> Result<serde_json::Value, lovia::ToolError> {
    let (id, customer, status, total) = ORDERS
        .iter()
        .find(|o| o.0 == order_id)
        .ok_or_else(|| lovia::ToolError::new(format!("no order {order_id}")).hint("ids look like A-1001"))?;
    Ok(serde_json::to_value(Order { id: (*id).into(), customer: (*customer).into(), status, total_cents: *total })
        .unwrap_or_default())
}

/// Refund part or all of an order. Refunds over 5000 cents need approval.
#[lovia::tool(destructive, needs_approval = refund_needs_approval)]
fn refund(
    #[arg(description = "The order id, like A-1001")] order_id: String,
    #[arg(description = "Amount to refund, in cents", min = 1)] amount_cents: u64,
    #[arg(description = "Why the customer gets a refund")] reason: Option<String>,
) -> Result<String, lovia::ToolError> {
    let order =
        ORDERS.iter().find(|o| o.0 == order_id).ok_or_else(|| lovia::ToolError::new(format!("no order {order_id}")))?;
    if amount_cents > order.3 {
        return Err(lovia::ToolError::invalid_arguments(format!(
            "amount_cents {amount_cents} exceeds the order total {}",
            order.3
        )));
    }
    let why = reason.map(|r| format!(" ({r})")).unwrap_or_default();
    Ok(format!("Refunded {amount_cents} cents on {order_id}{why}"))
}

fn refund_needs_approval(args: &refund::Args) -> bool {
    args.amount_cents > 5000
}

/// How to rank customers.
#[derive(Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "snake_case")]
enum RankBy {
    Spend,
    Orders,
}

/// The customers who spend the most, best first.
#[lovia::tool(read_only)]
fn top_customers(
    #[arg(description = "How many customers", min = 1, max = 50, default = 3)] limit: u32,
    #[arg(description = "Ranking criterion")] by: Option<RankBy>,
) -> Vec<CustomerSpend> {
    let mut rows: Vec<CustomerSpend> = Vec::new();
    for (_, customer, status, total) in ORDERS {
        if *status == "cancelled" {
            continue;
        }
        match rows.iter_mut().find(|r| r.customer == *customer) {
            Some(r) => {
                r.orders += 1;
                r.total_cents += total;
            }
            None => rows.push(CustomerSpend { customer: (*customer).into(), orders: 1, total_cents: *total }),
        }
    }
    match by.unwrap_or(RankBy::Spend) {
        RankBy::Spend => rows.sort_by(|a, b| b.total_cents.cmp(&a.total_cents)),
        RankBy::Orders => rows.sort_by(|a, b| b.orders.cmp(&a.orders).then(b.total_cents.cmp(&a.total_cents))),
    }
    rows.truncate(limit as usize);
    rows
}

lovia::export!(
    instructions = "Amounts are in cents. Look an order up before refunding it.";
    lookup_order, refund, top_customers
);
