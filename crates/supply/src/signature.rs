//! Signatures in the WebAssembly signature format (`wasmsign2`): Ed25519
//! over the component's sections, carried as the component's first custom
//! section (`signature`) or detached in a file beside it (`X.wasm.sig`).
//!
//! lovia uses the format the ecosystem's tools read and write (`wasmsign2`
//! and its CLI), rather than sigstore bundles: verifying needs no network,
//! no transparency log and no certificate authority, only the publisher's
//! public key, which is what an operator of a sandboxed host can pin. Keys
//! are the format's own (raw, PEM, DER) or OpenSSH `ssh-ed25519` keys.
//!
//! The signature covers every section of the component. `lovia pack` adds a
//! section, so a component is packed first and signed last; packing a signed
//! component is refused ([`is_signed`]).

use crate::error::SupplyError;
pub use crate::error::Unsigned;
use std::collections::HashSet;
use std::io::Cursor;
use std::path::{Path, PathBuf};
use wasmsign2::{KeyPair, Module, PublicKey, PublicKeySet, SecretKey};

/// The suffix of a detached signature's file: `tool.wasm` → `tool.wasm.sig`.
pub const DETACHED_SUFFIX: &str = ".sig";

/// What to do with a component's signature.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, serde::Deserialize, serde::Serialize)]
#[serde(rename_all = "lowercase")]
#[non_exhaustive]
pub enum SignatureMode {
    /// A component without a signature by a trusted key is refused.
    Require,
    /// Such a component loads, and a warning names why.
    Warn,
    /// Signatures are not looked at (the local-development default; the
    /// CLI and the service say so when they start).
    #[default]
    Off,
}

/// Which components must be signed, and by whom: the configuration section
/// both doors spell. `lovia serve`'s `[signatures]` table is this struct as
/// TOML, and `--signatures` and `--trusted-key` fill it at the CLI; both
/// make their policy with [`SignaturesSection::policy`].
///
/// ```
/// let section = lovia_supply::SignaturesSection::default();
/// let policy = section.policy().expect("off needs no keys");
/// assert_eq!(policy.mode, lovia_supply::SignatureMode::Off);
/// ```
#[derive(Debug, Clone, Default, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(deny_unknown_fields)]
#[non_exhaustive]
pub struct SignaturesSection {
    /// `require` (a plugin no trusted key signed is refused), `warn` (it
    /// loads, with a warning), or `off`. Default: `off`.
    #[serde(default)]
    pub mode: SignatureMode,
    /// The publishers' public keys (files from `lovia keygen`, or OpenSSH
    /// ed25519 keys). Default: none; `require` needs one.
    #[serde(default)]
    pub trusted_keys: Vec<PathBuf>,
}

impl SignaturesSection {
    /// Refuses `require` without a key, which would refuse every component.
    pub fn check(&self) -> Result<(), SupplyError> {
        if self.mode == SignatureMode::Require && self.trusted_keys.is_empty() {
            return Err(SupplyError::NoKeys);
        }
        Ok(())
    }

    /// Makes the relative key paths relative to `base` (the directory of
    /// the file that configured them, or the working directory).
    pub fn resolve_paths(&mut self, base: &Path) {
        for key in &mut self.trusted_keys {
            if key.is_relative() {
                *key = base.join(&*key);
            }
        }
    }

    /// The policy: the mode, with every key read now.
    pub fn policy(&self) -> Result<SignaturePolicy, SupplyError> {
        SignaturePolicy::new(self.mode, &self.trusted_keys)
    }
}

impl std::fmt::Display for SignatureMode {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            SignatureMode::Require => "require",
            SignatureMode::Warn => "warn",
            SignatureMode::Off => "off",
        })
    }
}

impl std::str::FromStr for SignatureMode {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        match s {
            "require" => Ok(SignatureMode::Require),
            "warn" => Ok(SignatureMode::Warn),
            "off" => Ok(SignatureMode::Off),
            other => Err(format!("unknown signature mode {other:?}; expected require, warn or off")),
        }
    }
}

/// A public key a signature may be made with, named for people.
#[derive(Debug, Clone)]
pub struct TrustedKey {
    /// The key file's name without its extension (`acme.pub` → `acme`), or
    /// the name given.
    pub name: String,
    key: PublicKey,
}

impl TrustedKey {
    /// Reads a public key file: OpenSSH (`ssh-ed25519 …`), PEM, DER or the
    /// format's raw bytes.
    pub fn from_file(path: &Path) -> Result<Self, SupplyError> {
        let data = std::fs::read(path).map_err(|source| SupplyError::Read { path: path.to_owned(), source })?;
        let key = PublicKey::from_any(&data)
            .map_err(|e| SupplyError::BadKey { path: path.to_owned(), reason: e.to_string() })?;
        let name = path.file_stem().map_or_else(|| path.display().to_string(), |s| s.to_string_lossy().into_owned());
        Ok(Self { name, key })
    }

