#[lovia::tool]
fn typo(#[arg(minimum = 1)] n: u32) -> u32 {
    n
}
fn main() {}
