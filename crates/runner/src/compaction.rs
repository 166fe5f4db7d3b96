//! View-only context compaction and `recall_tool_result`
//! (docs/applications.md, "Long runs: compaction"): what one model request
//! sees is cut down to fit the window; the stored transcript never changes.

use super::provider::{Message, ModelProvider, ModelRequest, ModelSettings};
use lovia_host::{Tool, ToolOutput};
use serde_json::{Value, json};
use sha1::{Digest, Sha1};

/// The name of the tool a compacting policy adds.
pub const RECALL_TOOL: &str = "recall_tool_result";

/// The smallest window a policy is given by the CLI and `lovia serve`:
/// below it no request could hold a system message and one exchange.
pub const MIN_CONTEXT_WINDOW: usize = 1024;

/// Characters counted as one token when estimating a request's size.
const CHARS_PER_TOKEN: usize = 4;
/// Tokens counted for each message's framing.
const MESSAGE_OVERHEAD: usize = 4;

/// How the runner keeps each request within the model's window. The stages
/// run in order, oldest results first, until the request is under
/// `target`: offload large results to a preview, clear old results, then
/// ask the model for a summary of everything before the tail. Every
/// stage changes only the request; `recall_tool_result` brings a result
/// back in full.
///
/// ```
/// use lovia_runner::{Agent, ContextPolicy};
/// let mut agent = Agent::new("researcher");
/// agent.context_policy = Some(ContextPolicy::for_window(200_000));
/// assert!(agent.toolset().is_ok());
/// ```
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
pub struct ContextPolicy {
    /// The model's context window in tokens. Default: 128,000.
    pub window_tokens: usize,
    /// Tokens kept free for the reply. Default: 16,384.
    pub reserve_output_tokens: usize,
    /// Compaction starts when a request is over this share of the usable
    /// window (the window less the reserve). Default: 0.85.
    pub compact_at: f64,
    /// And goes on until it is under this share. Default: 0.60.
    pub target: f64,
    /// The share of the usable window the summary keeps verbatim at the
    /// end. Default: 0.2.
    pub tail: f64,
    /// Results over this many characters are offloaded to a preview.
    /// Default: 4,000.
    pub offload_over_chars: usize,
    /// The most recent results never offloaded. Default: 2.
    pub offload_keep_last: usize,
    /// Characters of a preview. Default: 400.
    pub preview_chars: usize,
    /// Results over this many characters may be cleared. Default: 200.
    pub clear_over_chars: usize,
    /// The most recent results never cleared. Default: 3.
    pub clear_keep_last: usize,
    /// Whether the last stage, a summary by the model, may run. Default: true.
    pub summarize: bool,
}

impl Default for ContextPolicy {
    fn default() -> Self {
        Self {
            window_tokens: 128_000,
            reserve_output_tokens: 16_384,
            compact_at: 0.85,
            target: 0.60,
            tail: 0.2,
            offload_over_chars: 4_000,
            offload_keep_last: 2,
            preview_chars: 400,
            clear_over_chars: 200,
            clear_keep_last: 3,
            summarize: true,
        }
    }
}

impl ContextPolicy {
    /// The defaults for a model whose window is `tokens`; the reserve for
    /// the reply is 16,384 tokens or a quarter of a smaller window.
    pub fn for_window(tokens: usize) -> Self {
        Self { window_tokens: tokens, reserve_output_tokens: 16_384.min(tokens / 4), ..Self::default() }
    }

    fn usable(&self) -> usize {
        self.window_tokens.saturating_sub(self.reserve_output_tokens).max(1)
    }

    fn share(&self, share: f64) -> usize {
        (self.usable() as f64 * share.clamp(0.0, 1.0)) as usize
    }
}

/// What compaction did to one request.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Compacted {
    /// The last stage that ran: `offload`, `clear` or `summary`.
    pub(crate) reason: &'static str,
    pub(crate) tokens_before: u64,
    pub(crate) tokens_after: u64,
}

/// The summary of a run's earlier messages, kept for the run so that each
/// turn does not ask again: it covers the first `covers` messages.
#[derive(Debug, Default)]
pub(crate) struct SummaryCache {
    covers: usize,
    text: String,
}

/// The estimated tokens of `messages`.
pub(crate) fn estimate(messages: &[Message]) -> usize {
    messages.iter().map(|m| chars(m).div_ceil(CHARS_PER_TOKEN) + MESSAGE_OVERHEAD).sum()
}

fn chars(message: &Message) -> usize {
    match message {
        Message::System { content } | Message::User { content } => content.chars().count(),
        Message::Assistant { content, tool_calls } => {
            content.as_ref().map_or(0, |c| c.chars().count())
                + tool_calls.iter().map(|c| c.name.len() + c.arguments.len() + c.id.len()).sum::<usize>()
        }
        Message::Tool { content, .. } => content.chars().count(),
    }
}

