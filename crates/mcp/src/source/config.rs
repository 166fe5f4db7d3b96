//! The configuration of one MCP server as a tool source (`[[mcp_servers]]`),
//! and the bounds on what the server itself controls.

use super::sandbox::SandboxConfig;
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::time::Duration;

/// Most tools lovia takes from one server; the rest of a longer listing is
/// refused with a logged reason. Fixed: 256.
pub const MAX_TOOLS_PER_SERVER: usize = 256;
/// Most `tools/list` pages read from one server before the listing is cut
/// (a server that pages forever). Fixed: 32.
pub const MAX_LIST_PAGES: usize = 32;
/// Largest input schema taken from a server, as compact JSON. A larger one
/// refuses that tool. Fixed: 64 KiB.
pub const MAX_SCHEMA_BYTES: usize = 64 << 10;
/// Longest server name: the prefix `<name>__` and the tool's own name must
/// fit the providers' 64 characters together. Fixed: 32.
pub const MAX_SERVER_NAME: usize = 32;
/// Largest single message read from a server: one JSON-RPC line on stdio,
/// one HTTP response body or one SSE event over HTTP. A larger one ends the
/// session as a crash does (the call waiting for it gets an error result,
/// the server is restarted for the next call) before lovia holds more of
/// it. Fixed: 4 MiB.
pub const MAX_MESSAGE_BYTES: usize = 4 << 20;
/// Per-call timeout unless `timeout_ms` sets one. Default: 60 s.
pub const DEFAULT_TIMEOUT: Duration = Duration::from_secs(60);
/// How long starting a server (spawn or connect, `initialize`, the first
/// `tools/list`) may take before it counts as failed. Fixed: 30 s.
pub const START_TIMEOUT: Duration = Duration::from_secs(30);

/// One `[[mcp_servers]]` entry. Unknown keys are an error naming the key.
///
/// ```
/// let config: lovia_mcp::source::McpServerConfig = toml::from_str(r#"
///     name = "fs"
///     command = "/usr/local/bin/fs-server"
///     args = ["--root", "/srv/data"]
///     env_from = ["HOME"]
///     include = ["read_file"]
/// "#).unwrap();
/// assert_eq!(config.prefix(), "fs__");
/// assert!(config.check().is_ok());
/// ```
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
#[non_exhaustive]
pub struct McpServerConfig {
    /// The server's name: `^[a-zA-Z0-9_-]{1,32}$`. Required.
    pub name: String,
    /// The program to start (stdio transport). An absolute path unless
    /// `PATH` is passed in `env` or `env_from`. Exactly one of `command`
    /// and `url`.
    #[serde(default)]
    pub command: Option<String>,
    /// Its arguments. Default: none.
    #[serde(default)]
    pub args: Vec<String>,
    /// Its whole environment: nothing of lovia's is inherited except the
    /// variables `env_from` names. Default: empty.
    #[serde(default)]
    pub env: BTreeMap<String, String>,
    /// Variables of lovia's environment passed through by name; one that is
    /// not set is an error at start. Default: none.
    #[serde(default)]
    pub env_from: Vec<String>,
    /// The server's streamable HTTP endpoint (`http://` or `https://`).
    /// Exactly one of `command` and `url`.
    #[serde(default)]
    pub url: Option<String>,
    /// HTTP headers sent to a `url` server, each read from the named
    /// variable of lovia's environment (header name → variable name); one
    /// that is not set is an error at start. The value is never in the
    /// configuration and never logged. Default: none.
    #[serde(default)]
    pub headers_from_env: BTreeMap<String, String>,
    /// Put before each tool's name. Default (absent): `<name>__`; `""`: none.
    #[serde(default)]
    pub prefix: Option<String>,
    /// Only these tools (raw names, before the prefix). Default (absent): all.
    #[serde(default)]
    pub include: Option<Vec<String>>,
    /// Never these tools (raw names); applied after `include`. Default: none.
    #[serde(default)]
    pub exclude: Vec<String>,
    /// Per-attempt timeout of a call. Default: 60,000.
    #[serde(default)]
    pub timeout_ms: Option<u64>,
    /// Retries after a failed attempt (a transport failure or a timeout;
    /// an `isError` result is a result). Default: 0.
    #[serde(default)]
    pub retries: u32,
    /// Which calls of this server's tools ask for approval first: `true`
    /// (every one), `false`, or rules over the tool and its arguments
    /// ([`ApprovalNeed`](super::ApprovalNeed)). Default: false, as a plugin tool that declares
    /// nothing.
    #[serde(default)]
    pub needs_approval: super::approval::ApprovalNeed,
    /// Keeps the server's tools out of the model's tool list: the model
    /// finds them with `search_mcp_tools` and runs them with
    /// `call_mcp_tool` ([`DeferredMcpTools`](super::DeferredMcpTools)).
    /// Default: false.
    #[serde(default)]
    pub defer: bool,
    /// Output cap in characters. Default: the agent's
    /// (`max_tool_output_chars`, 200,000).
    #[serde(default)]
    pub max_output_chars: Option<u64>,
    /// The kernel confinement of a `command` server (docs/mcp.md, "The
    /// sandbox of a command server"). Default: confined, with no network
    /// and no path beyond the system's, its own working directory and its
    /// command's install directory.
    #[serde(default)]
    pub sandbox: SandboxConfig,
}

