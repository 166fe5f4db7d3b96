//! Every option of the macro, in one plugin.
use serde::Deserialize;

#[derive(Deserialize, schemars::JsonSchema)]
struct Point {
    x: i32,
    y: i32,
}

/// Every kind of argument.
#[lovia::tool(strict, parallel = false, retries = 2, timeout_ms = 500, max_output_chars = 100, read_only)]
fn everything(
    ctx: &lovia::Context,
    #[arg(description = "text", pattern = "^[a-z]+$", min_length = 1, max_length = 5)] word: String,
    #[arg(min = -5, max = 5)] n: i64,
    #[arg(default = 1.5)] ratio: f64,
    #[arg(default = "x")] label: Option<String>,
    points: Vec<Point>,
    r#type: Option<bool>,
) -> Result<String, lovia::ToolError> {
    let _ = (ctx, word, n, ratio, label, points, r#type);
    Ok(String::new())
}

#[lovia::tool(name = "renamed", description = "", needs_approval)]
fn unit() {}

#[lovia::tool(needs_approval = big)]
fn gated(amount: u32) -> u32 {
    amount
}

fn big(args: &gated::Args) -> bool {
    args.amount > 10
}

mod nested {
    #[lovia::tool(needs_approval = false)]
    pub(crate) fn inner() -> Vec<u8> {
        vec![1]
    }
}

lovia::export!(instructions = "be careful"; everything, unit, gated, nested::inner);

fn main() {}
