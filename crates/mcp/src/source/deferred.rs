//! Deferred MCP servers (`defer = true`; docs/mcp.md, "Deferred servers"):
//! their tools are not in the model's tool list. The model gets two tools
//! instead, `search_mcp_tools` and `call_mcp_tool`, and a `## Deferred MCP
//! tools` section naming every tool, so an agent can carry servers with
//! hundreds of tools without their schemas in every request.

use super::McpSource;
use super::adapter::call_failed;
use super::content::result_output;
use lovia_host::call::BoxFuture;
use lovia_host::{CallContext, Capability, Failure, NeedsApproval, Tool, ToolOutput, ToolSource};
use serde_json::{Value, json};
use std::sync::Arc;

/// The name of the search tool.
pub const SEARCH_MCP_TOOLS: &str = "search_mcp_tools";
/// The name of the call tool.
pub const CALL_MCP_TOOL: &str = "call_mcp_tool";
/// Results a search returns unless asked for more: 5 (1 to 20).
const DEFAULT_RESULTS: u64 = 5;
const MAX_RESULTS: u64 = 20;
/// The longest query looked at, in characters.
const MAX_QUERY: usize = 500;

/// The deferred servers, behind the two tools.
#[derive(Debug, Clone)]
pub struct DeferredMcpTools {
    sources: Arc<Vec<Arc<McpSource>>>,
}

/// One deferred tool: its name (with its server's prefix), its server, the
/// listed tool.
struct Entry {
    source: Arc<McpSource>,
    tool: Tool,
}

impl DeferredMcpTools {
    /// The tools of `sources` (servers configured with `defer = true`).
    pub fn new(sources: Vec<Arc<McpSource>>) -> Self {
        Self { sources: Arc::new(sources) }
    }

    fn entries(&self) -> Vec<Entry> {
        self.sources
            .iter()
            .flat_map(|s| s.tools().into_iter().map(move |tool| Entry { source: s.clone(), tool }))
            .collect()
    }

    /// The section for the system message: `## Deferred MCP tools`, then
    /// `- <prefix> (<n> tools): <sorted names>` per server. `None` without
    /// deferred servers.
    pub fn prompt_section(&self) -> Option<String> {
        if self.sources.is_empty() {
            return None;
        }
        let mut text = format!(
            "## Deferred MCP tools\nThese tools are not in your tool list. Find one with {SEARCH_MCP_TOOLS}(query) to see its parameters, then run it with {CALL_MCP_TOOL}(tool, arguments)."
        );
        for source in self.sources.iter() {
            let mut names: Vec<String> = source.tools().iter().map(|t| t.name().to_owned()).collect();
            names.sort();
            let prefix = source.prefix();
            let label = if prefix.is_empty() { source.server().to_owned() } else { prefix };
            text.push_str(&format!("\n- {label} ({} tools): {}", names.len(), names.join(", ")));
        }
        Some(text)
    }

    fn search_tool(&self) -> Tool {
        let this = self.clone();
        Tool::builder(SEARCH_MCP_TOOLS)
            .description("Search the deferred MCP tools by keywords in their names and descriptions; returns each match's name, description and parameters.")
            .parameters(json!({
                "type": "object",
                "properties": {
                    "query": {"type": "string", "description": "Keywords."},
                    "max_results": {"type": "integer", "minimum": 1, "maximum": MAX_RESULTS, "default": DEFAULT_RESULTS, "description": "Matches to return (1-20)."}
                },
                "required": ["query"],
                "additionalProperties": false
            }))
            .invoke(move |args: Value, _ctx| {
                let this = this.clone();
                async move {
                    let query = args.get("query").and_then(Value::as_str).unwrap_or_default();
                    let max = args.get("max_results").and_then(Value::as_u64).unwrap_or(DEFAULT_RESULTS);
                    Ok(ToolOutput::Text(search(&this.entries(), query, max.clamp(1, MAX_RESULTS) as usize)))
                }
            })
            .unwrap_or_else(|e| unreachable!("search_mcp_tools builds: {e}"))
            .with_parallel(true)
    }

    fn call_tool(&self) -> Tool {
        let (this, asker) = (self.clone(), self.clone());
        let tool = Tool::builder(CALL_MCP_TOOL)
            .description("Run a deferred MCP tool by its name (as search_mcp_tools gives it) with its arguments.")
            .parameters(json!({
                "type": "object",
                "properties": {
                    "tool": {"type": "string", "description": "The tool's name."},
                    "arguments": {"type": "object", "default": {}, "description": "Its arguments."}
                },
                "required": ["tool"],
                "additionalProperties": false
            }))
            .invoke(move |args: Value, ctx: CallContext| {
                let this = this.clone();
                async move { this.call(&args, &ctx).await }
            })
            .unwrap_or_else(|e| unreachable!("call_mcp_tool builds: {e}"));
        // The target's own approval applies, judged on its arguments.
        tool.with_approval(NeedsApproval::Predicate(Arc::new(move |args: &Value, _ctx: &CallContext| {
            let name = args.get("tool").and_then(Value::as_str).unwrap_or_default();
            let arguments = args.get("arguments").cloned().unwrap_or_else(|| json!({}));
            Ok(asker.sources.iter().any(|s| s.asks(name, &arguments)))
        })))
    }

