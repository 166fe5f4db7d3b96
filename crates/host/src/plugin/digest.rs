//! A component's digest, in a file of its own: loading names it and the
//! artifact cache keys by it, and neither should reach into the other for it.

use sha2::{Digest, Sha256};

/// The SHA-256 of a component's bytes, hex: what [`super::Plugin::digest`]
/// says and what a `digest = "sha256:…"` pin names.
pub fn sha256_hex(bytes: &[u8]) -> String {
    hex::encode(Sha256::digest(bytes))
}
