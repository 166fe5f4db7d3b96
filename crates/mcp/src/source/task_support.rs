//! What rmcp's typed tool list drops: a tool's `execution.taskSupport`.
//! rmcp 3.11's `Tool` has no `execution` field, so lovia would not know
//! which tools run only as tasks (`"required"`) and must be called as
//! tasks (task_call.rs). It reads the field from the server's raw
//! messages instead: each complete JSON-RPC line of a stdio server
//! (bounded.rs hands it each), and each event of a streamed HTTP answer
//! (http_client.rs). An HTTP answer sent as one JSON body reaches lovia
//! decoded, and the field is lost there (docs/mcp.md, "Not done yet").

use serde_json::Value;
use std::collections::HashSet;
use std::sync::{Arc, Mutex};

/// Most tool names remembered as task-only, whatever a server lists: as
/// many as a listing can take ([`super::config::MAX_TOOLS_PER_SERVER`]).
const MAX_REMEMBERED: usize = super::config::MAX_TOOLS_PER_SERVER;

/// The names of a server's tools whose last listing said
/// `execution.taskSupport: "required"`. Cheap to clone: clones share it.
#[derive(Debug, Clone, Default)]
pub(crate) struct TaskOnly(Arc<Mutex<HashSet<String>>>);

impl TaskOnly {
    /// Reads one complete line of the server's output. Only a line that
    /// looks like a tool listing is parsed (it names `tools` and
    /// `inputSchema`); the tools it lists update the set, each as the line
    /// says, so a tool listed again without the requirement is let go.
    pub(crate) fn read_line(&self, line: &[u8]) {
        if !contains(line, b"\"inputSchema\"") || !contains(line, b"\"tools\"") {
            return;
        }
        let Ok(message) = serde_json::from_slice::<Value>(line) else { return };
        let Some(tools) = message.pointer("/result/tools").and_then(Value::as_array) else { return };
        let mut names = self.0.lock().unwrap_or_else(|p| p.into_inner());
        for tool in tools {
            let Some(name) = tool.get("name").and_then(Value::as_str) else { continue };
            if tool.pointer("/execution/taskSupport").and_then(Value::as_str) == Some("required") {
                if names.len() < MAX_REMEMBERED {
                    names.insert(name.to_owned());
                }
            } else {
                names.remove(name);
            }
        }
    }

    /// Whether the server's last listing of `name` required tasks.
    pub(crate) fn contains(&self, name: &str) -> bool {
        self.0.lock().unwrap_or_else(|p| p.into_inner()).contains(name)
    }
}

fn contains(haystack: &[u8], needle: &[u8]) -> bool {
    haystack.windows(needle.len()).any(|w| w == needle)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_listing_line_marks_task_only_tools_and_a_later_one_unmarks_them() {
        let tasks = TaskOnly::default();
        let listing = |support: &str| {
            format!(
                r#"{{"jsonrpc":"2.0","id":2,"result":{{"tools":[{{"name":"t","inputSchema":{{}},"execution":{{"taskSupport":"{support}"}}}},{{"name":"u","inputSchema":{{}}}}]}}}}"#
            )
        };
        tasks.read_line(listing("required").as_bytes());
        assert!(tasks.contains("t") && !tasks.contains("u"));
        tasks.read_line(br#"{"jsonrpc":"2.0","id":3,"result":{"content":[{"type":"text","text":"\"tools\" t"}]}}"#);
        assert!(tasks.contains("t"), "a call's result is not a listing");
        tasks.read_line(listing("optional").as_bytes());
        assert!(!tasks.contains("t"), "listed again without the requirement");
        tasks.read_line(b"not json \"tools\" \"inputSchema\"");
        assert!(!tasks.contains("t"));
    }
}
