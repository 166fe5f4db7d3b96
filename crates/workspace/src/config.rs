//! How an application configures a workspace: its root, mode, path and
//! command rules, the shell's sandbox requirement and the limits. Every
//! default denies what it can: writes only in `coding` or `trusted` mode,
//! nothing outside the root without a rule or an approval, and no shell
//! unless the kernel can confine it.

use crate::Workspace;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

/// What a workspace lets the model do by default (docs/workspace.md, "Modes").
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "lowercase")]
#[non_exhaustive]
pub enum Mode {
    /// Reads inside the root; no writes, nothing outside, no shell.
    Readonly,
    /// Reads and writes inside the root; reads outside ask, writes outside
    /// are denied; commands ask. The default.
    #[default]
    Coding,
    /// Reads and writes inside the root and reads outside; writes outside ask;
    /// commands are allowed.
    Trusted,
}

impl Mode {
    /// The mode's name as configuration spells it: `readonly`, `coding`, `trusted`.
    pub fn name(self) -> &'static str {
        match self {
            Mode::Readonly => "readonly",
            Mode::Coding => "coding",
            Mode::Trusted => "trusted",
        }
    }

    /// Parses `readonly`, `coding` or `trusted`.
    pub fn parse(name: &str) -> Option<Mode> {
        match name {
            "readonly" => Some(Mode::Readonly),
            "coding" => Some(Mode::Coding),
            "trusted" => Some(Mode::Trusted),
            _ => None,
        }
    }

    /// Writes inside the root.
    pub(crate) fn write(self) -> Decision {
        match self {
            Mode::Readonly => Decision::Deny,
            Mode::Coding | Mode::Trusted => Decision::Allow,
        }
    }

    /// Reads outside the root.
    pub(crate) fn read_outside(self) -> Decision {
        match self {
            Mode::Readonly => Decision::Deny,
            Mode::Coding => Decision::Ask,
            Mode::Trusted => Decision::Allow,
        }
    }

    /// Writes outside the root.
    pub(crate) fn write_outside(self) -> Decision {
        match self {
            Mode::Readonly | Mode::Coding => Decision::Deny,
            Mode::Trusted => Decision::Ask,
        }
    }

    /// The verdict of a command no rule matches; `None`: no shell at all.
    pub(crate) fn shell_default(self) -> Option<Decision> {
        match self {
            Mode::Readonly => None,
            Mode::Coding => Some(Decision::Ask),
            Mode::Trusted => Some(Decision::Allow),
        }
    }
}

/// A policy decision. Ordered from least to most restrictive, so the most
/// restrictive of several is their maximum.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
#[non_exhaustive]
pub enum Decision {
    /// Go ahead.
    Allow,
    /// Ask through the ordinary approval channel.
    Ask,
    /// Refuse, with the reason.
    Deny,
}

/// What a path is used for.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum Op {
    /// Reading a file or listing a directory.
    Read,
    /// Creating or changing a file.
    Write,
}

/// A path rule: paths matching `pattern` get `decision` for the operations
/// in `ops`. Patterns starting with `/` or `~` match that absolute path and
/// its subtree; patterns containing `/` are relative to the root (and match
/// the subtree); a bare pattern (a glob such as `*.pem` allowed) matches any
/// segment of the resolved path, inside the root or outside it.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct PathRule {
    /// The pattern.
    pub pattern: String,
    /// The operations it covers.
    pub ops: Vec<Op>,
    /// What it decides.
    pub decision: Decision,
}

impl PathRule {
    /// A rule over `ops`.
    pub fn new(pattern: impl Into<String>, ops: impl IntoIterator<Item = Op>, decision: Decision) -> Self {
        PathRule { pattern: pattern.into(), ops: ops.into_iter().collect(), decision }
    }
}

/// A command rule: a segment that starts with `prefix` at a word boundary
/// (`git push` matches `git push origin`, not `git pushx`) gets `decision`.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct CommandRule {
    /// The prefix, compared after collapsing runs of whitespace.
    pub prefix: String,
    /// What it decides.
    pub decision: Decision,
}