    /// The first 16 hex digits of the SHA-256 of the key: what logs and the
    /// audit trail name beside the key's name.
    pub fn fingerprint(&self) -> String {
        use sha2::Digest;
        hex::encode(sha2::Sha256::digest(self.key.to_bytes()))[..16].to_owned()
    }

    /// `name (fingerprint)`.
    pub fn label(&self) -> String {
        format!("{} ({})", self.name, self.fingerprint())
    }
}

/// The keys and the mode that decide whether a component may load.
#[derive(Debug, Clone, Default)]
#[non_exhaustive]
pub struct SignaturePolicy {
    /// What to do. Default: [`SignatureMode::Off`].
    pub mode: SignatureMode,
    /// The keys whose signatures count. Default: none.
    pub keys: Vec<TrustedKey>,
}

/// What was found out about a component's signature.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum Verdict {
    /// Signed by this trusted key (its [`TrustedKey::label`]).
    Signed(String),
    /// Not signed by a trusted key, and the mode lets it load: why.
    Unverified(String),
    /// The mode is off: nothing was looked at.
    NotChecked,
}

impl Verdict {
    /// The signer's label, when a trusted key signed it.
    pub fn signer(&self) -> Option<&str> {
        match self {
            Verdict::Signed(label) => Some(label),
            _ => None,
        }
    }
}

impl SignaturePolicy {
    /// A policy of `mode` over the key files at `paths`.
    pub fn new(mode: SignatureMode, paths: &[PathBuf]) -> Result<Self, SupplyError> {
        let keys = paths.iter().map(|p| TrustedKey::from_file(p)).collect::<Result<Vec<_>, _>>()?;
        if mode == SignatureMode::Require && keys.is_empty() {
            return Err(SupplyError::NoKeys);
        }
        Ok(Self { mode, keys })
    }

    /// Checks `bytes` (with `detached`, the signature file's content, when
    /// there is one): the trusted key that signed it, or, under `warn`,
    /// why none did. Under `require`, a component no trusted key signed is
    /// an error naming why (unsigned, signed by an unknown key, or altered
    /// since it was signed).
    pub fn check(&self, bytes: &[u8], detached: Option<&[u8]>, origin: &str) -> Result<Verdict, SupplyError> {
        if self.mode == SignatureMode::Off {
            return Ok(Verdict::NotChecked);
        }
        match verify(bytes, detached, &self.keys) {
            Ok(key) => Ok(Verdict::Signed(key.label())),
            Err(reason) if self.mode == SignatureMode::Warn => {
                tracing::warn!(%origin, %reason, "loading a component no trusted key signed (signatures = warn)");
                Ok(Verdict::Unverified(reason.to_string()))
            }
            Err(reason) => Err(SupplyError::Signature { origin: origin.to_owned(), reason }),
        }
    }
}

/// The trusted key whose signature over `bytes` verifies.
pub fn verify<'k>(bytes: &[u8], detached: Option<&[u8]>, keys: &'k [TrustedKey]) -> Result<&'k TrustedKey, Unsigned> {
    if detached.is_none() && !is_signed(bytes) {
        return Err(Unsigned::Missing);
    }
    let set = PublicKeySet::new(keys.iter().map(|k| k.key.clone()).collect::<HashSet<_>>());
    match set.verify(&mut Cursor::new(bytes), detached) {
        Ok(valid) => keys.iter().find(|k| valid.contains(&k.key)).ok_or(Unsigned::Untrusted),
        Err(wasmsign2::WSError::VerificationFailed | wasmsign2::WSError::VerificationFailedForPredicates) => {
            Err(Unsigned::Untrusted)
        }
        Err(wasmsign2::WSError::NoSignatures) => Err(Unsigned::Missing),
        Err(e) => Err(Unsigned::Malformed(e.to_string())),
    }
}

/// Whether `bytes` carry an embedded signature (a first custom section
/// named `signature`).
pub fn is_signed(bytes: &[u8]) -> bool {
    let mut reader = Cursor::new(bytes);
    let Ok(stream) = Module::init_from_reader(&mut reader) else { return false };
    let Ok(mut sections) = Module::iterate(stream) else { return false };
    matches!(sections.next(), Some(Ok(section)) if section.is_signature_header())
}

/// A new key pair, as PEM: (secret, public).
pub fn generate_key_pair() -> (String, String) {
    let pair = KeyPair::generate();
    (pair.sk.to_pem(), pair.pk.to_pem())
}

