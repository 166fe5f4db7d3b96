#[lovia::tool]
fn described(#[arg(description = "the context")] ctx: &lovia::Context) -> String {
    let _ = ctx;
    String::new()
}
fn main() {}