/// The reference of a result: the first 16 hex digits of its SHA-1.
pub(crate) fn digest(output: &str) -> String {
    hex::encode(Sha1::digest(output.as_bytes()))[..16].to_owned()
}

fn cleared_marker(call_id: &str) -> String {
    format!(
        "[Earlier tool result cleared to save context. Call recall_tool_result(\"{call_id}\") to retrieve the full output.]"
    )
}

fn preview_marker(output: &str, preview_chars: usize) -> String {
    let preview: String = output.chars().take(preview_chars).collect();
    format!(
        "[Tool result ({} chars) trimmed to a preview to save context.\nPreview:\n{preview}\nCall recall_tool_result(\"{}\") for the full output.]",
        lovia_host::call::text::thousands(output.chars().count() as u64),
        digest(output)
    )
}

/// Indexes of the tool results in `view`, oldest first.
fn results(view: &[Message]) -> Vec<usize> {
    view.iter().enumerate().filter(|(_, m)| matches!(m, Message::Tool { .. })).map(|(i, _)| i).collect()
}

fn set_content(message: &mut Message, text: String) {
    if let Message::Tool { content, parts, .. } = message {
        *content = text;
        // The parts are the full result's: a cleared result carries none.
        *parts = None;
    }
}

/// Compacts `view` (the transcript as this request sends it) when it and
/// `fixed` tokens (the system message, the tool schemas) are over the
/// policy's threshold. The summary stage asks `provider`; its failure
/// leaves the request as the earlier stages made it.
pub(crate) async fn compact(
    policy: &ContextPolicy,
    view: &mut Vec<Message>,
    fixed: usize,
    cache: &mut SummaryCache,
    provider: &dyn ModelProvider,
    model: Option<String>,
    meter: &lovia_host::exec::BudgetMeter,
) -> Option<Compacted> {
    let before = fixed + estimate(view);
    if before <= policy.share(policy.compact_at) {
        return None;
    }
    let goal = policy.share(policy.target);
    let over = |view: &[Message]| fixed + estimate(view) > goal;
    let mut reason = "offload";

    // Stage 1: large results become a preview, oldest first.
    let all = results(view);
    let offloadable = all.len().saturating_sub(policy.offload_keep_last);
    for &i in &all[..offloadable] {
        if !over(view) {
            break;
        }
        if let Message::Tool { content, .. } = &view[i]
            && content.chars().count() > policy.offload_over_chars
        {
            let marker = preview_marker(content, policy.preview_chars);
            set_content(&mut view[i], marker);
        }
    }
    // Stage 2: old results are cleared, oldest first.
    let clearable = all.len().saturating_sub(policy.clear_keep_last);
    for &i in &all[..clearable] {
        if !over(view) {
            break;
        }
        if let Message::Tool { tool_call_id, content, .. } = &view[i]
            && content.chars().count() > policy.clear_over_chars
        {
            reason = "clear";
            let marker = cleared_marker(tool_call_id);
            set_content(&mut view[i], marker);
        }
    }
    // Stage 3: everything before the tail becomes the model's summary.
    if over(view) && policy.summarize {
        let start = tail_start(view, policy.share(policy.tail));
        if start > 0 {
            if cache.covers != start
                && let Some(text) = summarize(&view[..start], provider, model, meter).await
            {
                *cache = SummaryCache { covers: start, text };
            }
            if cache.covers == start {
                let summary = format!("<context_summary>\n{}\n</context_summary>", cache.text);
                view.splice(..start, [Message::User { content: summary }]);
                reason = "summary";
            }
        }
    }
    let after = fixed + estimate(view);
    (after < before).then_some(Compacted { reason, tokens_before: before as u64, tokens_after: after as u64 })
}

/// Where the verbatim tail begins: the latest messages within `budget`
/// tokens, moved back so that it starts at a user or assistant message (a
/// result never loses its call).
fn tail_start(view: &[Message], budget: usize) -> usize {
    let mut start = view.len();
    let mut used = 0;
    while start > 0 {
        let cost = estimate(&view[start - 1..start]);
        if used + cost > budget {
            break;
        }
        used += cost;
        start -= 1;
    }
    while start > 0 && start < view.len() && matches!(view[start], Message::Tool { .. }) {
        start -= 1;
    }
    start
}

/// Characters of the earlier messages given to the summary request at most.
const MAX_SUMMARY_INPUT: usize = 400_000;

const SUMMARY_INSTRUCTIONS: &str = "You are compacting the context of a conversation between a user, an assistant and its tools. \
Write a concise summary of the conversation below that lets the assistant continue the task: the user's goals, what was done, \
the facts and results that matter (with the call ids of tool results worth recalling), and what remains. Answer with the summary only.";

