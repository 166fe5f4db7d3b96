//! Components from OCI registries: `oci://registry/repository:tag` or
//! `oci://registry/repository@sha256:…`, in the Wasm OCI artifact layout
//! the ecosystem uses (`wkg`, `oci-wasm`, wasmCloud, Spin): an OCI image
//! manifest whose config is `application/vnd.wasm.config.v0+json` and whose
//! one layer is the component, `application/wasm`.
//!
//! A pulled component is kept in a cache by its digest, and the reference
//! is remembered beside it, so that a registry that is down does not stop a
//! component already pulled from loading: a reference by digest is read
//! from the cache without asking the registry at all (it cannot change), a
//! tag is asked for first and read from the cache only when the registry
//! cannot be reached. Every layer is checked against the digest its
//! manifest names before it is kept, and every cached blob again before it
//! is used.
//!
//! The registry protocol is `oci-client`'s. `oci-wasm` (the ecosystem's
//! helper on top of it) is not used: it pins an older `oci-client`, puts
//! `anyhow` in its API and brings a WIT parser, for three media types and a
//! small config document written here.

use crate::error::SupplyError;
use oci_client::client::{ClientConfig, ClientProtocol, Config, ImageLayer};
use oci_client::secrets::RegistryAuth;
use oci_client::{Client, Reference};
use sha2::Digest;
use std::path::{Path, PathBuf};

/// The prefix of a plugin given by reference.
pub const SCHEME: &str = "oci://";
/// The config's media type in the Wasm OCI artifact layout.
pub const CONFIG_MEDIA_TYPE: &str = "application/vnd.wasm.config.v0+json";
/// The layer's media type: the component itself.
pub const LAYER_MEDIA_TYPE: &str = "application/wasm";
/// The environment variables holding a registry's user name and password
/// (or token), when the docker config names none for it.
pub const USERNAME_ENV: &str = "LOVIA_REGISTRY_USERNAME";
/// See [`USERNAME_ENV`].
pub const PASSWORD_ENV: &str = "LOVIA_REGISTRY_PASSWORD";

/// Whether `plugin` names a component in a registry rather than a file.
pub fn is_reference(plugin: &str) -> bool {
    plugin.starts_with(SCHEME)
}

/// How to reach registries, and where pulled components are kept. It is
/// also the configuration section both doors spell: `lovia serve`'s `[oci]`
/// table is this struct as TOML, and `--insecure-registry` fills it at the
/// CLI.
#[derive(Debug, Clone, Default, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(deny_unknown_fields)]
#[non_exhaustive]
pub struct OciOptions {
    /// Where pulled components are kept (`<dir>/blobs/<sha256>.wasm`,
    /// `<dir>/refs/…`). Default: none, which pulls into no cache and so
    /// never works offline (`lovia serve` keeps them in `lovia-oci` beside
    /// its config file).
    #[serde(default)]
    pub cache_dir: Option<PathBuf>,
    /// Registries (`host:port`) spoken to over plain HTTP, such as a
    /// registry on loopback. Default: none; every other one over HTTPS.
    #[serde(default)]
    pub insecure_registries: Vec<String>,
}

impl OciOptions {
    /// Options keeping pulled components under `cache_dir`.
    pub fn with_cache(cache_dir: impl Into<PathBuf>) -> Self {
        Self { cache_dir: Some(cache_dir.into()), ..Self::default() }
    }

    fn client(&self) -> Client {
        // oci-client's reqwest is built without a crypto provider (no aws-lc
        // C build): ring, as everywhere in lovia, is the process's default.
        let _ = rustls::crypto::ring::default_provider().install_default();
        let protocol = if self.insecure_registries.is_empty() {
            ClientProtocol::Https
        } else {
            ClientProtocol::HttpsExcept(self.insecure_registries.clone())
        };
        Client::new(ClientConfig { protocol, ..ClientConfig::default() })
    }
}

/// A component pulled (or read from the cache).
#[derive(Debug, Clone)]
#[non_exhaustive]
pub struct Pulled {
    /// The component's bytes.
    pub bytes: Vec<u8>,
    /// Its SHA-256, hex (the layer's digest).
    pub digest: String,
    /// The manifest's digest (`sha256:…`), what `@sha256:` pins.
    pub manifest_digest: String,
    /// Whether it came from the cache because the registry could not be
    /// reached. A reference by digest found in the cache is read from it
    /// without asking the registry, and is not this: nothing went wrong.
    pub from_cache: bool,
}

/// What the cache remembers of a reference.
#[derive(serde::Serialize, serde::Deserialize)]
struct Remembered {
    reference: String,
    manifest_digest: String,
    layer_digest: String,
}

