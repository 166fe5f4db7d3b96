//! The tenants' chat workspaces: one root per tenant and session,
//! `<workspaces_dir>/<tenant>/s-<session id>` (the prefix keeps an id such
//! as `..` a plain name), all of a tenant's under one
//! [`SharedBounds`] (bytes, files, commands running at once), each removed
//! once no run has used it for the tenant's `retention_secs`.

use crate::config::TenantWorkspace;
use lovia_workspace::{SharedBounds, ShellGrants, ShellSandbox, Workspace, WorkspaceSectionError};
use std::collections::HashMap;
use std::os::unix::fs::DirBuilderExt;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::{Duration, SystemTime};

/// The directory (and the name the model reads) of the tenant's `/mcp` root.
const MCP_ROOT: &str = "mcp";

/// How often the retention sweep runs, at most.
const SWEEP_EVERY: Duration = Duration::from_secs(60);

/// One tenant's workspaces.
#[derive(Debug)]
pub(crate) struct TenantWorkspaces {
    tenant: String,
    dir: PathBuf,
    config: TenantWorkspace,
    /// What a confined command may reach beyond its root, from the config.
    grants: ShellGrants,
    bounds: SharedBounds,
    /// Runs using each session's workspace now, by directory name.
    in_use: Mutex<HashMap<String, usize>>,
}

/// Why a tenant's workspaces cannot be used.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub(crate) enum WorkspaceError {
    /// A directory could not be created.
    #[error("cannot create the workspace directory {path}: {source}")]
    Create {
        /// The directory.
        path: PathBuf,
        /// The I/O error.
        source: std::io::Error,
    },
    /// A path of `shell_read_only` or `shell_read_write` cannot be granted.
    #[error("cannot grant the workspace shell {0}")]
    Grant(#[source] WorkspaceSectionError),
    /// A new session's workspace would pass the tenant's file bound.
    #[error("the tenant's workspaces hold {files} files and directories, the most allowed")]
    Full {
        /// The bound.
        files: u64,
    },
    /// The session's workspace could not be opened.
    #[error("cannot open the workspace of session {session}: {source}")]
    Open {
        /// The session.
        session: String,
        /// Why.
        source: lovia_workspace::ConfigError,
    },
}

/// A directory (and its parents) owned by this user, 0700.
fn private_dir(path: &Path) -> Result<(), WorkspaceError> {
    std::fs::DirBuilder::new()
        .recursive(true)
        .mode(0o700)
        .create(path)
        .map_err(|source| WorkspaceError::Create { path: path.to_owned(), source })
}

impl TenantWorkspaces {
    /// The workspaces of `tenant` under `root`; creates `<root>/<tenant>`.
    pub(crate) fn new(root: &Path, tenant: &str, config: &TenantWorkspace) -> Result<Arc<Self>, WorkspaceError> {
        let dir = root.join(tenant);
        private_dir(&dir)?;
        let grants = config.grants().map_err(WorkspaceError::Grant)?;
        let bounds = config.shared_bounds(&dir);
        let workspaces = Arc::new(Self {
            tenant: tenant.to_owned(),
            dir,
            config: config.clone(),
            grants,
            bounds,
            in_use: Mutex::default(),
        });
        if let Some(reason) = workspaces.unavailable_shell() {
            tracing::warn!(tenant, "the tenant's workspace shell tools are not offered: {reason}");
        }
        Ok(workspaces)
    }

    /// Why the shell tools are left out of this tenant's workspaces.
    fn unavailable_shell(&self) -> Option<String> {
        match self.config.shell_sandbox {
            ShellSandbox::Off => None,
            _ => lovia_confine::Confinement::check_supported().err().map(|e| e.to_string()),
        }
    }

    /// The directory name of `session`'s workspace.
    fn name(session: &str) -> String {
        format!("s-{session}")
    }

    /// Opens the workspace of a run of `session`: its root created if new,
    /// marked as used now and in use until the returned guard is dropped
    /// (which also closes it, ending its background processes).
    pub(crate) fn open(self: &Arc<Self>, session: &str) -> Result<OpenWorkspace, WorkspaceError> {
        self.open_dir(Self::name(session), session)
    }

