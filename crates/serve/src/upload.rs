//! `POST /api/plugins`: a tenant adds a component. It is validated,
//! compiled and cached like any plugin, granted nothing, and its tools join
//! the tenant's (a name clash is a 409 and changes nothing). It is kept in
//! the store ([`stored`](super::stored)), so it survives a restart and every
//! replica loads it. Each tenant's uploads are bounded in number and in
//! bytes (`max_plugins`, `max_uploaded_bytes`), checked before the compile
//! and again in the store's transaction, so that one tenant cannot fill the
//! store or the service's memory with compiled code.

use super::audit::{AuditAction, AuditEntry};
use super::auth::Caller;
use super::stored::{NewPlugin, PluginStoreError, UploadLimits};
use crate::Service;
use crate::error::ServeError;
use crate::response::error;
use axum::Json;
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use bytes::Bytes;
use lovia_host::{Tool, ToolSource};
use lovia_supply::signature::{self, SignatureMode, SignaturePolicy, TrustedKey};
use serde_json::json;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use tokio::sync::{OwnedSemaphorePermit, Semaphore};

pub(crate) async fn upload(caller: Caller, body: Bytes) -> Response {
    let (service, tenant) = (caller.service(), caller.tenant());
    let limit = service.inner.limits.max_plugin_bytes;
    if body.len() > limit {
        return error(StatusCode::PAYLOAD_TOO_LARGE, &format!("a plugin may be at most {limit} bytes"));
    }
    if body.is_empty() {
        return error(StatusCode::BAD_REQUEST, "the body must be a .wasm component");
    }
    // Every upload that got this far is in the audit trail, accepted or not.
    let entry = AuditEntry::now(&tenant.name, AuditAction::Upload, "POST /api/plugins")
        .digest(Some(lovia_host::plugin::sha256_hex(&body)))
        .signer(tenant.uploads.policy.signer(&body));
    match accept(service, tenant, body).await {
        Ok(response) => {
            service.audit(entry).await;
            response
        }
        Err((status, message)) => {
            service.audit(entry.refused(&message)).await;
            error(status, &message)
        }
    }
}

