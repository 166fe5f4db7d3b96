//! The audit trail (docs/supply-chain.md, "The audit trail"): every load of
//! a configured plugin, every pull, every upload and every refusal, with
//! its time, tenant, source, digest, signer and outcome, and every approval
//! decided through `POST /api/chat/approve` (who, which call, when), kept in the
//! service's store beside the uploads (so every replica writes to one
//! trail, and it survives a restart). Each tenant's trail keeps its newest
//! [`KEEP_PER_TENANT`] entries: a tenant that uploads in a loop grows it by
//! no more than that.
//!
//! A tenant reads its own entries (`GET /api/audit`, the console); the
//! operator reads every tenant's (`GET /audit` with the metrics token, and
//! `lovia audit`, which reads the store itself).

use super::stored::{PluginStore, PluginStoreError};
use serde::{Deserialize, Serialize};

/// Entries kept per tenant: the newest 10,000.
pub const KEEP_PER_TENANT: i64 = 10_000;
/// The most entries one read returns: 1,000.
pub const MAX_READ: usize = 1_000;

/// What happened.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
#[non_exhaustive]
pub enum AuditAction {
    /// A configured plugin was loaded at start (a file).
    Load,
    /// A configured plugin was pulled from a registry (or its cache).
    Pull,
    /// A tenant uploaded a component.
    Upload,
    /// A pending approval was decided: `source` names the session, call
    /// and tool, `outcome` the decision and who made it.
    Decide,
}

impl AuditAction {
    fn as_str(self) -> &'static str {
        match self {
            AuditAction::Load => "load",
            AuditAction::Pull => "pull",
            AuditAction::Upload => "upload",
            AuditAction::Decide => "decide",
        }
    }

    fn parse(text: &str) -> Option<AuditAction> {
        match text {
            "load" => Some(AuditAction::Load),
            "pull" => Some(AuditAction::Pull),
            "upload" => Some(AuditAction::Upload),
            "decide" => Some(AuditAction::Decide),
            _ => None,
        }
    }
}

/// One entry of the trail.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[non_exhaustive]
pub struct AuditEntry {
    /// When, in milliseconds since the Unix epoch.
    pub at_ms: u64,
    /// Whose.
    pub tenant: String,
    /// What.
    pub action: AuditAction,
    /// The file, the `oci://` reference, or `POST /api/plugins`.
    pub source: String,
    /// The component's SHA-256 (hex), when its bytes were read.
    pub digest: Option<String>,
    /// The trusted key that signed it (`name (fingerprint)`), when one did.
    pub signer: Option<String>,
    /// `ok`, or `refused: <why>` (the exact message the refusal gave); for
    /// [`AuditAction::Decide`], `approved`, `approved, always` or `denied`,
    /// then ` by API key sha256:<first 12 hex>` (which of the tenant's keys).
    pub outcome: String,
}

impl AuditEntry {
    /// An entry of now.
    pub(crate) fn now(tenant: &str, action: AuditAction, source: impl Into<String>) -> Self {
        Self {
            at_ms: super::sse::unix_ms(std::time::SystemTime::now()),
            tenant: tenant.to_owned(),
            action,
            source: source.into(),
            digest: None,
            signer: None,
            outcome: "ok".into(),
        }
    }

    pub(crate) fn digest(mut self, digest: Option<String>) -> Self {
        self.digest = digest;
        self
    }

    pub(crate) fn signer(mut self, signer: Option<String>) -> Self {
        self.signer = signer;
        self
    }

    pub(crate) fn outcome(mut self, outcome: String) -> Self {
        self.outcome = outcome;
        self
    }

    pub(crate) fn refused(mut self, why: &str) -> Self {
        // A refusal's text can hold what a tenant sent (a reference, a
        // plugin's name): bounded, as every log line is.
        self.outcome = format!("refused: {}", why.chars().take(1_000).collect::<String>());
        self
    }
}

type Row = (i64, String, String, String, Option<String>, Option<String>, String);

fn entry((at_ms, tenant, action, source, digest, signer, outcome): Row) -> Option<AuditEntry> {
    Some(AuditEntry {
        at_ms: u64::try_from(at_ms).unwrap_or_default(),
        tenant,
        action: AuditAction::parse(&action)?,
        source,
        digest,
        signer,
        outcome,
    })
}

