//! API keys: only their SHA-256 is configured or kept in memory.

use sha2::{Digest, Sha256};

/// The lower-case hex SHA-256 of `key`, as `api_keys` in the config holds it.
///
/// ```
/// assert_eq!(
///     lovia_serve::hash_key("test"),
///     "9f86d081884c7d659a2feaa0c55ad015a3bf4f1b2b0b822cd15d6c15b0f00a08"
/// );
/// ```
pub fn hash_key(key: &str) -> String {
    hex::encode(Sha256::digest(key.as_bytes()))
}

/// The key of an `Authorization: Bearer <key>` header value.
pub(crate) fn bearer(header: &str) -> Option<&str> {
    let (scheme, key) = header.split_once(' ')?;
    (scheme.eq_ignore_ascii_case("bearer") && !key.trim().is_empty()).then(|| key.trim())
}