/// The checks, the compile and the store of one upload: the response, or
/// the status and message of its refusal.
async fn accept(service: &Service, tenant: &crate::Tenant, body: Bytes) -> Result<Response, (StatusCode, String)> {
    // One upload compiles at a time per tenant, so a tenant cannot queue up
    // the compile slots that every tenant shares.
    let uploads = &tenant.uploads;
    let Ok(compiling) = uploads.compiling.clone().try_acquire_owned() else {
        return Err((
            StatusCode::TOO_MANY_REQUESTS,
            "an upload of this tenant is already compiling; retry when it is done".into(),
        ));
    };
    let limits = uploads.limits;
    // Checked before the compile, so that an upload over the bounds costs no
    // CPU; checked again when it is stored, where another replica's upload
    // of the same moment is seen.
    let (count, bytes) = service.inner.stores.plugins.usage(&tenant.name).await.map_err(|e| store_failed(&e))?;
    let refused = if count >= u64::from(limits.max_plugins) {
        Some(PluginStoreError::TooMany { count, limit: limits.max_plugins })
    } else if bytes.saturating_add(body.len() as u64) > limits.max_bytes {
        Some(PluginStoreError::TooLarge { after: bytes.saturating_add(body.len() as u64), limit: limits.max_bytes })
    } else {
        None
    };
    if let Some(refusal) = refused {
        return Err(refuse(service, &tenant.name, &refusal));
    }
    // Which components the tenant may add at all: decided on the bytes, for
    // the cost of a hash and a signature check, before any compile.
    if let Err(message) = uploads.policy.admit(&body) {
        service.inner.metrics.refuse(&tenant.name, "upload_policy");
        tracing::info!(tenant = %tenant.name, error = %message, "upload refused by the tenant's policy");
        return Err((StatusCode::FORBIDDEN, message));
    }
    // A tenant whose uploads keep failing after a compile stops getting
    // compiles for a while: each cost the service CPU.
    if let Some(wait) = uploads.rejected.full() {
        service.inner.metrics.refuse(&tenant.name, "max_rejected_uploads_per_hour");
        return Err((
            StatusCode::TOO_MANY_REQUESTS,
            format!(
                "this tenant's uploads were refused {} times in the last hour after a compile (max_rejected_uploads_per_hour); retry in {} s",
                uploads.rejected.limit,
                wait.as_secs().max(1)
            ),
        ));
    }
    let origin = format!("upload by {}", tenant.name);
    let host = service.inner.host.clone();
    let (compiled, _compiling) = compile_in_a_slot(
        host,
        &service.inner.uploads.compile_slots,
        Some(compiling),
        body.clone(),
        origin,
        tenant.fuel_cap,
    )
    .await;
    // A refused upload is counted against the tenant: it cost the service
    // a compile, and it leaves nothing behind (the host keeps the compiled
    // artifact only of a component that loaded).
    let rejected = |status: StatusCode, message: String| {
        service.inner.metrics.refuse(&tenant.name, "upload_rejected");
        uploads.rejected.note();
        tracing::info!(tenant = %tenant.name, %status, error = %message, "upload refused");
        (status, message)
    };
    let plugin = compiled.map_err(|message| rejected(StatusCode::BAD_REQUEST, message))?;
    let names: Vec<String> = Tool::from_plugin(&plugin).iter().map(|t| t.name().to_owned()).collect();
    // A clash with the configured plugins (the same on every replica) is
    // found here; one with another upload is found by the store.
    // The direct tools: a web tool's name is the tenant's too.
    if let Err(e) = tenant.direct_executor().tools().clone().add(ToolSource::Plugin, Tool::from_plugin(&plugin)) {
        return Err(rejected(StatusCode::CONFLICT, e.to_string()));
    }
    // So are the names of the tools its chats add (ask_human, run_code, the workspace's).
    if let Some(name) = names.iter().find(|n| tenant.reserved_name(n)) {
        return Err(rejected(
            StatusCode::CONFLICT,
            format!("the tool {name} clashes with the tool of that name this tenant's chats have"),
        ));
    }
    let new = NewPlugin {
        tenant: tenant.name.clone(),
        name: plugin.info().name.clone(),
        digest: plugin.digest().to_owned(),
        bytes: body,
        tools: names.clone(),
    };
    let id = service.inner.stores.plugins.insert(new, limits).await.map_err(|e| refuse(service, &tenant.name, &e))?;
    service.install(tenant, id, &plugin).map_err(|e| (StatusCode::CONFLICT, e.to_string()))?;
    tracing::info!(tenant = %tenant.name, plugin = ?plugin.info().name, digest = %plugin.digest(), id, "plugin uploaded");
    Ok((StatusCode::CREATED, Json(json!({"plugin": plugin.info().name, "digest": plugin.digest(), "tools": names})))
        .into_response())
}

/// The answer to a refusal of the store: 403 for the tenant's bounds (and
/// the metric), 409 for a tool-name clash, 503 when the store failed.
fn refuse(service: &Service, tenant: &str, refusal: &PluginStoreError) -> (StatusCode, String) {
    match refusal {
        PluginStoreError::TooMany { .. } => service.inner.metrics.refuse(tenant, "max_plugins"),
        PluginStoreError::TooLarge { .. } => service.inner.metrics.refuse(tenant, "max_uploaded_bytes"),
        PluginStoreError::Conflict { .. } => return (StatusCode::CONFLICT, refusal.to_string()),
        _ => return store_failed(refusal),
    }
    (StatusCode::FORBIDDEN, refusal.to_string())
}

fn store_failed(e: &PluginStoreError) -> (StatusCode, String) {
    tracing::error!(error = %e, "the plugin store failed");
    (StatusCode::SERVICE_UNAVAILABLE, "the plugin store is unreachable; retry later".into())
}

