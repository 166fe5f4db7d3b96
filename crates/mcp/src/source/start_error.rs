//! [`StartError`]: why a server could not be started or reached, whichever
//! way it is reached (a process, a URL); its own file so that the
//! connection and the two ways of reaching a server depend on it, not on
//! each other.

/// Why a server could not be started or reached.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum StartError {
    /// A variable that `env_from` or `headers_from_env` names is not set.
    #[error("mcp server '{server}': the environment variable {variable} is not set (named in `{key}`)")]
    MissingVariable {
        /// The server.
        server: String,
        /// The variable.
        variable: String,
        /// The key that names it.
        key: &'static str,
    },
    /// The process did not start.
    #[error("mcp server '{server}': cannot start {command:?}: {reason}")]
    Spawn {
        /// The server.
        server: String,
        /// The command.
        command: String,
        /// What the operating system said.
        reason: String,
    },
    /// The server's sandbox is required (the default) and could not be
    /// installed: the kernel cannot confine (no Landlock ABI 6 or no
    /// seccomp), or a grant cannot be made (a path that does not exist). The
    /// server is not started; it never runs with less confinement than asked.
    #[error(
        "mcp server '{server}': not started, because it cannot be confined: {reason} (sandbox.mode is \"required\")"
    )]
    Confine {
        /// The server.
        server: String,
        /// What the confinement reported.
        reason: String,
    },
    /// The session did not start (`initialize` failed or timed out).
    #[error("mcp server '{server}': the MCP session did not start: {reason}")]
    Handshake {
        /// The server.
        server: String,
        /// What went wrong.
        reason: String,
    },
    /// A header of `headers_from_env` cannot be sent: its variable's value
    /// is not a valid header value (the value is never shown).
    #[error("mcp server '{server}': the value of {variable} is not a valid value for the header {header}")]
    Header {
        /// The server.
        server: String,
        /// The header.
        header: String,
        /// The variable that holds its value.
        variable: String,
    },
    /// The HTTP client for a `url` server could not be set up.
    #[error("mcp server '{server}': {reason}")]
    Connect {
        /// The server.
        server: String,
        /// Why.
        reason: String,
    },
}
