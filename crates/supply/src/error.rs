//! Why a component, a key or a pull was refused.

use std::path::PathBuf;

/// Why a component carries no trusted signature.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum Unsigned {
    /// No signature, embedded or detached.
    #[error("it is not signed")]
    Missing,
    /// Signed, but by none of the trusted keys (or altered since).
    #[error("no trusted key signed it (signed by another key, or changed after it was signed)")]
    Untrusted,
    /// The signature section or file is not one.
    #[error("its signature is unreadable: {0}")]
    Malformed(String),
}

/// Why lovia-supply refused something. Each names its cause.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum SupplyError {
    /// A file (a key, a component, a detached signature) could not be read.
    #[error("cannot read {path}: {source}")]
    Read {
        /// The file.
        path: PathBuf,
        /// The I/O error.
        source: std::io::Error,
    },
    /// A public key file holds no key lovia can read.
    #[error("{path} is not a public key: {reason}")]
    BadKey {
        /// The file.
        path: PathBuf,
        /// What the parser said.
        reason: String,
    },
    /// A secret key holds no key lovia can read.
    #[error("the secret key is unreadable: {reason}")]
    BadSecretKey {
        /// What the parser said.
        reason: String,
    },
    /// `require` with no trusted key would refuse everything.
    #[error("signatures = require needs at least one trusted key")]
    NoKeys,
    /// A component no trusted key signed, under `require`.
    #[error("{origin} is refused: {reason} (signatures = require)")]
    Signature {
        /// Where the component came from.
        origin: String,
        /// Why.
        reason: Unsigned,
    },
    /// The bytes are not a WebAssembly component or module.
    #[error("not a WebAssembly component: {reason}")]
    NotAComponent {
        /// What the parser said.
        reason: String,
    },
    /// Signing failed.
    #[error("cannot sign: {reason}")]
    Sign {
        /// What the signer said.
        reason: String,
    },
    /// `oci://…` does not parse as a reference.
    #[error("{reference} is not an OCI reference: {reason}")]
    OciReference {
        /// As given.
        reference: String,
        /// What the parser said.
        reason: String,
    },
    /// The registry refused or failed the pull, and nothing usable is cached.
    #[error("cannot pull {reference}: {reason}")]
    Pull {
        /// As given.
        reference: String,
        /// What went wrong.
        reason: String,
    },
    /// The component's layer is not the one its manifest names: changed in
    /// the registry or on the way.
    #[error("{reference}: the layer's digest is sha256:{actual}, but the manifest names {expected}; refused")]
    LayerDigest {
        /// As given.
        reference: String,
        /// The manifest's digest of the layer.
        expected: String,
        /// What arrived, hex.
        actual: String,
    },
    /// The manifest is not the one the reference pins.
    #[error("{reference}: the registry answered with manifest {actual}; refused")]
    ManifestDigest {
        /// As given.
        reference: String,
        /// What arrived.
        actual: String,
    },
    /// The registry refused or failed the push.
    #[error("cannot push {reference}: {reason}")]
    Push {
        /// As given.
        reference: String,
        /// What went wrong.
        reason: String,
    },
}

impl SupplyError {
    /// What the user can do about it.
    pub fn hint(&self) -> Option<&'static str> {
        Some(match self {
            SupplyError::Read { .. } => "check the path and that this user may read it",
            SupplyError::BadKey { .. } | SupplyError::BadSecretKey { .. } => {
                "use a key from `lovia keygen`, or an OpenSSH ed25519 key (ssh-keygen -t ed25519)"
            }
            SupplyError::NoKeys => "name the publishers' public keys (trusted_keys, or --trusted-key FILE)",
            SupplyError::Signature { .. } => {
                "sign it with `lovia sign --key KEY PLUGIN.wasm` (after `lovia pack`), or trust its publisher's key"
            }
            SupplyError::NotAComponent { .. } => "pass the .wasm component",
            SupplyError::Sign { .. } => return None,
            SupplyError::OciReference { .. } => {
                "write it as oci://registry/repository:tag or oci://registry/repository@sha256:<digest>"
            }
            SupplyError::Pull { .. } | SupplyError::Push { .. } => {
                "check the reference and the registry; credentials come from ~/.docker/config.json or $LOVIA_REGISTRY_USERNAME and $LOVIA_REGISTRY_PASSWORD; a registry on plain HTTP needs --insecure-registry HOST:PORT"
            }
            SupplyError::LayerDigest { .. } | SupplyError::ManifestDigest { .. } => {
                "the registry served something other than what was published: do not use it; publish again from a trusted copy"
            }
        })
    }
}