/// Compiling a component takes from milliseconds to seconds of CPU. The
/// host compiles on tokio's blocking pool, never on a service worker, and
/// at most [`COMPILE_SLOTS`](crate::COMPILE_SLOTS) compile at once across
/// tenants (later ones wait their turn), so uploads cannot take every core.
///
/// Both permits (the shared slot and the tenant's `compiling` one) move into
/// a task of its own: the load runs to its end even when the client hangs
/// up and this future is dropped, and until then it still counts. The tenant's
/// permit comes back with the result, so that the caller stores the upload
/// before another one of the tenant's can pass the quota check. Uploads of
/// other replicas, loaded from the store, come without one.
pub(crate) async fn compile_in_a_slot(
    host: lovia_host::Host,
    slots: &Arc<Semaphore>,
    compiling: Option<OwnedSemaphorePermit>,
    bytes: Bytes,
    origin: String,
    fuel_cap: Option<u64>,
) -> (Result<lovia_host::Plugin, String>, Option<OwnedSemaphorePermit>) {
    // Like a configured plugin of a tenant with `fuel_per_minute`, each call
    // gets its share of the minute's fuel, not all that is left of it.
    let mut config = lovia_host::plugin::config::PluginConfig::default();
    config.limits.fuel = fuel_cap;
    let Ok(slot) = slots.clone().acquire_owned().await else {
        return (Err("the service is shutting down".to_owned()), compiling);
    };
    let task = tokio::spawn(async move {
        let result = host.load_bytes_with(&bytes, &origin, config).await.map_err(|e| e.to_string());
        drop(slot);
        (result, compiling)
    });
    match task.await {
        Ok((result, compiling)) => (result, compiling),
        Err(e) => (Err(format!("the compile task failed: {e}")), None),
    }
}

/// What bounds one tenant's uploads.
pub(crate) struct TenantUploads {
    /// One upload of the tenant compiles at a time, so a tenant cannot queue
    /// up the compile slots that every tenant shares.
    pub(crate) compiling: Arc<Semaphore>,
    /// `max_plugins` and `max_uploaded_bytes`, checked against the store.
    pub(crate) limits: UploadLimits,
    /// Which components it may upload (`upload_digests`, `upload_signers`).
    pub(crate) policy: UploadPolicy,
    /// Its uploads refused after a compile in the last hour.
    pub(crate) rejected: RejectedUploads,
}

impl TenantUploads {
    /// The bounds of `tenant`'s config; `Err` when a key of its
    /// `upload_signers` cannot be read.
    pub(crate) fn new(tenant: &super::TenantConfig) -> Result<Self, lovia_supply::SupplyError> {
        Ok(Self {
            compiling: Arc::new(Semaphore::new(1)),
            limits: UploadLimits { max_plugins: tenant.max_plugins, max_bytes: tenant.max_uploaded_bytes },
            policy: UploadPolicy::new(&tenant.upload_digests, &tenant.upload_signers)?,
            rejected: RejectedUploads::new(tenant.max_rejected_uploads_per_hour),
        })
    }
}

/// Which components a tenant may upload: by digest (`upload_digests`) and
/// by signer (`upload_signers`); each list empty means any.
#[derive(Debug, Default)]
pub(crate) struct UploadPolicy {
    /// Lower-case hex digests.
    digests: Vec<String>,
    signers: Vec<TrustedKey>,
}

impl UploadPolicy {
    pub(crate) fn new(digests: &[String], signers: &[PathBuf]) -> Result<Self, lovia_supply::SupplyError> {
        Ok(Self {
            digests: digests.iter().filter_map(|d| lovia_host::plugin::config::pinned_sha256(d)).collect(),
            signers: signers.iter().map(|p| TrustedKey::from_file(p)).collect::<Result<_, _>>()?,
        })
    }

    /// The listed signer whose embedded signature `bytes` carry, if any
    /// signer is listed and one signed it.
    pub(crate) fn signer(&self, bytes: &[u8]) -> Option<String> {
        if self.signers.is_empty() {
            return None;
        }
        signature::verify(bytes, None, &self.signers).ok().map(TrustedKey::label)
    }

    /// Refuses `bytes` whose digest is not listed, or that no listed
    /// signer signed (an embedded signature), naming why.
    pub(crate) fn admit(&self, bytes: &[u8]) -> Result<(), String> {
        if !self.digests.is_empty() {
            let digest = lovia_host::plugin::sha256_hex(bytes);
            if !self.digests.contains(&digest) {
                return Err(format!("upload refused: sha256:{digest} is not one of this tenant's upload_digests"));
            }
        }
        if !self.signers.is_empty() {
            signature::verify(bytes, None, &self.signers).map_err(|reason| {
                format!("upload refused: {reason} (this tenant's uploads must be signed by one of its upload_signers)")
            })?;
        }
        Ok(())
    }
}