    /// Opens the root of the tenant's `/mcp`, `<workspaces_dir>/<tenant>/mcp`,
    /// for as long as the service lives: one for every MCP client of the
    /// tenant, on both revisions (docs/mcp.md, "The workspace on `/mcp`").
    /// Its name has no `s-`, so no chat session has it and the retention
    /// sweep leaves it.
    pub(crate) fn open_for_mcp(self: &Arc<Self>) -> Result<OpenWorkspace, WorkspaceError> {
        self.open_dir(MCP_ROOT.to_owned(), MCP_ROOT)
    }

    /// Opens the workspace in directory `name`, named `shown` to the model.
    fn open_dir(self: &Arc<Self>, name: String, shown: &str) -> Result<OpenWorkspace, WorkspaceError> {
        let session = shown;
        let root = self.dir.join(&name);
        // A new session's directory counts against the tenant's file bound
        // too: new session ids cannot make directories without end.
        if !root.exists() && self.bounds.usage().files >= self.config.max_files {
            return Err(WorkspaceError::Full { files: self.config.max_files });
        }
        private_dir(&root)?;
        touch(&root);
        let workspace = (self.config)
            .builder(&root, self.grants.clone())
            .name(session)
            .shared_bounds(self.bounds.clone())
            .build()
            .map_err(|source| WorkspaceError::Open { session: session.to_owned(), source })?;
        *self.in_use.lock().unwrap_or_else(|p| p.into_inner()).entry(name.clone()).or_default() += 1;
        Ok(OpenWorkspace { workspace, owner: self.clone(), name, root })
    }

    /// Removes the session workspaces no run has used for `retention_secs`
    /// and none uses now.
    pub(crate) fn sweep(&self) {
        let retention = Duration::from_secs(self.config.retention_secs);
        let Ok(entries) = std::fs::read_dir(&self.dir) else { return };
        for entry in entries.flatten() {
            let name = entry.file_name().to_string_lossy().into_owned();
            let idle = entry
                .metadata()
                .and_then(|m| m.modified())
                .ok()
                .and_then(|t| SystemTime::now().duration_since(t).ok())
                .is_some_and(|age| age >= retention);
            if !idle || !name.starts_with("s-") {
                continue;
            }
            // Under the lock, so that no run opens it while it goes.
            let in_use = self.in_use.lock().unwrap_or_else(|p| p.into_inner());
            if in_use.get(&name).is_some_and(|n| *n > 0) {
                continue;
            }
            match std::fs::remove_dir_all(entry.path()) {
                Ok(()) => tracing::info!(tenant = %self.tenant, workspace = %name, "removed an idle session workspace"),
                Err(e) => {
                    tracing::warn!(tenant = %self.tenant, workspace = %name, error = %e, "cannot remove an idle session workspace")
                }
            }
            drop(in_use);
        }
    }

    /// Sweeps every tenant's workspaces periodically, while `service` lives.
    pub(crate) fn spawn_sweeper(all: Vec<Arc<TenantWorkspaces>>) {
        if all.is_empty() {
            return;
        }
        let every = all.iter().map(|w| Duration::from_secs(w.config.retention_secs)).min().unwrap_or(SWEEP_EVERY);
        let every = every.clamp(Duration::from_secs(1), SWEEP_EVERY);
        let weak: Vec<_> = all.iter().map(Arc::downgrade).collect();
        drop(all);
        tokio::spawn(async move {
            loop {
                tokio::time::sleep(every).await;
                let live: Vec<_> = weak.iter().filter_map(std::sync::Weak::upgrade).collect();
                if live.is_empty() {
                    return;
                }
                let _ = tokio::task::spawn_blocking(move || live.iter().for_each(|w| w.sweep())).await;
            }
        });
    }
}

/// Sets `dir`'s modification time to now: the retention counts from it.
fn touch(dir: &Path) {
    if let Ok(file) = std::fs::File::open(dir) {
        let _ = file.set_modified(SystemTime::now());
    }
}

/// A run's workspace; dropped when the run's task ends.
#[derive(Debug)]
pub(crate) struct OpenWorkspace {
    pub(crate) workspace: Workspace,
    owner: Arc<TenantWorkspaces>,
    name: String,
    root: PathBuf,
}

impl Drop for OpenWorkspace {
    fn drop(&mut self) {
        self.workspace.close();
        touch(&self.root);
        let mut in_use = self.owner.in_use.lock().unwrap_or_else(|p| p.into_inner());
        if let Some(n) = in_use.get_mut(&self.name) {
            *n = n.saturating_sub(1);
            if *n == 0 {
                in_use.remove(&self.name);
            }
        }
    }
}