impl CommandRule {
    /// A rule for commands starting with `prefix`.
    pub fn new(prefix: impl Into<String>, decision: Decision) -> Self {
        CommandRule { prefix: prefix.into(), decision }
    }
}

/// Decides one command segment before the command rules; `None` leaves it
/// to them. A decision it returns is final for that segment.
pub type CommandDecider = Arc<dyn Fn(&str) -> Option<Decision> + Send + Sync>;

/// A whole rule set, given at once instead of the shorthands
/// ([`WorkspaceBuilder::policy`]).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct WorkspacePolicy {
    /// Paths always denied (patterns as in [`PathRule`]). Default: none.
    pub denied_paths: Vec<String>,
    /// Path rules; the first whose ops cover the operation wins. Default: none.
    pub path_rules: Vec<PathRule>,
    /// Command rules; the first matching prefix wins. Default: none.
    pub command_rules: Vec<CommandRule>,
    /// The verdict of a command no rule matches; `None`: the mode's. Default: `None`.
    pub shell_default: Option<Decision>,
}

/// Whether the shell must run under kernel confinement: `required` or `off`.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "lowercase")]
#[non_exhaustive]
pub enum ShellSandbox {
    /// The shell tools are offered only where the kernel can confine them. The default.
    #[default]
    Required,
    /// The shell runs as an ordinary process (its own process group, the
    /// command policy, the environment allowlist). Must be chosen
    /// explicitly; it is logged when the workspace is built.
    Off,
}

/// What a confined shell command may reach beyond the root, its private
/// temporary directory and the system's read-only directories. Only the
/// shell is granted: the file tools stay under the path policy. Under
/// [`ShellSandbox::Off`] nothing is enforced, so grants mean nothing there.
/// Default: no network, no other directory.
///
/// ```
/// use lovia_workspace::ShellGrants;
/// // A build that fetches dependencies and reads a shared toolchain.
/// let grants = ShellGrants::default().network(true).read_only("/opt/toolchain");
/// # let _ = grants;
/// ```
#[derive(Debug, Clone, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct ShellGrants {
    /// TCP and UDP over IPv4 and IPv6, to any address, and the resolver's
    /// configuration. Default: false (only unix sockets).
    pub network: bool,
    /// Directories (or files) commands may read and execute. Default: none.
    pub read_only: Vec<PathBuf>,
    /// Directories (or files) commands may read, write and execute. Default: none.
    pub read_write: Vec<PathBuf>,
}

impl ShellGrants {
    /// Whether commands may use the network. Default: false.
    pub fn network(mut self, allowed: bool) -> Self {
        self.network = allowed;
        self
    }
    /// Adds a path commands may read. Default: none.
    pub fn read_only(mut self, path: impl Into<PathBuf>) -> Self {
        self.read_only.push(path.into());
        self
    }
    /// Adds a path commands may read and write. Default: none.
    pub fn read_write(mut self, path: impl Into<PathBuf>) -> Self {
        self.read_write.push(path.into());
        self
    }
}

/// The workspace's limits. Each default is the documented one (docs/workspace.md, "Limits").
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct Limits {
    /// Characters one `read_file` returns. Default: 50,000.
    pub read_chars: usize,
    /// Bytes read from one file (a prefix is read and the cut is said). Default: 10,000,000.
    pub read_bytes: u64,
    /// Characters kept per shell stream, and by a background process's tail buffer. Default: 30,000.
    pub shell_output_chars: usize,
    /// Files `grep_files` skips above this size in bytes. Default: 5,000,000.
    pub grep_file_bytes: u64,
    /// Characters shown per grep line. Default: 400.
    pub grep_line_chars: usize,
    /// Bytes one `grep_files` call reads in all, over every file it
    /// searches (a sparse file costs nothing on disk and all of this).
    /// Default: 50,000,000.
    pub grep_total_bytes: u64,
    /// Time one `grep_files` call may search. Default: 10 s.
    pub grep_time: Duration,
    /// `list_files` results when the model gives no `max_results`. Default: 500.
    pub list_results: usize,
    /// `grep_files` matches when the model gives no `max_matches`. Default: 100.
    pub grep_matches: usize,
    /// Directory entries one `list_files` or `grep_files` walks at most. Default: 100,000.
    pub walk_entries: usize,
    /// A shell command's timeout when the model gives none. Default: 300 s.
    pub shell_timeout: Duration,
    /// The longest timeout the model may ask for. Default: 1,800 s.
    pub max_shell_timeout: Duration,
    /// The largest image `view_image` returns, in bytes. Default: 5,242,880.
    pub image_bytes: u64,
    /// Background processes one session may hold (running or not yet read). Default: 8.
    pub background_processes: usize,
}

