//! The tool table of a run: names are unique across every source (docs/semantics.md §15).

use super::tool::Tool;
use std::collections::HashMap;
use std::sync::Arc;

/// Where a tool came from, as the name-conflict message names it.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum ToolSource {
    /// Tools the application listed.
    AgentTools,
    /// Tools of a plugin.
    Plugin,
    /// Tools of the MCP server of this name (docs/semantics.md §20).
    Mcp(String),
    /// Workspace tools.
    Workspace,
    /// Handoff tools (`transfer_to_<slug>`).
    Handoff,
}

impl std::fmt::Display for ToolSource {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            ToolSource::AgentTools => f.write_str("agent.tools"),
            ToolSource::Plugin => f.write_str("plugin"),
            ToolSource::Mcp(server) => write!(f, "mcp server '{server}'"),
            ToolSource::Workspace => f.write_str("agent.workspace"),
            ToolSource::Handoff => f.write_str("handoff"),
        }
    }
}

/// The hint under every name conflict (docs/semantics.md §15).
const CONFLICT_HINT: &str = "Rename one tool or remove the duplicate. For MCP, set MCPServer.name to prefix a server's tools (e.g. name='fs' -> fs__read_file).";

/// Two tools share a name. `Display` is the spec's exact text, hint
/// included; when an MCP server is one of the two sources, the text names
/// the first source too: `... from mcp server 'b' (already from plugin).`
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub struct NameConflict {
    /// The shared name.
    pub name: String,
    /// The second (conflicting) source.
    pub from: ToolSource,
    /// The source that has the name already.
    pub first: ToolSource,
}

impl NameConflict {
    /// The conflict without the hint, for a door that gives its own (the
    /// hint of `Display` names another framework's option, as the
    /// reference's text does).
    pub fn message(&self) -> String {
        let Self { name, from, first } = self;
        if matches!(from, ToolSource::Mcp(_)) || matches!(first, ToolSource::Mcp(_)) {
            format!("Tool name conflict for '{name}' from {from} (already from {first}).")
        } else {
            format!("Tool name conflict for '{name}' from {from}.")
        }
    }
}

impl std::fmt::Display for NameConflict {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}\n  hint: {CONFLICT_HINT}", self.message())
    }
}

/// The tools of a run, by name, checked before anything runs.
#[derive(Debug, Clone, Default)]
pub struct Toolset {
    /// Shared with every call that runs them: a call never copies its tool.
    tools: Vec<Arc<Tool>>,
    /// Where each tool came from, by position.
    sources: Vec<ToolSource>,
    index: HashMap<String, usize>,
}

impl Toolset {
    /// An empty table.
    pub fn new() -> Self {
        Self::default()
    }

    /// Adds `tools` from `source`; fails on the first name already present.
    /// Add sources in the spec's order: agent tools, plugins, MCP servers,
    /// workspace, handoffs.
    pub fn add(
        &mut self,
        source: ToolSource,
        tools: impl IntoIterator<Item = Tool>,
    ) -> Result<&mut Self, NameConflict> {
        for tool in tools {
            if let Some(&i) = self.index.get(tool.name()) {
                return Err(NameConflict {
                    name: tool.name().to_owned(),
                    from: source,
                    first: self.sources[i].clone(),
                });
            }
            self.index.insert(tool.name().to_owned(), self.tools.len());
            self.tools.push(Arc::new(tool));
            self.sources.push(source.clone());
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

    /// Where the tool named `name` came from.
    pub(crate) fn source_of(&self, name: &str) -> Option<&ToolSource> {
        self.index.get(name).map(|&i| &self.sources[i])
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
