//! The tool table of a run: names are unique across every source (docs/semantics.md §15).

use super::tool::Tool;
use std::collections::HashMap;
use std::sync::Arc;

/// Where a tool came from, as the name-conflict message names it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum ToolSource {
    /// Tools the application listed.
    AgentTools,
    /// Tools of a plugin.
    Plugin,
    /// Workspace tools.
    Workspace,
    /// Handoff tools (`transfer_to_<slug>`).
    Handoff,
}

impl ToolSource {
    fn label(self) -> &'static str {
        match self {
            ToolSource::AgentTools => "agent.tools",
            ToolSource::Plugin => "plugin",
            ToolSource::Workspace => "agent.workspace",
            ToolSource::Handoff => "handoff",
        }
    }
}

/// Two tools share a name. `Display` is the spec's exact text, hint included.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error(
    "Tool name conflict for '{name}' from {}.\n  hint: Rename one tool or remove the duplicate. For MCP, set MCPServer.name to prefix a server's tools (e.g. name='fs' -> fs__read_file).",
    from.label()
)]
pub struct NameConflict {
    /// The shared name.
    pub name: String,
    /// The second (conflicting) source.
    pub from: ToolSource,
}

/// The tools of a run, by name, checked before anything runs.
#[derive(Debug, Clone, Default)]
pub struct Toolset {
    /// Shared with every call that runs them: a call never copies its tool.
    tools: Vec<Arc<Tool>>,
    index: HashMap<String, usize>,
}

impl Toolset {
    /// An empty table.
    pub fn new() -> Self {
        Self::default()
    }

    /// Adds `tools` from `source`; fails on the first name already present.
    /// Add sources in the spec's order: agent tools, plugins, workspace, handoffs.
    pub fn add(
        &mut self,
        source: ToolSource,
        tools: impl IntoIterator<Item = Tool>,
    ) -> Result<&mut Self, NameConflict> {
        for tool in tools {
            if self.index.contains_key(tool.name()) {
                return Err(NameConflict { name: tool.name().to_owned(), from: source });
            }
            self.index.insert(tool.name().to_owned(), self.tools.len());
            self.tools.push(Arc::new(tool));
        }
        Ok(self)
    }

    /// Adds `tools` from `source`, builder style.
    pub fn with(mut self, source: ToolSource, tools: impl IntoIterator<Item = Tool>) -> Result<Self, NameConflict> {
        self.add(source, tools)?;
        Ok(self)
    }

    /// The tool named `name`.
    pub fn get(&self, name: &str) -> Option<&Tool> {
        self.get_shared(name).map(|t| &**t)
    }

    /// The tool named `name`, as the calls that run it share it.
    pub(crate) fn get_shared(&self, name: &str) -> Option<&Arc<Tool>> {
        self.index.get(name).map(|&i| &self.tools[i])
    }

    /// All tools in insertion order.
    pub fn iter(&self) -> impl Iterator<Item = &Tool> {
        self.tools.iter().map(|t| &**t)
    }

    /// Replaces the tool of the same name (to override settings).
    pub fn replace(&mut self, tool: Tool) -> bool {
        match self.index.get(tool.name()) {
            Some(&i) => {
                self.tools[i] = Arc::new(tool);
                true
            }
            None => false,
        }
    }
}
