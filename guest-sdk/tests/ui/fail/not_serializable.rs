struct Opaque;

#[lovia::tool]
fn opaque() -> Opaque {
    Opaque
}
fn main() {}