impl PluginStore {
    /// Appends `entry` and drops the tenant's entries past [`KEEP_PER_TENANT`].
    pub(crate) async fn record(&self, entry: AuditEntry) -> Result<(), PluginStoreError> {
        let at = i64::try_from(entry.at_ms).unwrap_or(i64::MAX);
        match self {
            PluginStore::Memory(_) => {
                // A store of the caller's keeps no trail; the log line does.
                Ok(())
            }
            PluginStore::Sqlite { conn, path } => {
                let conn = conn.clone();
                super::stored::sqlite(path, move || {
                    let conn = conn.lock().unwrap_or_else(|e| e.into_inner());
                    conn.execute(
                        "INSERT INTO audit_log (at_ms, tenant, action, source, digest, signer, outcome)
                         VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7)",
                        rusqlite::params![
                            at,
                            entry.tenant,
                            entry.action.as_str(),
                            entry.source,
                            entry.digest,
                            entry.signer,
                            entry.outcome
                        ],
                    )?;
                    conn.execute(
                        "DELETE FROM audit_log WHERE tenant = ?1 AND id <= (
                             SELECT id FROM audit_log WHERE tenant = ?1 ORDER BY id DESC LIMIT 1 OFFSET ?2)",
                        rusqlite::params![entry.tenant, KEEP_PER_TENANT],
                    )?;
                    Ok(())
                })
                .await
            }
            PluginStore::Postgres(pg) => {
                pg.run(move |c| {
                    Box::pin(async move {
                        c.execute(
                            "INSERT INTO lovia_audit (at_ms, tenant, action, source, digest, signer, outcome)
                         VALUES ($1, $2, $3, $4, $5, $6, $7)",
                            &[
                                &at,
                                &entry.tenant,
                                &entry.action.as_str(),
                                &entry.source,
                                &entry.digest,
                                &entry.signer,
                                &entry.outcome,
                            ],
                        )
                        .await?;
                        c.execute(
                            "DELETE FROM lovia_audit WHERE tenant = $1 AND id <= (
                             SELECT id FROM lovia_audit WHERE tenant = $1 ORDER BY id DESC LIMIT 1 OFFSET $2)",
                            &[&entry.tenant, &KEEP_PER_TENANT],
                        )
                        .await?;
                        Ok(())
                    })
                })
                .await
            }
        }
    }

    /// The newest `limit` entries (at most [`MAX_READ`]), of `tenant` or
    /// of every tenant, newest first.
    pub(crate) async fn trail(&self, tenant: Option<&str>, limit: usize) -> Result<Vec<AuditEntry>, PluginStoreError> {
        let limit = i64::try_from(limit.min(MAX_READ)).unwrap_or(1);
        let tenant = tenant.map(str::to_owned);
        match self {
            PluginStore::Memory(_) => Ok(Vec::new()),
            PluginStore::Sqlite { conn, path } => {
                let conn = conn.clone();
                super::stored::sqlite(path, move || {
                    let conn = conn.lock().unwrap_or_else(|e| e.into_inner());
                    let mut query = conn.prepare(
                        "SELECT at_ms, tenant, action, source, digest, signer, outcome FROM audit_log
                         WHERE ?1 IS NULL OR tenant = ?1 ORDER BY id DESC LIMIT ?2",
                    )?;
                    let rows = query.query_map(rusqlite::params![tenant, limit], |r| {
                        Ok((r.get(0)?, r.get(1)?, r.get(2)?, r.get(3)?, r.get(4)?, r.get(5)?, r.get(6)?))
                    })?;
                    Ok(rows.filter_map(|r| r.ok().and_then(entry)).collect())
                })
                .await
            }
            PluginStore::Postgres(pg) => {
                pg.run(move |c| {
                    Box::pin(async move {
                        let rows = c
                            .query(
                                "SELECT at_ms, tenant, action, source, digest, signer, outcome FROM lovia_audit
                         WHERE $1::TEXT IS NULL OR tenant = $1 ORDER BY id DESC LIMIT $2",
                                &[&tenant, &limit],
                            )
                            .await?;
                        Ok(rows
                            .iter()
                            .filter_map(|r| {
                                entry((r.get(0), r.get(1), r.get(2), r.get(3), r.get(4), r.get(5), r.get(6)))
                            })
                            .collect())
                    })
                })
                .await
            }
        }
    }
}

/// Reads the trail of the store at `url` (`lovia audit`).
pub async fn read_trail(
    url: &lovia_runner::StoreUrl,
    tenant: Option<&str>,
    limit: usize,
) -> Result<Vec<AuditEntry>, PluginStoreError> {
    PluginStore::open(url, None).await?.trail(tenant, limit).await
}
