//! One plugin source, a file or an `oci://` reference, read and checked:
//! what every door (`lovia call`, `run`, `mcp`, `serve`) does before the
//! host compiles a plugin under a signature policy.

use crate::error::SupplyError;
use crate::oci::{self, OciOptions};
use crate::signature::{self, SignaturePolicy, Verdict};
use std::path::Path;

/// A plugin's bytes that passed the policy.
#[derive(Debug, Clone)]
#[non_exhaustive]
pub struct Checked {
    /// The component.
    pub bytes: Vec<u8>,
    /// What its signature said.
    pub verdict: Verdict,
    /// It was pulled, and read from the cache because the registry could
    /// not be reached.
    pub from_cache: bool,
}

/// Reads `source` (a file, with its detached signature `source.sig` if
/// there is one, or an `oci://` reference, pulled under `oci`) and checks
/// it against `policy`, before anything parses or compiles it.
pub async fn checked(source: &Path, policy: &SignaturePolicy, oci: &OciOptions) -> Result<Checked, SupplyError> {
    let origin = source.display().to_string();
    let (bytes, detached, from_cache) = if oci::is_reference(&origin) {
        // `pull` reports a fall-back to the cache itself.
        let pulled = oci::pull(&origin, oci).await?;
        (pulled.bytes, None, pulled.from_cache)
    } else {
        let bytes = std::fs::read(source).map_err(|e| SupplyError::Read { path: source.to_owned(), source: e })?;
        (bytes, signature::read_detached(source)?, false)
    };
    let verdict = policy.check(&bytes, detached.as_deref(), &origin)?;
    if let Verdict::Signed(signer) = &verdict {
        tracing::info!(plugin = %origin, %signer, "signature verified");
    }
    Ok(Checked { bytes, verdict, from_cache })
}