/// Signs `bytes` with the secret key in `key` (PEM, DER, raw or OpenSSH):
/// the signed component, and with `detached` the signature apart (the
/// component then stays as it was).
pub fn sign(bytes: &[u8], key: &[u8], detached: bool) -> Result<Signed, SupplyError> {
    let key = SecretKey::from_any(key).map_err(|e| SupplyError::BadSecretKey { reason: e.to_string() })?;
    let module = Module::deserialize(&mut Cursor::new(bytes))
        .map_err(|e| SupplyError::NotAComponent { reason: e.to_string() })?;
    let signed = key.sign(module, None).map_err(|e| SupplyError::Sign { reason: e.to_string() })?;
    let serialize = |module: &Module| -> Result<Vec<u8>, SupplyError> {
        let mut out = Vec::with_capacity(bytes.len() + 128);
        module.serialize(&mut out).map_err(|e| SupplyError::Sign { reason: e.to_string() })?;
        Ok(out)
    };
    if detached {
        let (_, signature) = signed.detach_signature().map_err(|e| SupplyError::Sign { reason: e.to_string() })?;
        return Ok(Signed { component: bytes.to_vec(), detached: Some(signature) });
    }
    Ok(Signed { component: serialize(&signed)?, detached: None })
}

/// What [`sign`] made.
#[derive(Debug, Clone)]
#[non_exhaustive]
pub struct Signed {
    /// The component: signed, or unchanged when the signature is detached.
    pub component: Vec<u8>,
    /// The detached signature, for `X.wasm.sig`.
    pub detached: Option<Vec<u8>>,
}

/// The detached signature beside `path` (`path` + [`DETACHED_SUFFIX`]), if
/// there is one.
pub fn read_detached(path: &Path) -> Result<Option<Vec<u8>>, SupplyError> {
    let mut sig = path.as_os_str().to_owned();
    sig.push(DETACHED_SUFFIX);
    let sig = PathBuf::from(sig);
    match std::fs::read(&sig) {
        Ok(bytes) => Ok(Some(bytes)),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(None),
        Err(source) => Err(SupplyError::Read { path: sig, source }),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The smallest component: the header alone.
    const COMPONENT: &[u8] = &[0x00, 0x61, 0x73, 0x6d, 0x0d, 0x00, 0x01, 0x00, 0, 4, 3, b'a', b'b', b'c'];

    fn key(dir: &Path, name: &str) -> (Vec<u8>, TrustedKey) {
        let (secret, public) = generate_key_pair();
        let path = dir.join(format!("{name}.pub"));
        std::fs::write(&path, public).unwrap_or_else(|e| panic!("write: {e}"));
        (secret.into_bytes(), TrustedKey::from_file(&path).unwrap_or_else(|e| panic!("key: {e}")))
    }

    #[test]
    fn a_signature_verifies_for_its_key_only_and_not_after_a_change() {
        let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("tempdir: {e}"));
        let (secret, trusted) = key(dir.path(), "acme");
        let (_, other) = key(dir.path(), "other");
        let signed = sign(COMPONENT, &secret, false).unwrap_or_else(|e| panic!("sign: {e}"));
        assert!(is_signed(&signed.component) && !is_signed(COMPONENT));
        assert_eq!(
            verify(&signed.component, None, std::slice::from_ref(&trusted)).map(|k| k.name.clone()),
            Ok("acme".into())
        );
        assert_eq!(verify(&signed.component, None, std::slice::from_ref(&other)).err(), Some(Unsigned::Untrusted));
        assert_eq!(verify(COMPONENT, None, std::slice::from_ref(&trusted)).err(), Some(Unsigned::Missing));
        let mut altered = signed.component.clone();
        if let Some(last) = altered.last_mut() {
            *last ^= 1;
        }
        assert_eq!(verify(&altered, None, std::slice::from_ref(&trusted)).err(), Some(Unsigned::Untrusted));

        let detached = sign(COMPONENT, &secret, true).unwrap_or_else(|e| panic!("sign: {e}"));
        assert_eq!(detached.component, COMPONENT, "a detached signature leaves the component as it was");
        let sig = detached.detached.unwrap_or_default();
        assert!(verify(COMPONENT, Some(&sig), std::slice::from_ref(&trusted)).is_ok());
    }

    #[test]
    fn the_modes_refuse_warn_or_look_away() {
        let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("tempdir: {e}"));
        let (_, trusted) = key(dir.path(), "acme");
        let require = SignaturePolicy { mode: SignatureMode::Require, keys: vec![trusted.clone()] };
        let err = require.check(COMPONENT, None, "tool.wasm").err().map(|e| e.to_string());
        assert_eq!(err.as_deref(), Some("tool.wasm is refused: it is not signed (signatures = require)"));
        let warn = SignaturePolicy { mode: SignatureMode::Warn, keys: vec![trusted] };
        assert_eq!(warn.check(COMPONENT, None, "tool.wasm").ok(), Some(Verdict::Unverified("it is not signed".into())));
        assert_eq!(SignaturePolicy::default().check(COMPONENT, None, "x").ok(), Some(Verdict::NotChecked));
        assert!(matches!(SignaturePolicy::new(SignatureMode::Require, &[]), Err(SupplyError::NoKeys)));
    }
}