/// Loads a configured plugin of `tenant`: with `[signatures]` on, after its
/// signature (embedded, or detached in `path.sig`) passed, before the host
/// compiles it; a reference is pulled first. The load, or its refusal, goes
/// in the audit `trail`.
pub(crate) async fn load_configured(
    host: &lovia_host::Host,
    path: &Path,
    config: lovia_host::plugin::config::PluginConfig,
    supply: (&SignaturePolicy, &lovia_supply::oci::OciOptions),
    trail: &super::stored::PluginStore,
    tenant: &str,
) -> Result<lovia_host::Plugin, ServeError> {
    let origin = path.display().to_string();
    let action = if lovia_supply::oci::is_reference(&origin) { AuditAction::Pull } else { AuditAction::Load };
    let mut entry = AuditEntry::now(tenant, action, origin.clone());
    let loaded = load_checked(host, path, config, supply, tenant, &mut entry).await;
    let entry = match &loaded {
        Ok(plugin) => entry.digest(Some(plugin.digest().to_owned())),
        Err(e) => entry.refused(&e.to_string()),
    };
    if let Err(e) = trail.record(entry).await {
        tracing::warn!(%tenant, error = %e, "the audit trail could not be written");
    }
    loaded
}

async fn load_checked(
    host: &lovia_host::Host,
    path: &Path,
    config: lovia_host::plugin::config::PluginConfig,
    (policy, oci): (&SignaturePolicy, &lovia_supply::oci::OciOptions),
    tenant: &str,
    entry: &mut AuditEntry,
) -> Result<lovia_host::Plugin, ServeError> {
    let load_error = |source| ServeError::Load { tenant: tenant.to_owned(), source };
    let origin = path.display().to_string();
    if policy.mode == SignatureMode::Off && !lovia_supply::oci::is_reference(&origin) {
        return host.load_file_with(path, config).await.map_err(load_error);
    }
    let checked = lovia_supply::checked(path, policy, oci)
        .await
        .map_err(|source| ServeError::Supply { tenant: tenant.to_owned(), source })?;
    entry.digest = Some(lovia_host::plugin::sha256_hex(&checked.bytes));
    entry.signer = checked.verdict.signer().map(str::to_owned);
    host.load_bytes_with(&checked.bytes, &origin, config).await.map_err(load_error)
}

/// The uploads of one tenant refused after a compile in the last hour
/// (`max_rejected_uploads_per_hour`), in this replica.
#[derive(Debug)]
pub(crate) struct RejectedUploads {
    pub(crate) limit: u32,
    at: std::sync::Mutex<std::collections::VecDeque<std::time::Instant>>,
}

/// How long a refusal counts.
const REJECTION_WINDOW: std::time::Duration = std::time::Duration::from_secs(3600);

impl RejectedUploads {
    pub(crate) fn new(limit: u32) -> Self {
        Self { limit, at: std::sync::Mutex::default() }
    }

    /// `Some` of how long until the oldest refusal stops counting, when
    /// the tenant has used up its refusals.
    pub(crate) fn full(&self) -> Option<std::time::Duration> {
        let mut at = self.at.lock().unwrap_or_else(|p| p.into_inner());
        let now = std::time::Instant::now();
        while at.front().is_some_and(|t| now.duration_since(*t) >= REJECTION_WINDOW) {
            at.pop_front();
        }
        (at.len() >= self.limit as usize)
            .then(|| at.front().map_or(REJECTION_WINDOW, |t| REJECTION_WINDOW - now.duration_since(*t)))
    }

    pub(crate) fn note(&self) {
        let mut at = self.at.lock().unwrap_or_else(|p| p.into_inner());
        at.push_back(std::time::Instant::now());
        // Never more than the limit is needed to decide.
        while at.len() > self.limit as usize {
            at.pop_front();
        }
    }
}
