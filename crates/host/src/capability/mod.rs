//! The seam between capabilities and doors (docs/architecture.md).
//!
//! A *capability* is one thing lovia offers beside an application's own
//! tools: a plugin, an MCP server, the workspace, the web tools,
//! `ask_human`, code mode. It is one value that provides its tools, brings
//! them up to date when its source changes, contributes its text for the
//! model, and declares what it needs from the door that offers it. A
//! *door* (`lovia call`, `lovia run`, `lovia mcp`, `lovia serve`'s routes,
//! an embedding application) composes the capabilities it was given into a
//! [`Composition`] and asks the composition, never the capabilities one by
//! one, for its table, its instructions and its needs. Wasmtime's `Linker`
//! and Spin's factors are the models: a capability knows nothing of doors,
//! and a door knows nothing of a capability beyond this trait.

mod composition;
mod tool_list;

pub use composition::{AdjustTool, ComposeError, Composition};
pub use tool_list::ToolList;

use crate::call::BoxFuture;
use crate::exec::{Tool, ToolSource};

/// One capability: its tools, their refresh, its text for the model and
/// what it needs from a door.
///
/// ```
/// use lovia_host::capability::{Capability, Composition, Needs};
/// use lovia_host::{Tool, ToolSource};
/// use std::sync::Arc;
///
/// /// A clock: no tools, one line of instructions.
/// #[derive(Debug)]
/// struct Clock;
/// impl Capability for Clock {
///     fn name(&self) -> String {
///         "the clock".into()
///     }
///     fn source(&self) -> ToolSource {
///         ToolSource::AgentTools
///     }
///     fn tools(&self) -> Vec<Tool> {
///         Vec::new()
///     }
///     fn instructions(&self) -> Option<String> {
///         Some("## Time\nAnswer in UTC.".into())
///     }
/// }
/// let mut composition = Composition::new();
/// composition.push(Arc::new(Clock));
/// assert_eq!(composition.instructions(), ["## Time\nAnswer in UTC."]);
/// assert_eq!(composition.needs(), Needs::default());
/// ```
pub trait Capability: Send + Sync + std::fmt::Debug {
    /// What it is, as a user names it: `plugin 'orders'`, `the workspace`,
    /// `MCP server 'fs'`, `ask_human`, `code mode`. Messages about it (a
    /// name conflict at start) lead with it.
    fn name(&self) -> String;
    /// Where its tools sit in a table (the order of
    /// [`Composition::toolset`]) and what a name conflict names.
    fn source(&self) -> ToolSource;
    /// Its tools as they are now.
    fn tools(&self) -> Vec<Tool>;
    /// Brings the tools up to date; true when they changed since the last
    /// call. A run calls it before each model turn and a door before it
    /// answers a listing; a failure keeps the old list. Default: the tools
    /// never change.
    fn refresh(&self) -> BoxFuture<'_, bool> {
        Box::pin(std::future::ready(false))
    }
    /// A number that changes whenever its tools change, for a door that
    /// keeps a table it built while another door refreshes the same
    /// capability (a service's direct route beside its chats). Default: 0,
    /// for tools that never change.
    fn generation(&self) -> u64 {
        0
    }
    /// Its section of the system message (the workspace's `## Workspace`,
    /// a plugin's instructions, the deferred MCP servers' section); MCP
    /// doors send the sections as the server's instructions. Asked on
    /// every model turn, so it may change. Default: none.
    fn instructions(&self) -> Option<String> {
        None
    }
    /// Text shown after the transcript on each model turn and never
    /// stored (the workspace's background processes). Default: none.
    fn reminder(&self) -> Option<String> {
        None
    }
    /// What it needs from a door. Default: nothing.
    fn needs(&self) -> Needs {
        Needs::default()
    }
}

/// What a capability needs from the door that offers it. A door that
/// cannot give one refuses the composition at start
/// ([`Composition::check_needs`]) rather than failing on the first call.
/// What it needs to exist (a workspace's root, an MCP server's command, a
/// search provider's key) is its configuration's business, checked when it
/// is built. Default: nothing.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct Needs {
    /// A person who answers questions (`ask_human`): a console, an MCP
    /// client's elicitation, a script or a terminal.
    pub questions: bool,
    /// Somebody who decides calls that need approval (a gated plugin tool,
    /// the workspace's writing shell); without one such a call is denied,
    /// which is correct but worth knowing at start.
    pub approvals: bool,
}

impl Needs {
    /// Needs nothing.
    pub const NOTHING: Needs = Needs { questions: false, approvals: false };

    /// Needs a person who answers questions.
    #[must_use]
    pub const fn questions(mut self) -> Self {
        self.questions = true;
        self
    }

    /// Needs somebody who decides approvals.
    #[must_use]
    pub const fn approvals(mut self) -> Self {
        self.approvals = true;
        self
    }

    /// Both sets of needs.
    #[must_use]
    pub const fn and(self, other: Needs) -> Needs {
        Needs { questions: self.questions || other.questions, approvals: self.approvals || other.approvals }
    }
}

/// A plugin: its tools (source `plugin`) and its instructions.
impl Capability for crate::Plugin {
    fn name(&self) -> String {
        format!("plugin '{}'", self.info().name)
    }
    fn source(&self) -> ToolSource {
        ToolSource::Plugin
    }
    fn tools(&self) -> Vec<Tool> {
        Tool::from_plugin(self)
    }
    fn instructions(&self) -> Option<String> {
        self.info().instructions.clone()
    }
    fn needs(&self) -> Needs {
        let gated = self.tools().any(|spec| spec.approval != crate::ApprovalMode::Never);
        if gated { Needs::NOTHING.approvals() } else { Needs::NOTHING }
    }
}
