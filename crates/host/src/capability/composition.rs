//! [`Composition`]: the capabilities a door offers, composed one way for
//! every door.

use super::{Capability, Needs};
use crate::exec::{NameConflict, Tool, ToolSource, Toolset};
use std::sync::Arc;

/// What a door does to each tool it offers: a tenant's call quota with the
/// tool's own fuel cap, a script's settings for a tool. Called each time
/// the door builds its table, so a stateful policy it adds is made once
/// and cloned in, not made in the call.
pub type AdjustTool = Arc<dyn Fn(Tool) -> Tool + Send + Sync>;

/// Why capabilities cannot be composed.
#[derive(Debug, Clone, thiserror::Error)]
#[non_exhaustive]
pub enum ComposeError {
    /// Two capabilities have a tool of the same name.
    #[error("{capability}: {}", conflict.message())]
    Conflict {
        /// The capability whose tool came second.
        capability: String,
        /// The name and both sources.
        #[source]
        conflict: NameConflict,
    },
    /// The door cannot give a capability what it needs.
    #[error("{capability} needs {need}, which {door} does not have")]
    Unmet {
        /// The capability.
        capability: String,
        /// What it needs, in words.
        need: &'static str,
        /// The door, as a user names it.
        door: String,
    },
}

/// The capabilities of one door, in the order they were given.
///
/// Tools come in one table order at every door: by source (the
/// application's own tools and the host's single tools such as the web
/// tools, `ask_human` and `run_code`; then plugins; the workspace; MCP
/// servers), and in the order given within a source. The system message
/// takes each capability's section in the order given, the plugins'
/// last. Refreshing asks every capability.
///
/// ```
/// use lovia_host::capability::{Composition, ToolList};
/// use lovia_host::{Tool, ToolOutput, ToolSource};
/// use std::sync::Arc;
/// let tool = |name: &str| {
///     Tool::builder(name)
///         .invoke(|_args, _ctx| async { Ok(ToolOutput::Text(String::new())) })
///         .expect("a valid tool")
/// };
/// let mut door = Composition::new();
/// door.push(Arc::new(ToolList::new("the workspace", ToolSource::Workspace, vec![tool("read_file")])));
/// door.push(Arc::new(ToolList::new("ask_human", ToolSource::AgentTools, vec![tool("ask_human")])));
/// let table = door.toolset().expect("no name clash");
/// let names: Vec<&str> = table.iter().map(|t| t.name()).collect();
/// assert_eq!(names, ["ask_human", "read_file"]);
/// ```
#[derive(Clone, Default)]
pub struct Composition {
    parts: Vec<Arc<dyn Capability>>,
    adjust: Option<AdjustTool>,
}

impl std::fmt::Debug for Composition {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Composition")
            .field("capabilities", &self.parts.iter().map(|c| c.name()).collect::<Vec<_>>())
            .field("adjust", &self.adjust.is_some())
            .finish()
    }
}

/// A source's place in the table.
fn rank(source: &ToolSource) -> u8 {
    match source {
        ToolSource::AgentTools => 0,
        ToolSource::Plugin => 1,
        ToolSource::Workspace => 2,
        ToolSource::Mcp(_) => 3,
        ToolSource::Handoff => 4,
    }
}

impl Composition {
    /// No capabilities.
    pub fn new() -> Self {
        Self::default()
    }

    /// Adds `capability` after the others.
    pub fn push(&mut self, capability: Arc<dyn Capability>) -> &mut Self {
        self.parts.push(capability);
        self
    }

    /// Adds `capability` after the others, builder style.
    #[must_use]
    pub fn with(mut self, capability: Arc<dyn Capability>) -> Self {
        self.parts.push(capability);
        self
    }

    /// Passes every tool the composition offers through `adjust` (a door's
    /// own rule, such as a tenant's call quota). Default: none.
    pub fn set_adjust(&mut self, adjust: AdjustTool) -> &mut Self {
        self.adjust = Some(adjust);
        self
    }

    /// The capabilities, in the order given.
    pub fn capabilities(&self) -> &[Arc<dyn Capability>] {
        &self.parts
    }

    /// Whether there is none.
    pub fn is_empty(&self) -> bool {
        self.parts.is_empty()
    }

