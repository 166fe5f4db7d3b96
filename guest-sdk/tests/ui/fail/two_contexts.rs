#[lovia::tool]
fn twice(a: &lovia::Context, b: &lovia::Context) -> String {
    let _ = (a, b);
    String::new()
}
fn main() {}