impl Default for Limits {
    fn default() -> Self {
        Limits {
            read_chars: 50_000,
            read_bytes: 10_000_000,
            shell_output_chars: 30_000,
            grep_file_bytes: 5_000_000,
            grep_line_chars: 400,
            grep_total_bytes: 50_000_000,
            grep_time: Duration::from_secs(10),
            list_results: 500,
            grep_matches: 100,
            walk_entries: 100_000,
            shell_timeout: Duration::from_secs(300),
            max_shell_timeout: Duration::from_secs(1800),
            image_bytes: 5_242_880,
            background_processes: 8,
        }
    }
}

/// Why a workspace could not be built.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum ConfigError {
    /// Both a whole policy and rule shorthands were given.
    #[error(
        "Pass either .policy(..) or the rule shorthands (.readable, .writable, .denied_path, .path_rule, .command_rule), not both."
    )]
    PolicyAndShorthands,
    /// The root could not be opened as a directory.
    #[error("the workspace root {root} cannot be opened: {source}")]
    Root {
        /// The root given.
        root: PathBuf,
        /// Why.
        #[source]
        source: std::io::Error,
    },
    /// A bare path pattern is not a valid glob.
    #[error("the path pattern '{pattern}' is not a valid glob: {message}")]
    Pattern {
        /// The pattern.
        pattern: String,
        /// The glob parser's message.
        message: String,
    },
}

/// Builds a [`Workspace`]; see [`Workspace::builder`].
#[must_use]
pub struct WorkspaceBuilder {
    pub(crate) root: PathBuf,
    pub(crate) name: Option<String>,
    pub(crate) mode: Mode,
    pub(crate) policy: Option<WorkspacePolicy>,
    pub(crate) shorthands: WorkspacePolicy,
    pub(crate) readable: Vec<String>,
    pub(crate) writable: Vec<String>,
    pub(crate) decider: Option<CommandDecider>,
    pub(crate) shell_sandbox: ShellSandbox,
    pub(crate) shell_grants: ShellGrants,
    pub(crate) limits: Limits,
    pub(crate) bounds: Option<crate::SharedBounds>,
    pub(crate) vision: bool,
}

impl std::fmt::Debug for WorkspaceBuilder {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("WorkspaceBuilder").field("root", &self.root).field("mode", &self.mode).finish_non_exhaustive()
    }
}

impl WorkspaceBuilder {
    pub(crate) fn new(root: PathBuf) -> Self {
        WorkspaceBuilder {
            root,
            name: None,
            mode: Mode::default(),
            policy: None,
            shorthands: WorkspacePolicy::default(),
            readable: Vec::new(),
            writable: Vec::new(),
            decider: None,
            shell_sandbox: ShellSandbox::default(),
            shell_grants: ShellGrants::default(),
            limits: Limits::default(),
            bounds: None,
            vision: true,
        }
    }

    /// The name the prompt gives the workspace. Default: the root's last component.
    pub fn name(mut self, name: impl Into<String>) -> Self {
        self.name = Some(name.into());
        self
    }

    /// The mode. Default: [`Mode::Coding`].
    pub fn mode(mut self, mode: Mode) -> Self {
        self.mode = mode;
        self
    }