    async fn call(&self, args: &Value, ctx: &CallContext) -> Result<ToolOutput, Failure> {
        let name = args.get("tool").and_then(Value::as_str).unwrap_or_default();
        let arguments = match args.get("arguments") {
            None | Some(Value::Null) => serde_json::Map::new(),
            Some(Value::Object(map)) => map.clone(),
            Some(_) => return Err(Failure::InvalidArguments("arguments: must be an object".into())),
        };
        let entries = self.entries();
        let Some(entry) = entries.iter().find(|e| e.tool.name() == name) else {
            let names: Vec<&str> = entries.iter().map(|e| e.tool.name()).collect();
            return Err(Failure::Tool {
                message: format!("unknown deferred MCP tool: '{}'", name.chars().take(100).collect::<String>()),
                hint: Some(format!("Did you mean: {}?", closest(name, &names).join(", "))),
                kind: None,
            });
        };
        let raw = entry.source.raw_name(name);
        let call = entry.source.supervisor.call(&raw, arguments, ctx.progress.clone());
        match tokio::time::timeout(entry.source.supervisor.config.timeout(), call).await {
            Ok(Ok(result)) => Ok(result_output(&result)),
            Ok(Err(e)) => Err(call_failed(name, &e.reason, e.restarted)),
            Err(_) => Err(Failure::TimedOut {
                ms: u64::try_from(entry.source.supervisor.config.timeout().as_millis()).unwrap_or(u64::MAX),
            }),
        }
    }
}

/// The deferred servers: two tools that reach them, and the system
/// message's section that names them.
impl Capability for DeferredMcpTools {
    fn name(&self) -> String {
        "the deferred MCP servers".into()
    }

    fn source(&self) -> ToolSource {
        ToolSource::Mcp("deferred".into())
    }

    fn tools(&self) -> Vec<Tool> {
        if self.sources.is_empty() { Vec::new() } else { vec![self.search_tool(), self.call_tool()] }
    }

    /// Refreshes every deferred server; the two tools never change, so it
    /// says false (their searches read the new lists).
    fn refresh(&self) -> BoxFuture<'_, bool> {
        Box::pin(async move {
            for source in self.sources.iter() {
                source.refresh().await;
            }
            false
        })
    }

    fn instructions(&self) -> Option<String> {
        self.prompt_section()
    }
}

/// The matches of `query`, best first: per word, +3 when it is a whole
/// word of the name, +2 when the name contains it, +1 when the
/// description does.
fn search(entries: &[Entry], query: &str, max: usize) -> String {
    let query: String = query.chars().take(MAX_QUERY).collect::<String>().to_lowercase();
    let words: Vec<&str> = query.split_whitespace().collect();
    let mut scored: Vec<(u32, &Entry)> = entries
        .iter()
        .filter_map(|e| {
            let name = e.tool.name().to_lowercase();
            let name_words: Vec<&str> = name.split(['_', '-', '.']).filter(|w| !w.is_empty()).collect();
            let description = e.tool.spec().description.to_lowercase();
            let score: u32 = words
                .iter()
                .map(|w| {
                    3 * u32::from(name_words.contains(w))
                        + 2 * u32::from(name.contains(w))
                        + u32::from(description.contains(w))
                })
                .sum();
            (score > 0).then_some((score, e))
        })
        .collect();
    if scored.is_empty() {
        return format!(
            "No deferred MCP tool matched '{query}' ({} available — the full name list is in your instructions; try other keywords).",
            entries.len()
        );
    }
    scored.sort_by(|a, b| b.0.cmp(&a.0).then_with(|| a.1.tool.name().cmp(b.1.tool.name())));
    let shown: Vec<Value> = scored
        .iter()
        .take(max)
        .map(|(_, e)| {
            let spec = e.tool.spec();
            json!({"name": spec.name, "description": spec.description, "parameters": spec.parameters})
        })
        .collect();
    let mut text = lovia_host::render_json(&Value::Array(shown));
    if scored.len() > max {
        text.push_str(&format!(
            "\n({} more matches not shown; refine the query or raise max_results.)",
            scored.len() - max
        ));
    }
    text
}

/// The (at most 3) names closest to `name` by edit distance.
fn closest<'a>(name: &str, names: &[&'a str]) -> Vec<&'a str> {
    let name: Vec<char> = name.chars().take(64).collect();
    let mut ranked: Vec<(usize, &str)> = names.iter().map(|n| (distance(&name, n), *n)).collect();
    ranked.sort();
    ranked.into_iter().take(3).map(|(_, n)| n).collect()
}

/// Levenshtein distance (both sides at most 64 characters: names are).
fn distance(a: &[char], b: &str) -> usize {
    let b: Vec<char> = b.chars().take(64).collect();
    let mut row: Vec<usize> = (0..=b.len()).collect();
    for (i, ca) in a.iter().enumerate() {
        let mut prev = row[0];
        row[0] = i + 1;
        for (j, cb) in b.iter().enumerate() {
            let cur = row[j + 1];
            row[j + 1] = (prev + usize::from(ca != cb)).min(row[j] + 1).min(cur + 1);
            prev = cur;
        }
    }
    row[b.len()]
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn edit_distance_ranks_the_near_names_first() {
        let names = ["fs__read_file", "fs__write_file", "git__status"];
        assert_eq!(closest("fs__read_fil", &names)[0], "fs__read_file");
        assert_eq!(distance(&"kitten".chars().collect::<Vec<_>>(), "sitting"), 3);
    }
}