fn parse(reference: &str) -> Result<Reference, SupplyError> {
    let bare = reference.strip_prefix(SCHEME).unwrap_or(reference);
    bare.parse::<Reference>()
        .map_err(|e| SupplyError::OciReference { reference: reference.to_owned(), reason: e.to_string() })
}

fn sha256_hex(bytes: &[u8]) -> String {
    hex::encode(sha2::Sha256::digest(bytes))
}

fn ref_path(dir: &Path, reference: &str) -> PathBuf {
    dir.join("refs").join(format!("{}.json", sha256_hex(reference.as_bytes())))
}

fn blob_path(dir: &Path, layer_hex: &str) -> PathBuf {
    dir.join("blobs").join(format!("{layer_hex}.wasm"))
}

/// The cached component of `reference`, if there is one that still
/// matches its digest.
fn cached(dir: &Path, reference: &str) -> Option<Pulled> {
    let remembered: Remembered = serde_json::from_slice(&std::fs::read(ref_path(dir, reference)).ok()?).ok()?;
    let hex = remembered.layer_digest.strip_prefix("sha256:")?;
    let bytes = std::fs::read(blob_path(dir, hex)).ok()?;
    if sha256_hex(&bytes) != hex {
        tracing::warn!(%reference, "a cached component does not match its digest; not used");
        return None;
    }
    Some(Pulled { bytes, digest: hex.to_owned(), manifest_digest: remembered.manifest_digest, from_cache: true })
}

fn remember(dir: &Path, reference: &str, pulled: &Pulled) -> std::io::Result<()> {
    let write = |path: PathBuf, bytes: &[u8]| -> std::io::Result<()> {
        if let Some(parent) = path.parent() {
            std::fs::create_dir_all(parent)?;
        }
        let tmp = path.with_extension(format!("tmp{}", std::process::id()));
        std::fs::write(&tmp, bytes)?;
        std::fs::rename(&tmp, &path)
    };
    write(blob_path(dir, &pulled.digest), &pulled.bytes)?;
    let remembered = Remembered {
        reference: reference.to_owned(),
        manifest_digest: pulled.manifest_digest.clone(),
        layer_digest: format!("sha256:{}", pulled.digest),
    };
    write(ref_path(dir, reference), &serde_json::to_vec(&remembered).map_err(std::io::Error::other)?)
}

/// Pulls the component `reference` names (`oci://…`), checked against the
/// digests its manifest names, and keeps it in the cache.
pub async fn pull(reference: &str, options: &OciOptions) -> Result<Pulled, SupplyError> {
    let parsed = parse(reference)?;
    // A digest names one manifest forever: the cache answers without asking.
    if parsed.digest().is_some()
        && let Some(dir) = &options.cache_dir
        && let Some(pulled) = cached(dir, reference)
    {
        return Ok(Pulled { from_cache: false, ..pulled });
    }
    let auth = auth_for(parsed.resolve_registry());
    let image = match options.client().pull(&parsed, &auth, vec![LAYER_MEDIA_TYPE]).await {
        Ok(image) => image,
        Err(e) => {
            let reason = e.to_string();
            let unreachable = matches!(&e, oci_client::errors::OciDistributionError::RequestError(_));
            if unreachable
                && let Some(dir) = &options.cache_dir
                && let Some(pulled) = cached(dir, reference)
            {
                // The one report of it: callers learn it from `from_cache`.
                tracing::warn!(%reference, digest = %format!("sha256:{}", pulled.digest), error = %reason, "the registry cannot be reached; using the cached component");
                return Ok(pulled);
            }
            return Err(SupplyError::Pull { reference: reference.to_owned(), reason });
        }
    };
    let manifest = image.manifest.as_ref();
    let [layer] = image.layers.as_slice() else {
        return Err(SupplyError::Pull {
            reference: reference.to_owned(),
            reason: format!("expected one {LAYER_MEDIA_TYPE} layer, found {}", image.layers.len()),
        });
    };
    // oci-client checks each blob as it streams in; this checks what it
    // returned against the manifest again, so nothing unchecked is kept.
    let expected = manifest.and_then(|m| m.layers.first()).map(|d| d.digest.clone()).unwrap_or_default();
    let digest = sha256_hex(&layer.data);
    if expected != format!("sha256:{digest}") {
        return Err(SupplyError::LayerDigest { reference: reference.to_owned(), expected, actual: digest });
    }
    let manifest_digest = image.digest.clone().unwrap_or_default();
    if let Some(pinned) = parsed.digest()
        && pinned != manifest_digest
    {
        return Err(SupplyError::ManifestDigest { reference: reference.to_owned(), actual: manifest_digest });
    }
    let pulled = Pulled { bytes: layer.data.to_vec(), digest, manifest_digest, from_cache: false };
    if let Some(dir) = &options.cache_dir
        && let Err(e) = remember(dir, reference, &pulled)
    {
        tracing::warn!(%reference, error = %e, "the pulled component is not cached; it will not load while the registry is down");
    }
    Ok(pulled)
}

