#[lovia::tool]
fn generic<T: Default>() -> String {
    String::new()
}
fn main() {}
