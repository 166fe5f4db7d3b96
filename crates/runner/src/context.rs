//! What a model request carries beyond the agent's instructions and the
//! transcript: the sections the agent's capabilities add to the system
//! message (the workspace's `## Workspace` section, a plugin's
//! instructions) and their reminders, shown on every turn but never stored
//! (the workspace's background processes). A capability says them
//! ([`lovia_host::Capability`]); this module puts them in a request.

use super::provider::Message;
use lovia_host::Composition;

/// The system message of a request: the agent's instructions, then each
/// capability's section in the order the agent was given them, the
/// plugins' last (once per plugin, in tool order); joined by a blank line.
/// `None` when all are absent. Takes the agent's parts rather than the
/// agent, so that this module stays below `agent` in the module graph.
pub(crate) fn system_message(instructions: Option<&str>, capabilities: &Composition) -> Option<Message> {
    let mut parts: Vec<String> = instructions.map(str::to_owned).into_iter().collect();
    parts.extend(capabilities.instructions());
    parts.retain(|p| !p.trim().is_empty());
    (!parts.is_empty()).then(|| Message::System { content: parts.join("\n\n") })
}

/// The reminders of this turn, one user message each.
pub(crate) fn reminders(capabilities: &Composition) -> impl Iterator<Item = Message> {
    capabilities.reminders().into_iter().map(|content| Message::User { content })
}