/// A configuration lovia refuses, with what to change.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum ConfigError {
    /// The server name is not `^[a-zA-Z0-9_-]{1,32}$`.
    #[error("mcp server name {name:?} must match ^[a-zA-Z0-9_-]{{1,32}}$")]
    Name {
        /// The name given.
        name: String,
    },
    /// Neither or both of `command` and `url`.
    #[error("mcp server '{server}': set exactly one of `command` (a process on stdio) and `url` (streamable HTTP)")]
    Transport {
        /// The server.
        server: String,
    },
    /// A key that belongs to the other transport.
    #[error("mcp server '{server}': `{key}` applies only to a server with `{needs}`")]
    Misplaced {
        /// The server.
        server: String,
        /// The key.
        key: &'static str,
        /// The transport key it needs.
        needs: &'static str,
    },
    /// The prefix has characters a tool name cannot have.
    #[error("mcp server '{server}': prefix {prefix:?} must match ^[a-zA-Z0-9_-]{{0,32}}$")]
    Prefix {
        /// The server.
        server: String,
        /// The prefix given.
        prefix: String,
    },
    /// A value that cannot be used as it is.
    #[error("mcp server '{server}': `{key}` {problem}")]
    Value {
        /// The server.
        server: String,
        /// The key.
        key: String,
        /// What is wrong.
        problem: String,
    },
    /// Two servers share a name.
    #[error("mcp server name '{name}' is used twice; server names must be unique")]
    Duplicate {
        /// The name.
        name: String,
    },
}

fn is_name_char(c: char) -> bool {
    c.is_ascii_alphanumeric() || c == '_' || c == '-'
}

impl McpServerConfig {
    /// A stdio server named `name` running `command`, with the defaults.
    pub fn command(name: impl Into<String>, command: impl Into<String>) -> Self {
        Self { name: name.into(), command: Some(command.into()), ..Self::default() }
    }

    /// A streamable HTTP server named `name` at `url`, with the defaults.
    pub fn url(name: impl Into<String>, url: impl Into<String>) -> Self {
        Self { name: name.into(), url: Some(url.into()), ..Self::default() }
    }

    /// The prefix of this server's tool names.
    pub fn prefix(&self) -> String {
        self.prefix.clone().unwrap_or_else(|| format!("{}__", self.name))
    }

    /// The per-attempt timeout.
    pub fn timeout(&self) -> Duration {
        self.timeout_ms.map_or(DEFAULT_TIMEOUT, Duration::from_millis)
    }

    /// Whether the raw tool name passes `include` and `exclude`.
    pub fn selects(&self, raw: &str) -> bool {
        self.include.as_ref().is_none_or(|names| names.iter().any(|n| n == raw))
            && !self.exclude.iter().any(|n| n == raw)
    }

