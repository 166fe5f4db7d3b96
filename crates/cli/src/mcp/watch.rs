//! `lovia mcp --watch`: polls the metadata of the plugin files and of their
//! configs (the `.toml` beside each, or `--config`) and, when a plugin or
//! its config has changed and then stayed the same for one poll (so a file
//! still being written is not loaded), reloads the plugin with its config
//! read again, and swaps the served catalog and executor whole
//! ([`McpServer::replace`]), which announces `notifications/tools/list_changed`.
//!
//! Polling rather than a file-watcher crate: nothing in the workspace
//! watches files yet, a poll of a few `stat`s every 500 ms costs nothing, and
//! it sees a file replaced by a rename (an editor's save, `cp` over a
//! symlink target) the same way as one written in place.

use super::{Served, toolset};
use lovia_host::{ExecSettings, Executor, Host};
use lovia_mcp::McpServer;
use std::os::unix::fs::MetadataExt;
use std::path::Path;
use std::time::{Duration, SystemTime};

/// How often the plugin files are looked at.
pub(crate) const POLL: Duration = Duration::from_millis(500);

/// What identifies one version of a file without reading it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Stamp {
    len: u64,
    modified: Option<SystemTime>,
    inode: u64,
}

fn stamp(path: &Path) -> Option<Stamp> {
    let meta = std::fs::metadata(path).ok()?;
    Some(Stamp { len: meta.len(), modified: meta.modified().ok(), inode: meta.ino() })
}

/// One version of a plugin and its config: the plugin's stamp and its
/// config's (none when there is no such file: a `.toml` beside the plugin
/// that appears is a change too).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Version {
    plugin: Stamp,
    config: Option<Stamp>,
}

fn version(served: &Served) -> Option<Version> {
    Some(Version { plugin: stamp(&served.path)?, config: served.config_file.path().and_then(stamp) })
}

/// One watched file: the version served, and the one seen last.
struct Watched {
    served: Served,
    /// The version loaded, or the one that last failed to load: it is not
    /// tried again until a file changes.
    tried: Option<Version>,
    /// The version seen at the previous poll, when it differed from `tried`.
    seen: Option<Version>,
}

/// Polls until the process ends. Every failure is logged on stderr and
/// keeps what is served.
pub(crate) async fn watch(
    host: Host,
    served: Vec<Served>,
    settings: ExecSettings,
    server: McpServer,
    supply: crate::supply::Supply,
) {
    let mut files: Vec<Watched> =
        served.into_iter().map(|served| Watched { tried: version(&served), seen: None, served }).collect();
    let mut ticks = tokio::time::interval(POLL);
    ticks.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        ticks.tick().await;
        let mut reloaded = Vec::new();
        for file in &mut files {
            let now = version(&file.served);
            if now.is_none() || now == file.tried {
                // Gone for now (a rename in progress) or unchanged.
                file.seen = None;
                continue;
            }
            if now != file.seen {
                // Changed since the last poll: maybe still being written.
                file.seen = now;
                continue;
            }
            // The same for one whole poll: load it.
            file.tried = now;
            file.seen = None;
            let path = file.served.path.clone();
            let loaded = match file.served.config_file.read() {
                Ok(config) => supply.load(&host, &path, config).await.map_err(|e| e.message),
                Err(e) => Err(e.to_string()),
            };
            match loaded {
                Ok(plugin) => reloaded.push((path, std::mem::replace(&mut file.served.plugin, plugin))),
                Err(e) => {
                    eprintln!("lovia mcp: {}: not reloaded, the old version is still served: {e}", path.display())
                }
            }
        }
        if reloaded.is_empty() {
            continue;
        }
        let served: Vec<&Served> = files.iter().map(|f| &f.served).collect();
        let swapped = toolset(&served).and_then(|(tools, names)| {
            server
                .replace(Executor::new(tools, settings.clone()), names)
                .map_err(|e| crate::CliError::new(e.to_string()))
        });
        match swapped {
            Ok(()) => {
                for (path, _) in &reloaded {
                    eprintln!("lovia mcp: {} reloaded; {} tools served", path.display(), server.tools().len());
                }
            }
            Err(e) => {
                // A new version that cannot be served beside the others (a
                // tool name taken, say): put the old ones back.
                eprintln!("lovia mcp: not reloaded, the old versions are still served: {}", e.message);
                for (path, old) in reloaded {
                    if let Some(file) = files.iter_mut().find(|f| f.served.path == path) {
                        file.served.plugin = old;
                    }
                }
            }
        }
    }
}
