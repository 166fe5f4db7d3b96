#[lovia::tool]
async fn later() -> String {
    String::new()
}
fn main() {}