/// Asks the model for a summary of `head`; its tokens are charged to the
/// run's budget like any turn's.
async fn summarize(
    head: &[Message],
    provider: &dyn ModelProvider,
    model: Option<String>,
    meter: &lovia_host::exec::BudgetMeter,
) -> Option<String> {
    let mut text = String::new();
    for message in head {
        let line = match message {
            Message::System { content } => format!("[system] {content}"),
            Message::User { content } => format!("[user] {content}"),
            Message::Assistant { content, tool_calls } => {
                let calls: Vec<String> =
                    tool_calls.iter().map(|c| format!("{}({}) id={}", c.name, c.arguments, c.id)).collect();
                format!("[assistant] {} {}", content.as_deref().unwrap_or(""), calls.join(" "))
            }
            Message::Tool { tool_call_id, content, .. } => format!("[tool result {tool_call_id}] {content}"),
        };
        text.push_str(&line);
        text.push('\n');
    }
    let text: String = text.chars().rev().take(MAX_SUMMARY_INPUT).collect::<Vec<_>>().into_iter().rev().collect();
    let request = ModelRequest {
        model,
        messages: vec![Message::System { content: SUMMARY_INSTRUCTIONS.into() }, Message::User { content: text }],
        tools: Vec::new(),
        settings: ModelSettings::default(),
    };
    let reply = provider.respond(&request, &|_| {}).await.ok()?;
    if let Some(usage) = reply.usage {
        meter.add(usage);
    }
    reply.content.filter(|c| !c.trim().is_empty())
}

/// `recall_tool_result` over `transcript`, which gives the run's stored
/// messages when called: by call id, then by the digest of an output,
/// latest first.
pub(crate) fn recall_tool(transcript: std::sync::Arc<dyn Fn() -> Vec<Message> + Send + Sync>) -> Tool {
    let tool = Tool::builder(RECALL_TOOL)
        // Reads the run's own transcript.
        .hints(lovia_host::ToolHints::stated(true, false, true, false))
        .description("Return the full output of an earlier tool call by the reference\nshown in its compaction marker.")
        .parameters(json!({
            "type": "object",
            "properties": {"ref": {"type": "string", "description": "The reference shown in the '[... tool result ...]' marker."}},
            "required": ["ref"],
            "additionalProperties": false
        }))
        .invoke(move |args: Value, _ctx| {
            let transcript = transcript.clone();
            async move {
                let reference = args.get("ref").and_then(Value::as_str).unwrap_or_default().to_owned();
                Ok(ToolOutput::Text(recall(&transcript(), &reference)))
            }
        });
    // A literal name and schema: building cannot fail.
    tool.unwrap_or_else(|e| unreachable!("recall_tool_result builds: {e}"))
}

/// The output `reference` names in `messages`, or the miss text.
pub(crate) fn recall(messages: &[Message], reference: &str) -> String {
    let outputs = || {
        messages.iter().rev().filter_map(|m| match m {
            Message::Tool { tool_call_id, content, .. } => Some((tool_call_id, content)),
            _ => None,
        })
    };
    if let Some((_, content)) = outputs().find(|(id, _)| id.as_str() == reference) {
        return content.clone();
    }
    if let Some((_, content)) = outputs().find(|(_, content)| digest(content) == reference) {
        return content.clone();
    }
    format!("No tool result found for reference '{reference}'.")
}

#[cfg(test)]
mod tests {
    use super::*;
    use lovia_host::exec::ToolCall;

    fn result(id: &str, content: String) -> Message {
        Message::Tool {
            tool_call_id: id.into(),
            content,
            is_error: false,
            error_kind: None,
            parts: None,
            tool_error_kind: None,
        }
    }

    fn calling(id: &str) -> Message {
        Message::Assistant {
            content: None,
            tool_calls: vec![ToolCall { id: id.into(), name: "fetch".into(), arguments: "{}".into() }],
        }
    }

    #[test]
    fn the_markers_are_exact() {
        assert_eq!(
            cleared_marker("call_7"),
            "[Earlier tool result cleared to save context. Call recall_tool_result(\"call_7\") to retrieve the full output.]"
        );
        let output = "x".repeat(12_345);
        let marker = preview_marker(&output, 400);
        assert!(marker.starts_with("[Tool result (12,345 chars) trimmed to a preview to save context.\nPreview:\nxxx"));
        assert!(
            marker.ends_with(&format!("x\nCall recall_tool_result(\"{}\") for the full output.]", digest(&output)))
        );
        assert_eq!(digest("hello"), "aaf4c61ddcc5e8a2");
    }

    #[test]
    fn recall_finds_by_call_id_then_by_digest_and_says_when_it_cannot() {
        let messages = vec![calling("a"), result("a", "first".into()), calling("b"), result("b", "second".into())];
        assert_eq!(recall(&messages, "a"), "first");
        assert_eq!(recall(&messages, &digest("second")), "second");
        assert_eq!(recall(&messages, "zzz"), "No tool result found for reference 'zzz'.");
    }

    #[test]
    fn the_tail_never_starts_with_a_result() {
        let view = vec![Message::User { content: "go".into() }, calling("a"), result("a", "r".repeat(400))];
        // A budget that fits the result alone: the tail moves back to its call.
        assert_eq!(tail_start(&view, 110), 1);
    }
}