/// Publishes `component` at `reference` (`oci://…:tag`) in the Wasm OCI
/// artifact layout; the manifest's digest (`sha256:…`), which pins it.
pub async fn push(reference: &str, component: &[u8], options: &OciOptions) -> Result<String, SupplyError> {
    let parsed = parse(reference)?;
    let config = serde_json::json!({
        "architecture": "wasm",
        "os": "wasip2",
        "layerDigests": [format!("sha256:{}", sha256_hex(component))],
    });
    let config = Config::new(config.to_string().into_bytes(), CONFIG_MEDIA_TYPE.to_owned(), None);
    let layer = ImageLayer::new(component.to_vec(), LAYER_MEDIA_TYPE.to_owned(), None);
    let auth = auth_for(parsed.resolve_registry());
    let client = options.client();
    let failed = |e: oci_client::errors::OciDistributionError| SupplyError::Push {
        reference: reference.to_owned(),
        reason: e.to_string(),
    };
    client.push(&parsed, &[layer], config, &auth, None).await.map_err(failed)?;
    client.fetch_manifest_digest(&parsed, &auth).await.map_err(failed)
}

/// The credentials for `registry`: the docker config's (`$DOCKER_CONFIG/
/// config.json`, else `~/.docker/config.json`, an `auths` entry with
/// `auth` = base64 `user:password`), else [`USERNAME_ENV`] and
/// [`PASSWORD_ENV`], else anonymous. Never from a plugin config.
pub fn auth_for(registry: &str) -> RegistryAuth {
    if let Some((user, password)) = docker_config_auth(registry) {
        return RegistryAuth::Basic(user, password);
    }
    match (std::env::var(USERNAME_ENV), std::env::var(PASSWORD_ENV)) {
        (Ok(user), Ok(password)) => RegistryAuth::Basic(user, password),
        _ => RegistryAuth::Anonymous,
    }
}

fn docker_config_auth(registry: &str) -> Option<(String, String)> {
    let dir = std::env::var_os("DOCKER_CONFIG")
        .map(PathBuf::from)
        .or_else(|| std::env::var_os("HOME").map(|h| PathBuf::from(h).join(".docker")))?;
    let config: serde_json::Value = serde_json::from_slice(&std::fs::read(dir.join("config.json")).ok()?).ok()?;
    credentials_in(&config, registry)
}

/// The `user:password` of `registry` in a docker config document.
fn credentials_in(config: &serde_json::Value, registry: &str) -> Option<(String, String)> {
    use base64::Engine;
    let auths = config.get("auths")?.as_object()?;
    let entry = auths.get(registry).or_else(|| auths.get(&format!("https://{registry}")))?;
    let encoded = entry.get("auth")?.as_str()?;
    let decoded = base64::engine::general_purpose::STANDARD.decode(encoded).ok()?;
    let (user, password) =
        String::from_utf8(decoded).ok()?.split_once(':').map(|(u, p)| (u.to_owned(), p.to_owned()))?;
    Some((user, password))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn references_parse_and_bad_ones_say_why() {
        assert!(is_reference("oci://ghcr.io/acme/docs:1.0") && !is_reference("docs.wasm"));
        let r = parse("oci://127.0.0.1:5000/tools/docs:1.0").unwrap_or_else(|e| panic!("{e}"));
        assert_eq!((r.registry(), r.repository(), r.tag()), ("127.0.0.1:5000", "tools/docs", Some("1.0")));
        let err = parse("oci://UPPER/Case:tag").err().map(|e| e.to_string()).unwrap_or_default();
        assert!(err.starts_with("oci://UPPER/Case:tag is not an OCI reference: "), "{err}");
    }

    #[test]
    fn docker_config_credentials_are_read_by_registry() {
        let config = serde_json::json!({"auths": {"registry.example.com": {"auth": "YWxpY2U6czNjcmV0"}}});
        assert_eq!(credentials_in(&config, "registry.example.com"), Some(("alice".into(), "s3cret".into())));
        assert_eq!(credentials_in(&config, "other.example.com"), None);
    }
}