    /// A whole rule set; not together with the shorthands below.
    pub fn policy(mut self, policy: WorkspacePolicy) -> Self {
        self.policy = Some(policy);
        self
    }

    /// Shorthand: a path always denied.
    pub fn denied_path(mut self, pattern: impl Into<String>) -> Self {
        self.shorthands.denied_paths.push(pattern.into());
        self
    }

    /// Shorthand: a path rule (after the earlier ones).
    pub fn path_rule(mut self, rule: PathRule) -> Self {
        self.shorthands.path_rules.push(rule);
        self
    }

    /// Shorthand: reads of `pattern` are allowed (after the path rules).
    pub fn readable(mut self, pattern: impl Into<String>) -> Self {
        self.readable.push(pattern.into());
        self
    }

    /// Shorthand: reads and writes of `pattern` are allowed (after the path rules).
    pub fn writable(mut self, pattern: impl Into<String>) -> Self {
        self.writable.push(pattern.into());
        self
    }

    /// Shorthand: a command rule (after the earlier ones).
    pub fn command_rule(mut self, rule: CommandRule) -> Self {
        self.shorthands.command_rules.push(rule);
        self
    }

    /// The verdict of a command no rule matches. Default: the mode's
    /// (`coding`: ask, `trusted`: allow, `readonly`: no shell).
    pub fn shell_default(mut self, decision: Decision) -> Self {
        self.shorthands.shell_default = Some(decision);
        self
    }

    /// A decider asked about each command segment before the rules.
    pub fn command_decider(mut self, decider: impl Fn(&str) -> Option<Decision> + Send + Sync + 'static) -> Self {
        self.decider = Some(Arc::new(decider));
        self
    }

    /// Whether the shell needs kernel confinement. Default: [`ShellSandbox::Required`].
    pub fn shell_sandbox(mut self, sandbox: ShellSandbox) -> Self {
        self.shell_sandbox = sandbox;
        self
    }

    /// What a confined command may reach beyond the root (network, other
    /// directories). Default: [`ShellGrants::default`], nothing.
    pub fn shell_grants(mut self, grants: ShellGrants) -> Self {
        self.shell_grants = grants;
        self
    }

    /// The limits. Default: [`Limits::default`].
    pub fn limits(mut self, limits: Limits) -> Self {
        self.limits = limits;
        self
    }

    /// Bounds this workspace shares with others (bytes and files under a
    /// common directory, commands running at once): checked before every
    /// write and command. Default: none, and then only [`Limits`] apply.
    pub fn shared_bounds(mut self, bounds: crate::SharedBounds) -> Self {
        self.bounds = Some(bounds);
        self
    }

    /// Whether the model reads images; `false` leaves `view_image` out. Default: true.
    pub fn vision(mut self, vision: bool) -> Self {
        self.vision = vision;
        self
    }

    /// Opens the root and checks the rules.
    pub fn build(self) -> Result<Workspace, ConfigError> {
        Workspace::from_builder(self)
    }

    /// The rule set: the whole policy, or the shorthands with `readable` and
    /// `writable` appended as allow rules after the path rules.
    pub(crate) fn rules(&self) -> Result<WorkspacePolicy, ConfigError> {
        let shorthands_given =
            self.shorthands != WorkspacePolicy::default() || !self.readable.is_empty() || !self.writable.is_empty();
        match &self.policy {
            Some(_) if shorthands_given => Err(ConfigError::PolicyAndShorthands),
            Some(policy) => Ok(policy.clone()),
            None => {
                let mut rules = self.shorthands.clone();
                for pattern in &self.readable {
                    rules.path_rules.push(PathRule::new(pattern.clone(), [Op::Read], Decision::Allow));
                }
                for pattern in &self.writable {
                    rules.path_rules.push(PathRule::new(pattern.clone(), [Op::Read, Op::Write], Decision::Allow));
                }
                Ok(rules)
            }
        }
    }
}
