//! What a model request carries beyond the agent's instructions and the
//! transcript: text a bundle adds to the system message (the workspace's
//! `## Workspace` section, a plugin's instructions) and a reminder shown on
//! every turn but never stored (the workspace's background processes).

use super::provider::Message;
use lovia_host::Tool;
use std::sync::Arc;

/// A bundle's text for the model. The runner asks it on every model turn,
/// so what it says may change during a run.
///
/// ```
/// use lovia_runner::{Agent, PromptContext};
/// use std::sync::Arc;
/// #[derive(Debug)]
/// struct Clock;
/// impl PromptContext for Clock {
///     fn instructions(&self) -> Option<String> {
///         Some("## Time\nAnswer in UTC.".into())
///     }
/// }
/// let mut agent = Agent::new("helper");
/// agent.context.push(Arc::new(Clock));
/// ```
pub trait PromptContext: Send + Sync + std::fmt::Debug {
    /// Text appended to the system message, after the agent's instructions
    /// (joined by a blank line). Default: none.
    fn instructions(&self) -> Option<String> {
        None
    }
    /// Text added after the last message of each request as a user
    /// message, and never written to the transcript or a checkpoint.
    /// Default: none.
    fn reminder(&self) -> Option<String> {
        None
    }
}

/// The workspace: its `## Workspace` section, and each turn the reminder of
/// its background processes.
#[cfg(feature = "workspace")]
impl PromptContext for lovia_workspace::Workspace {
    fn instructions(&self) -> Option<String> {
        Some(self.prompt_fragment())
    }
    fn reminder(&self) -> Option<String> {
        lovia_workspace::Workspace::reminder(self)
    }
}

/// The system message of a request: the agent's instructions, each
/// context's text in order (a workspace first), then the instructions of
/// each plugin whose tools the agent has, once per plugin, in tool order;
/// joined by a blank line. `None` when all are absent.
/// Takes the agent's parts rather than the agent, so that this module stays
/// below `agent` in the module graph.
pub(crate) fn system_message(
    instructions: Option<&str>,
    context: &[Arc<dyn PromptContext>],
    plugin_tools: &[Tool],
) -> Option<Message> {
    let mut parts: Vec<String> = instructions.map(str::to_owned).into_iter().collect();
    parts.extend(context.iter().filter_map(|c| c.instructions()));
    let mut seen: Vec<&str> = Vec::new();
    for plugin in plugin_tools.iter().filter_map(Tool::plugin) {
        if seen.contains(&plugin.digest()) {
            continue;
        }
        seen.push(plugin.digest());
        parts.extend(plugin.info().instructions.clone());
    }
    parts.retain(|p| !p.trim().is_empty());
    (!parts.is_empty()).then(|| Message::System { content: parts.join("\n\n") })
}

/// The reminders of this turn, one user message each.
pub(crate) fn reminders(context: &[Arc<dyn PromptContext>]) -> impl Iterator<Item = Message> + '_ {
    context.iter().filter_map(|c| c.reminder()).map(|content| Message::User { content })
}
