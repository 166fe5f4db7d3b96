//! The workspace tools: files and a shell a model can use over one root
//! directory, judged by a path and command policy and confined by a
//! directory capability (docs/workspace.md).
//!
//! ```no_run
//! # fn demo() -> Result<(), lovia_workspace::ConfigError> {
//! use lovia_workspace::{Mode, Workspace};
//! let workspace = Workspace::builder("/srv/project").mode(Mode::Coding).denied_path(".env").build()?;
//! let tools = workspace.tools(); // add them to the agent's toolset
//! let prompt = workspace.prompt_fragment(); // after the agent's instructions
//! # let _ = (tools, prompt); Ok(())
//! # }
//! ```

/// docs/workspace.md, whose Rust snippets rustdoc compiles as this crate's
/// doctests, so a snippet that drifts from the API fails the build.
#[cfg(doctest)]
#[doc = include_str!("../../../docs/workspace.md")]
mod workspace_docs {}

mod bounds;
mod config;
mod fs;
mod output;
mod policy;
mod process;
mod section;
mod shell;
mod text;
mod tools;

pub use bounds::{SharedBounds, Usage};
pub use config::{
    CommandDecider, CommandRule, ConfigError, Decision, Limits, Mode, Op, PathRule, ShellGrants, ShellSandbox,
    WorkspaceBuilder, WorkspacePolicy,
};
pub use section::{WorkspaceSection, WorkspaceSectionError};
pub use shell::ShellError;
pub use text::no_workspace;

/// Every tool the bundle can offer, in its order: a host that adds the
/// bundle beside other tools checks their names against these.
pub const TOOL_NAMES: [&str; 9] = [
    "read_file",
    "view_image",
    "list_files",
    "grep_files",
    "write_file",
    "edit_file",
    "shell",
    "read_process_output",
    "kill_process",
];

use policy::PathPolicy;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

/// One workspace session: a root, its policy, and the background processes
/// of the run that uses it. Cheap to clone; the clones share the session.
/// The session ends when [`Workspace::close`] is called or the last clone
/// and tool are dropped; either kills its background processes.
#[derive(Clone)]
pub struct Workspace {
    session: Arc<Session>,
}

impl std::fmt::Debug for Workspace {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Workspace")
            .field("id", &self.session.id)
            .field("root", &self.session.paths.root())
            .field("mode", &self.session.paths.mode())
            .finish_non_exhaustive()
    }
}

/// What the tools share.
pub(crate) struct Session {
    pub(crate) id: String,
    pub(crate) name: String,
    pub(crate) paths: PathPolicy,
    pub(crate) files: fs::Files,
    pub(crate) rules: WorkspacePolicy,
    pub(crate) decider: Option<CommandDecider>,
    pub(crate) shell_sandbox: ShellSandbox,
    pub(crate) shell_grants: ShellGrants,
    pub(crate) limits: Limits,
    /// Bounds shared with other workspaces (a tenant's), if any.
    pub(crate) bounds: Option<SharedBounds>,
    pub(crate) vision: bool,
    pub(crate) closed: AtomicBool,
    pub(crate) approvals: tools::AskedCalls,
    pub(crate) processes: process::Processes,
}

impl Session {
    /// The verdict of a command's text before its path claims: the mode's
    /// (or the configured) default when no rule matches.
    pub(crate) fn shell_default(&self) -> Option<Decision> {
        self.rules.shell_default.or(self.paths.mode().shell_default())
    }
}

impl Drop for Session {
    fn drop(&mut self) {
        self.processes.kill_all();
    }
}

impl Workspace {
    /// Starts a workspace over `root` (the directory must exist).
    pub fn builder(root: impl Into<PathBuf>) -> WorkspaceBuilder {
        WorkspaceBuilder::new(root.into())
    }

    pub(crate) fn from_builder(builder: WorkspaceBuilder) -> Result<Workspace, ConfigError> {
        let rules = builder.rules()?;
        let root =
            builder.root.canonicalize().map_err(|source| ConfigError::Root { root: builder.root.clone(), source })?;
        let files = fs::Files::open(&root).map_err(|source| ConfigError::Root { root: root.clone(), source })?;
        let paths = PathPolicy::new(&root, builder.mode, &rules)?;
        let name = builder.name.clone().unwrap_or_else(|| paths.root_name().to_string_lossy().into_owned());
        let mut id = [0u8; 4];
        let _ = getrandom::fill(&mut id);
        let session = Session {
            id: hex::encode(id),
            name,
            paths,
            files,
            rules,
            decider: builder.decider,
            shell_sandbox: builder.shell_sandbox,
            shell_grants: builder.shell_grants,
            limits: builder.limits,
            bounds: builder.bounds,
            vision: builder.vision,
            closed: AtomicBool::new(false),
            approvals: tools::AskedCalls::default(),
            processes: process::Processes::default(),
        };
        let workspace = Workspace { session: Arc::new(session) };
        if workspace.session.shell_default().is_some() {
            match workspace.unavailable_reason() {
                Some(reason) => tracing::warn!(root = %root.display(), "workspace shell not offered: {reason}"),
                None if workspace.session.shell_sandbox == ShellSandbox::Off => tracing::warn!(
                    root = %root.display(),
                    "workspace shell runs without kernel confinement (shell_sandbox = \"off\")"
                ),
                None => {}
            }
        }
        Ok(workspace)
    }