    /// Refuses what cannot work before anything starts.
    pub fn check(&self) -> Result<(), ConfigError> {
        let server = || self.name.clone();
        if self.name.is_empty() || self.name.len() > MAX_SERVER_NAME || !self.name.chars().all(is_name_char) {
            return Err(ConfigError::Name { name: self.name.clone() });
        }
        match (&self.command, &self.url) {
            (Some(_), Some(_)) | (None, None) => return Err(ConfigError::Transport { server: server() }),
            (Some(command), None) => {
                if command.is_empty() {
                    return Err(ConfigError::Value {
                        server: server(),
                        key: "command".into(),
                        problem: "is empty".into(),
                    });
                }
                if !self.headers_from_env.is_empty() {
                    return Err(ConfigError::Misplaced { server: server(), key: "headers_from_env", needs: "url" });
                }
                if let Some((key, problem)) = self.sandbox.problem() {
                    return Err(ConfigError::Value { server: server(), key, problem });
                }
            }
            (None, Some(url)) => {
                if !(url.starts_with("http://") || url.starts_with("https://")) {
                    return Err(ConfigError::Value {
                        server: server(),
                        key: "url".into(),
                        problem: format!("is {url:?}; expected an http:// or https:// URL"),
                    });
                }
                for header in self.headers_from_env.keys() {
                    check_header(&self.name, header)?;
                }
                for (key, set) in [
                    ("args", !self.args.is_empty()),
                    ("env", !self.env.is_empty()),
                    ("env_from", !self.env_from.is_empty()),
                    ("sandbox", self.sandbox != SandboxConfig::default()),
                ] {
                    if set {
                        return Err(ConfigError::Misplaced { server: server(), key, needs: "command" });
                    }
                }
            }
        }
        let bad_var = |v: &str| v.is_empty() || v.contains('=') || v.contains('\0');
        for (key, vars) in [
            ("env", self.env.keys().map(String::as_str).collect::<Vec<_>>()),
            ("env_from", self.env_from.iter().map(String::as_str).collect()),
            ("headers_from_env", self.headers_from_env.values().map(String::as_str).collect()),
        ] {
            if let Some(v) = vars.into_iter().find(|v| bad_var(v)) {
                return Err(ConfigError::Value {
                    server: server(),
                    key: key.into(),
                    problem: format!("names the variable {v:?}; a variable name is not empty and has no '=' or NUL"),
                });
            }
        }
        if let Some(prefix) = &self.prefix
            && (prefix.len() > MAX_SERVER_NAME || !prefix.chars().all(is_name_char))
        {
            return Err(ConfigError::Prefix { server: server(), prefix: prefix.clone() });
        }
        if self.timeout_ms == Some(0) {
            return Err(ConfigError::Value {
                server: server(),
                key: "timeout_ms".into(),
                problem: "is 0; give a timeout of at least 1 ms".into(),
            });
        }
        Ok(())
    }
}

/// Headers the transport sets itself: a configured one would be refused on
/// every request.
const TRANSPORT_HEADERS: [&str; 7] =
    ["accept", "content-type", "content-length", "host", "mcp-session-id", "mcp-protocol-version", "last-event-id"];

/// A header name of `headers_from_env` is a valid HTTP header name that the
/// transport does not set itself.
fn check_header(server: &str, header: &str) -> Result<(), ConfigError> {
    let problem = if http::HeaderName::try_from(header).is_err() {
        "is not a valid HTTP header name".to_owned()
    } else if TRANSPORT_HEADERS.iter().any(|h| h.eq_ignore_ascii_case(header)) {
        "is set by the MCP transport itself".to_owned()
    } else {
        return Ok(());
    };
    Err(ConfigError::Value {
        server: server.to_owned(),
        key: "headers_from_env".into(),
        problem: format!("names the header {:?}, which {problem}", header.chars().take(80).collect::<String>()),
    })
}

