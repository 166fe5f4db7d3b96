//! lovia-supply: know what lovia runs. A component's SHA-256 can be pinned
//! (the host checks the pin: `digest` in a plugin's config), its signature
//! checked against the keys an operator trusts ([`signature`]), and it can
//! come from an OCI registry ([`oci`]).
//!
//! ```
//! use lovia_supply::signature::{self, SignatureMode, SignaturePolicy};
//! # fn main() -> Result<(), Box<dyn std::error::Error>> {
//! let dir = tempfile::tempdir()?;
//! let (secret, public) = signature::generate_key_pair();
//! std::fs::write(dir.path().join("acme.pub"), public)?;
//! let component = [0x00, 0x61, 0x73, 0x6d, 0x0d, 0x00, 0x01, 0x00];
//! let signed = signature::sign(&component, secret.as_bytes(), false)?;
//! let policy = SignaturePolicy::new(SignatureMode::Require, &[dir.path().join("acme.pub")])?;
//! let verdict = policy.check(&signed.component, None, "tool.wasm")?;
//! assert!(verdict.signer().is_some_and(|s| s.starts_with("acme (")));
//! assert!(policy.check(&component, None, "tool.wasm").is_err());
//! # Ok(())
//! # }
//! ```

pub mod error;
pub mod oci;
pub mod signature;
mod source;

pub use error::SupplyError;
pub use signature::{SignatureMode, SignaturePolicy, SignaturesSection, TrustedKey, Verdict};
pub use source::{Checked, checked};
