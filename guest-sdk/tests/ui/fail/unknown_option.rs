#[lovia::tool(paralel = false)]
fn typo() -> String {
    String::new()
}
fn main() {}
