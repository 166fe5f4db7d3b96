#[lovia::tool(name = "no spaces allowed")]
fn named() -> String {
    String::new()
}
fn main() {}