    /// The capabilities in table order (by source, stable).
    fn in_table_order(&self) -> Vec<&Arc<dyn Capability>> {
        let mut parts: Vec<&Arc<dyn Capability>> = self.parts.iter().collect();
        parts.sort_by_key(|c| rank(&c.source()));
        parts
    }

    /// The tools of `capability` as this door offers them.
    fn offered(&self, capability: &dyn Capability) -> Vec<Tool> {
        let tools = capability.tools();
        match &self.adjust {
            Some(adjust) => tools.into_iter().map(|t| adjust(t)).collect(),
            None => tools,
        }
    }

    /// Adds every capability's tools to `set`, in table order. The error is
    /// the spec's name conflict, for a run to report as it is.
    pub fn add_to(&self, set: &mut Toolset) -> Result<(), NameConflict> {
        for capability in self.in_table_order() {
            set.add(capability.source(), self.offered(capability.as_ref()))?;
        }
        Ok(())
    }

    /// The door's table: every capability's tools, in table order.
    pub fn toolset(&self) -> Result<Toolset, ComposeError> {
        let mut set = Toolset::new();
        for capability in self.in_table_order() {
            set.add(capability.source(), self.offered(capability.as_ref()))
                .map_err(|conflict| ComposeError::Conflict { capability: capability.name(), conflict })?;
        }
        Ok(set)
    }

    /// Every tool now, in table order, without checking names (for a
    /// program's declarations, built from a table already checked).
    pub fn tools(&self) -> Vec<Tool> {
        self.in_table_order().into_iter().flat_map(|c| self.offered(c.as_ref())).collect()
    }

    /// Brings every capability's tools up to date; true when one changed.
    pub async fn refresh(&self) -> bool {
        let mut changed = false;
        for capability in &self.parts {
            changed |= capability.refresh().await;
        }
        changed
    }

    /// A number that changes whenever a capability's tools change (the
    /// sum of their [`Capability::generation`]s).
    pub fn generation(&self) -> u64 {
        self.parts.iter().fold(0u64, |sum, c| sum.wrapping_add(c.generation()))
    }

    /// The sections of the system message: each capability's in the order
    /// given, the plugins' last; empty ones left out.
    pub fn instructions(&self) -> Vec<String> {
        let (plugins, others): (Vec<_>, Vec<_>) = self.parts.iter().partition(|c| c.source() == ToolSource::Plugin);
        others.into_iter().chain(plugins).filter_map(|c| c.instructions()).filter(|s| !s.trim().is_empty()).collect()
    }

    /// This turn's reminders, in the order given.
    pub fn reminders(&self) -> Vec<String> {
        self.parts.iter().filter_map(|c| c.reminder()).collect()
    }

    /// What the capabilities need, together.
    pub fn needs(&self) -> Needs {
        self.parts.iter().fold(Needs::NOTHING, |all, c| all.and(c.needs()))
    }

    /// Refuses a capability whose question channel `door` (as a user names
    /// it) cannot give: `offers` is what it has. A door without approvals
    /// is not refused: its gated calls are denied, as the semantics say.
    ///
    /// ```
    /// use lovia_host::capability::{Composition, Needs, ToolList};
    /// use lovia_host::{Tool, ToolOutput, ToolSource};
    /// use std::sync::Arc;
    /// let ask = Tool::builder("ask_human")
    ///     .invoke(|_args, _ctx| async { Ok(ToolOutput::Text(String::new())) })
    ///     .expect("a valid tool");
    /// let door = Composition::new().with(Arc::new(lovia_host::human::ask_human_capability(ask)));
    /// let refused = door.check_needs("a batch job", Needs::NOTHING).unwrap_err();
    /// assert_eq!(refused.to_string(), "ask_human needs a person who answers its questions, which a batch job does not have");
    /// assert!(door.check_needs("a chat", Needs::NOTHING.questions()).is_ok());
    /// ```
    pub fn check_needs(&self, door: &str, offers: Needs) -> Result<(), ComposeError> {
        for capability in &self.parts {
            let needs = capability.needs();
            if needs.questions && !offers.questions {
                let need = "a person who answers its questions";
                return Err(ComposeError::Unmet { capability: capability.name(), need, door: door.to_owned() });
            }
        }
        Ok(())
    }
}