    /// The session's id, as `Workspace session <id> is closed.` names it.
    pub fn id(&self) -> &str {
        &self.session.id
    }

    /// The canonical root.
    pub fn root(&self) -> &Path {
        self.session.paths.root()
    }

    /// The mode.
    pub fn mode(&self) -> Mode {
        self.session.paths.mode()
    }

    /// Why the shell tools are not offered although the policy allows a
    /// shell (kernel confinement required and unavailable); `None` when
    /// they are offered or the policy allows no shell.
    pub fn unavailable_reason(&self) -> Option<String> {
        self.session.shell_default()?;
        shell::unavailable(self.session.shell_sandbox)
    }

    /// The bundle: `read_file`, `view_image` (left out without vision),
    /// `list_files`, `grep_files`; `write_file` and `edit_file` unless every
    /// write is denied; `shell`, `read_process_output` and `kill_process`
    /// when the policy allows a shell and it can run.
    pub fn tools(&self) -> Vec<lovia_host::Tool> {
        tools::bundle(&self.session)
    }

    /// The `## Workspace` section that follows the agent's instructions.
    pub fn prompt_fragment(&self) -> String {
        let s = &self.session;
        let mut text = format!(
            "## Workspace\nYou work in a workspace named '{}'. Its root directory is '.' — relative paths start there, and the file tools and the shell take paths relative to it.",
            s.name
        );
        text.push('\n');
        text.push_str(match s.paths.mode() {
            Mode::Readonly => {
                "You can read files inside the workspace. Writing files and reading or writing outside the workspace are not permitted."
            }
            Mode::Coding => {
                "You can read and write files inside the workspace. Reading outside it needs the user's approval; writing outside it is not permitted."
            }
            Mode::Trusted => {
                "You can read and write files inside the workspace and read outside it. Writing outside it needs the user's approval."
            }
        });
        if !s.rules.denied_paths.is_empty() {
            text.push_str(&format!(" These paths are always denied: {}.", s.rules.denied_paths.join(", ")));
        }
        text.push('\n');
        let shell = if self.unavailable_reason().is_some() { None } else { s.shell_default() };
        text.push_str(match shell {
            None => "There is no shell in this workspace.",
            Some(Decision::Allow) => {
                "Shell commands run in the workspace unless a rule denies them or asks the user first; background processes end with the session."
            }
            Some(Decision::Ask) => {
                "Shell commands need the user's approval unless a rule allows them; background processes end with the session."
            }
            Some(Decision::Deny) => "Shell commands are denied unless a rule allows them.",
        });
        text
    }

    /// The reminder of background processes the model sees each turn (never
    /// stored in the transcript); `None` when there are none to mention.
    pub fn reminder(&self) -> Option<String> {
        self.session.processes.reminder()
    }

    /// Ends the session: background processes are killed and every later
    /// call fails with `Workspace session <id> is closed.`
    pub fn close(&self) {
        self.session.closed.store(true, Ordering::SeqCst);
        self.session.processes.kill_all();
    }
}

/// The workspace as a capability: its tools, after the plugins' in a
/// table; its `## Workspace` section first after an agent's instructions;
/// each turn the reminder of its background processes. It needs somebody
/// who decides approvals when a tool may ask (reading outside the root,
/// a shell command a rule asks about).
impl lovia_host::Capability for Workspace {
    fn name(&self) -> String {
        "the workspace".into()
    }
    fn source(&self) -> lovia_host::ToolSource {
        lovia_host::ToolSource::Workspace
    }
    fn tools(&self) -> Vec<lovia_host::Tool> {
        Workspace::tools(self)
    }
    fn instructions(&self) -> Option<String> {
        Some(self.prompt_fragment())
    }
    fn reminder(&self) -> Option<String> {
        Workspace::reminder(self)
    }
    fn needs(&self) -> lovia_host::capability::Needs {
        let gated = Workspace::tools(self).iter().any(lovia_host::Tool::may_need_approval);
        let nothing = lovia_host::capability::Needs::NOTHING;
        if gated { nothing.approvals() } else { nothing }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_full_bundle_is_tool_names_in_order() {
        let root = tempfile::tempdir().expect("tempdir");
        let workspace = Workspace::builder(root.path())
            .mode(Mode::Trusted)
            .shell_sandbox(ShellSandbox::Off)
            .build()
            .expect("build");
        let names: Vec<String> = workspace.tools().iter().map(|t| t.name().to_owned()).collect();
        assert_eq!(names, TOOL_NAMES);
    }
}