/// Checks every server and that their names are unique.
pub fn check_all(servers: &[McpServerConfig]) -> Result<(), ConfigError> {
    let mut seen = std::collections::HashSet::new();
    for server in servers {
        server.check()?;
        if !seen.insert(server.name.as_str()) {
            return Err(ConfigError::Duplicate { name: server.name.clone() });
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(text: &str) -> Result<McpServerConfig, String> {
        toml::from_str(text).map_err(|e| e.to_string())
    }

    #[test]
    fn an_unknown_key_is_named() {
        let err = parse("name = \"fs\"\ncommand = \"/bin/x\"\nenviron = {}").expect_err("refused");
        assert!(err.contains("unknown field `environ`"), "{err}");
        assert!(err.contains("env_from"), "the allowed keys are listed: {err}");
    }

    #[test]
    fn transports_and_names_are_checked() {
        let ok = parse("name = \"fs\"\ncommand = \"/bin/x\"").expect("parses");
        assert_eq!(ok.check(), Ok(()));
        assert_eq!(ok.prefix(), "fs__");
        let both = parse("name = \"fs\"\ncommand = \"/bin/x\"\nurl = \"http://h/mcp\"").expect("parses");
        assert!(matches!(both.check(), Err(ConfigError::Transport { .. })));
        let bad = parse("name = \"f s\"\ncommand = \"/bin/x\"").expect("parses");
        assert!(matches!(bad.check(), Err(ConfigError::Name { .. })));
        let misplaced = parse("name = \"w\"\nurl = \"https://h/mcp\"\nargs = [\"x\"]").expect("parses");
        assert!(matches!(misplaced.check(), Err(ConfigError::Misplaced { key: "args", .. })));
        let header = parse("name = \"w\"\nurl = \"https://h/mcp\"\nheaders_from_env = { \"Bad Name\" = \"V\" }")
            .expect("parses");
        assert!(
            matches!(header.check(), Err(ConfigError::Value { ref problem, .. }) if problem.contains("not a valid"))
        );
        let reserved =
            parse("name = \"w\"\nurl = \"https://h/mcp\"\nheaders_from_env = { Accept = \"V\" }").expect("parses");
        assert!(
            matches!(reserved.check(), Err(ConfigError::Value { ref problem, .. }) if problem.contains("transport"))
        );
        let auth = parse("name = \"w\"\nurl = \"https://h/mcp\"\nheaders_from_env = { Authorization = \"V\" }")
            .expect("parses");
        assert_eq!(auth.check(), Ok(()));
        let none = parse("name = \"fs\"\ncommand = \"/bin/x\"\nprefix = \"\"").expect("parses");
        assert_eq!(none.prefix(), "");
        let twice = [ok.clone(), ok];
        assert!(matches!(check_all(&twice), Err(ConfigError::Duplicate { .. })));
    }

    #[test]
    fn a_bad_sandbox_key_or_value_is_named_with_the_allowed_ones() {
        let err = parse("name = \"fs\"\ncommand = \"/bin/x\"\nsandbox = { netwrk = true }").expect_err("refused");
        assert!(err.contains("unknown field `netwrk`"), "{err}");
        for allowed in ["mode", "read_only", "read_write", "network", "cpu_seconds", "open_files"] {
            assert!(err.contains(allowed), "{allowed} is listed: {err}");
        }
        let err = parse("name = \"fs\"\ncommand = \"/bin/x\"\nsandbox = { mode = \"none\" }").expect_err("refused");
        assert!(err.contains("unknown variant `none`") && err.contains("required") && err.contains("off"), "{err}");
        let relative =
            parse("name = \"fs\"\ncommand = \"/bin/x\"\nsandbox = { read_write = [\"data\"] }").expect("parses");
        assert!(
            matches!(relative.check(), Err(ConfigError::Value { ref key, .. }) if key == "sandbox.read_write"),
            "{:?}",
            relative.check()
        );
        let on_url = parse("name = \"w\"\nurl = \"https://h/mcp\"\nsandbox = { network = true }").expect("parses");
        assert!(matches!(on_url.check(), Err(ConfigError::Misplaced { key: "sandbox", .. })));
        let ok = parse("name = \"fs\"\ncommand = \"/bin/x\"\nsandbox = { read_only = [\"/srv\"], processes = 8 }")
            .expect("parses");
        assert_eq!(ok.check(), Ok(()));
    }

    #[test]
    fn include_then_exclude_on_raw_names() {
        let c = parse("name = \"s\"\ncommand = \"/x\"\ninclude = [\"a\", \"b\"]\nexclude = [\"b\"]").expect("parses");
        assert!(c.selects("a"));
        assert!(!c.selects("b"));
        assert!(!c.selects("c"));
    }
}
