//! [`ServeError`]: why the service could not start.

use crate::{LeaseError, PluginStoreError, SharedCountError};
use lovia_host::error::LoadError;
use lovia_runner::StoreError;

/// Why the service could not start.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum ServeError {
    /// Code mode's engine did not compile (a tenant's agent has `code_mode`).
    #[error("code mode: {0}")]
    CodeMode(#[from] lovia_code::CodeModeError),
    /// A plugin failed to load.
    #[error("tenant {tenant}: {source}")]
    Load {
        /// The tenant whose plugin it is.
        tenant: String,
        /// The load error.
        source: LoadError,
    },
    /// An MCP server of the tenant did not start or list its tools.
    #[error("tenant {tenant}: {source}")]
    McpServer {
        /// The tenant.
        tenant: String,
        /// Why.
        source: lovia_mcp::source::SourceError,
    },
    /// Two plugins (or a plugin and an MCP server) of one tenant declare the same tool name.
    #[error("tenant {tenant}: {reason}")]
    Conflict {
        /// The tenant.
        tenant: String,
        /// Which name.
        reason: String,
    },
    /// A tenant's `[tenants.web]` table cannot be set up (a key variable
    /// that is not set, an endpoint that is not a URL).
    #[error("tenant {tenant}: [tenants.web]: web.{}: {source}", source.key())]
    Web {
        /// The tenant.
        tenant: String,
        /// What is wrong, naming the key.
        source: lovia_web::WebSectionError,
    },
    /// A tenant's workspace directory could not be created.
    #[error("tenant {tenant}: cannot create its workspace directory {path}: {source}")]
    Workspace {
        /// The tenant.
        tenant: String,
        /// The directory.
        path: std::path::PathBuf,
        /// The I/O error.
        source: std::io::Error,
    },
    /// A configured plugin could not be pulled (`oci://`) or was refused
    /// by `[signatures]`, or a key of `[signatures]` or of a tenant's
    /// `upload_signers` cannot be read.
    #[error("tenant {tenant}: {source}")]
    Supply {
        /// The tenant (`*` for the service's `[signatures]`).
        tenant: String,
        /// Why.
        source: lovia_supply::SupplyError,
    },
    /// A tenant's scripted model cannot be read: its file is missing or a
    /// reply in it is not one a script may have.
    #[error("tenant {tenant}: the scripted model: {reason}")]
    Model {
        /// The tenant.
        tenant: String,
        /// What is wrong, naming the reply and the key.
        reason: String,
    },
    /// A tenant sets `fuel_per_minute` on a host that does not meter fuel.
    #[error("tenant {tenant}: fuel_per_minute needs a host with fuel metering (HostConfig::fuel_metering)")]
    FuelMetering {
        /// The tenant.
        tenant: String,
    },
    /// The session store could not be opened.
    #[error(transparent)]
    Store(#[from] StoreError),
    /// The stored uploads could not be read.
    #[error(transparent)]
    Plugins(#[from] PluginStoreError),
    /// The run leases could not be opened.
    #[error(transparent)]
    Leases(#[from] LeaseError),
    /// The replicas' shared call counts could not be opened.
    #[error(transparent)]
    SharedCounts(#[from] SharedCountError),
    /// A tenant's `/mcp` could not be made.
    #[error("tenant {tenant}: /mcp: {source}")]
    Mcp {
        /// The tenant.
        tenant: String,
        /// What failed.
        source: lovia_mcp::NewServerError,
    },
    /// The MCP request states shared by the replicas could not be opened.
    #[error("MCP request states in {location}: {message}")]
    McpStates {
        /// The URL without its password.
        location: String,
        /// What failed.
        message: String,
    },
}
