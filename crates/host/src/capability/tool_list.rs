//! [`ToolList`]: a capability made of tools fixed when it is built (the
//! web tools, `ask_human`, code mode's `run_code`, the plugins a service
//! holds now, an application's own tools).

use super::{Capability, Needs};
use crate::exec::{Tool, ToolSource};

/// Fixed tools under one name and source, with optional instructions.
///
/// ```
/// use lovia_host::capability::{Capability, ToolList};
/// use lovia_host::{Tool, ToolOutput, ToolSource};
/// let ping = Tool::builder("ping")
///     .invoke(|_args, _ctx| async { Ok(ToolOutput::Text("pong".into())) })
///     .expect("a valid tool");
/// let list = ToolList::new("the ping tool", ToolSource::AgentTools, vec![ping]);
/// assert_eq!(list.tools().len(), 1);
/// ```
#[derive(Debug, Clone)]
pub struct ToolList {
    name: String,
    source: ToolSource,
    tools: Vec<Tool>,
    instructions: Option<String>,
    needs: Needs,
}

impl ToolList {
    /// `tools`, named `name` in messages, from `source`. It needs approvals
    /// when one of the tools may ask for one.
    pub fn new(name: impl Into<String>, source: ToolSource, tools: Vec<Tool>) -> Self {
        let gated = tools.iter().any(Tool::may_need_approval);
        let needs = if gated { Needs::NOTHING.approvals() } else { Needs::NOTHING };
        Self { name: name.into(), source, tools, instructions: None, needs }
    }

    /// Plugin tools (source `plugin`): the instructions are those of each
    /// plugin the tools come from, once per plugin, in tool order.
    pub fn plugins(name: impl Into<String>, tools: Vec<Tool>) -> Self {
        let mut seen: Vec<&str> = Vec::new();
        let mut parts: Vec<String> = Vec::new();
        for plugin in tools.iter().filter_map(Tool::plugin) {
            if seen.contains(&plugin.digest()) {
                continue;
            }
            seen.push(plugin.digest());
            parts.extend(plugin.info().instructions.clone().filter(|i| !i.trim().is_empty()));
        }
        let instructions = (!parts.is_empty()).then(|| parts.join("\n\n"));
        Self { instructions, ..Self::new(name, ToolSource::Plugin, tools) }
    }

    /// The same list with `instructions` as its section of the system
    /// message.
    #[must_use]
    pub fn with_instructions(mut self, instructions: impl Into<String>) -> Self {
        self.instructions = Some(instructions.into());
        self
    }

    /// The same list declaring `needs` besides its own.
    #[must_use]
    pub fn needing(mut self, needs: Needs) -> Self {
        self.needs = self.needs.and(needs);
        self
    }
}

impl Capability for ToolList {
    fn name(&self) -> String {
        self.name.clone()
    }
    fn source(&self) -> ToolSource {
        self.source.clone()
    }
    fn tools(&self) -> Vec<Tool> {
        self.tools.clone()
    }
    fn instructions(&self) -> Option<String> {
        self.instructions.clone()
    }
    fn needs(&self) -> Needs {
        self.needs
    }
}
