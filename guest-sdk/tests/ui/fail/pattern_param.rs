#[lovia::tool]
fn destructure((a, b): (u32, u32)) -> u32 {
    a + b
}
fn main() {}
