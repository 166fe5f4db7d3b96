//! Anthropic Messages: `POST {base}/v1/messages` with `x-api-key` and
//! `anthropic-version`; calls are `tool_use` blocks, results `tool_result`
//! blocks (with `is_error`) in the next user message;
//! `disable_parallel_tool_use` when the agent forbids parallel calls;
//! streamed as `content_block_*` and `message_delta` events.

use super::ProviderOptions;
use super::http::{Answer, request as request_api};
use crate::provider::{FinishReason, Message, ModelProvider, ModelReply, ModelRequest, ProviderError, TextSink};
use lovia_host::BoxFuture;
use lovia_host::exec::{ToolCall, Usage};
use serde_json::{Value, json};

const NAME: &str = "anthropic";

/// The API version header this provider speaks.
pub const ANTHROPIC_VERSION: &str = "2023-06-01";

/// `max_tokens` when the agent sets none (the API requires one).
pub const DEFAULT_MAX_TOKENS: u32 = 4096;

/// The Messages provider.
#[derive(Debug, Clone)]
pub struct Anthropic {
    options: ProviderOptions,
}

impl Anthropic {
    /// A provider with `options`.
    pub fn new(options: ProviderOptions) -> Self {
        Self { options }
    }

    /// The request body for `request`. Consecutive messages of one role
    /// are merged, as the API requires alternating roles.
    pub fn body(&self, request: &ModelRequest) -> Value {
        let mut system = Vec::new();
        let mut messages: Vec<(String, Vec<Value>)> = Vec::new();
        let mut push = |role: &str, block: Value| match messages.last_mut() {
            Some((r, blocks)) if r == role => blocks.push(block),
            _ => messages.push((role.to_owned(), vec![block])),
        };
        for m in &request.messages {
            match m {
                Message::System { content } => system.push(content.as_str()),
                Message::User { content } => push("user", json!({"type": "text", "text": content})),
                Message::Assistant { content, tool_calls } => {
                    if let Some(text) = content.as_deref().filter(|t| !t.is_empty()) {
                        push("assistant", json!({"type": "text", "text": text}));
                    }
                    for c in tool_calls {
                        // The API wants an object; text that is not one travels as {"_raw": text} (docs/semantics.md §3).
                        let input = serde_json::from_str::<Value>(&c.arguments)
                            .ok()
                            .filter(Value::is_object)
                            .unwrap_or_else(|| json!({"_raw": c.arguments}));
                        push("assistant", json!({"type": "tool_use", "id": c.id, "name": c.name, "input": input}));
                    }
                }
                Message::Tool { tool_call_id, content, is_error, parts, .. } => {
                    let content = match parts {
                        Some(parts) => tool_result_blocks(parts),
                        None => json!(content),
                    };
                    push(
                        "user",
                        json!({"type": "tool_result", "tool_use_id": tool_call_id, "content": content, "is_error": is_error}),
                    )
                }
            }
        }
        let messages: Vec<Value> =
            messages.into_iter().map(|(role, content)| json!({"role": role, "content": content})).collect();
        let mut body = json!({
            "model": request.model.as_deref().unwrap_or(&self.options.model),
            "max_tokens": request.settings.max_output_tokens.unwrap_or(DEFAULT_MAX_TOKENS),
            "messages": messages,
        });
        if !system.is_empty() {
            body["system"] = json!(system.join("\n\n"));
        }
        if !request.tools.is_empty() {
            body["tools"] = request.tools.iter().map(|t| t.anthropic_tool()).collect();
            if !request.settings.parallel_tool_calls {
                body["tool_choice"] = json!({"type": "auto", "disable_parallel_tool_use": true});
            }
        }
        if let Some(t) = request.settings.temperature {
            body["temperature"] = json!(t);
        }
        if self.options.stream {
            body["stream"] = json!(true);
        }
        body
    }

    async fn call(&self, request: &ModelRequest, on_text: &TextSink) -> Result<ModelReply, ProviderError> {
        let url = format!("{}/v1/messages", self.options.base_url.trim_end_matches('/'));
        let mut headers = vec![("anthropic-version", ANTHROPIC_VERSION.to_owned())];
        if let Some(key) = &self.options.api_key {
            headers.push(("x-api-key", key.clone()));
        }
        let mut events = match request_api(NAME, &url, &headers, &self.body(request), &self.options).await? {
            Answer::Json(value) => return parse_message(&value),
            Answer::Stream(events) => events,
        };
        let mut reply = StreamedMessage::default();
        while let Some(event) = events.next().await? {
            if reply.apply(&events.json(&event)?, on_text)? {
                return Ok(reply.finish());
            }
        }
        Err(ProviderError::new(NAME, "the stream ended without message_stop"))
    }
}

impl ModelProvider for Anthropic {
    fn name(&self) -> &str {
        NAME
    }

    fn respond<'a>(
        &'a self,
        request: &'a ModelRequest,
        on_text: &'a TextSink,
    ) -> BoxFuture<'a, Result<ModelReply, ProviderError>> {
        Box::pin(self.call(request, on_text))
    }
}

fn finish_reason(stop: Option<&str>) -> Option<FinishReason> {
    stop.map(FinishReason::from)
}

/// A non-streamed message.
fn parse_message(value: &Value) -> Result<ModelReply, ProviderError> {
    let content = value["content"].as_array().ok_or_else(|| ProviderError::new(NAME, "the response has no content"))?;
    let mut text: Option<String> = None;
    let mut tool_calls = Vec::new();
    for block in content {
        match block["type"].as_str() {
            Some("text") => text.get_or_insert_default().push_str(block["text"].as_str().unwrap_or_default()),
            Some("tool_use") => tool_calls.push(ToolCall::new(
                block["id"].as_str().unwrap_or_default(),
                block["name"].as_str().unwrap_or_default(),
                block["input"].to_string(),
            )),
            _ => {}
        }
    }
    Ok(ModelReply {
        content: text,
        tool_calls,
        usage: Some(Usage {
            input_tokens: value.pointer("/usage/input_tokens").and_then(Value::as_u64).unwrap_or(0),
            output_tokens: value.pointer("/usage/output_tokens").and_then(Value::as_u64).unwrap_or(0),
        }),
        finish_reason: finish_reason(value["stop_reason"].as_str()),
    })
}

enum Block {
    Text,
    ToolUse(ToolCall),
    Other,
}

/// A message assembled from stream events.
#[derive(Default)]
struct StreamedMessage {
    text: Option<String>,
    blocks: Vec<Block>,
    calls: Vec<ToolCall>,
    usage: Usage,
    stop_reason: Option<String>,
}

impl StreamedMessage {
    /// Applies one event; true at `message_stop`.
    fn apply(&mut self, event: &Value, on_text: &TextSink) -> Result<bool, ProviderError> {
        match event["type"].as_str().unwrap_or_default() {
            "message_start" => {
                let u = &event["message"]["usage"];
                self.usage.input_tokens = u["input_tokens"].as_u64().unwrap_or(0);
                self.usage.output_tokens = u["output_tokens"].as_u64().unwrap_or(0);
            }
            "content_block_start" => {
                let b = &event["content_block"];
                self.blocks.push(match b["type"].as_str() {
                    Some("text") => Block::Text,
                    Some("tool_use") => Block::ToolUse(ToolCall::new(
                        b["id"].as_str().unwrap_or_default(),
                        b["name"].as_str().unwrap_or_default(),
                        "",
                    )),
                    _ => Block::Other,
                });
            }
            "content_block_delta" => {
                let delta = &event["delta"];
                match (self.blocks.last_mut(), delta["type"].as_str()) {
                    (Some(Block::Text), Some("text_delta")) => {
                        let piece = delta["text"].as_str().unwrap_or_default();
                        on_text(piece);
                        self.text.get_or_insert_default().push_str(piece);
                    }
                    (Some(Block::ToolUse(call)), Some("input_json_delta")) => {
                        call.arguments.push_str(delta["partial_json"].as_str().unwrap_or_default());
                    }
                    _ => {}
                }
            }
            "content_block_stop" => {
                if let Some(Block::ToolUse(call)) = self.blocks.last_mut() {
                    let mut call = std::mem::replace(call, ToolCall::new("", "", ""));
                    // A tool without arguments streams no JSON at all.
                    if call.arguments.is_empty() {
                        call.arguments = "{}".into();
                    }
                    self.calls.push(call);
                }
            }
            "message_delta" => {
                if let Some(reason) = event.pointer("/delta/stop_reason").and_then(Value::as_str) {
                    self.stop_reason = Some(reason.to_owned());
                }
                if let Some(n) = event.pointer("/usage/output_tokens").and_then(Value::as_u64) {
                    self.usage.output_tokens = n;
                }
            }
            "message_stop" => return Ok(true),
            "error" => {
                let message = event.pointer("/error/message").and_then(Value::as_str).unwrap_or("stream error");
                return Err(ProviderError::new(NAME, message));
            }
            _ => {}
        }
        Ok(false)
    }

    fn finish(self) -> ModelReply {
        ModelReply {
            content: self.text,
            tool_calls: self.calls,
            usage: Some(self.usage),
            finish_reason: finish_reason(self.stop_reason.as_deref()),
        }
    }
}

/// Largest image sent to Anthropic as an image, in bytes: its API takes
/// 5 MB of base64 per image. Larger ones go as their projection text.
const MAX_IMAGE_BYTES: usize = 3_750_000;

/// A rich result as Anthropic's tool-result blocks: real images of the
/// types its API takes as images, every other part as the text a model
/// would read, empty text parts left out as in the projection
/// (docs/semantics.md §11).
fn tool_result_blocks(parts: &[lovia_host::ContentPart]) -> Value {
    use base64::Engine;
    let blocks: Vec<Value> = parts
        .iter()
        .filter(|part| !matches!(part, lovia_host::ContentPart::Text { text } if text.is_empty()))
        .map(|part| match part {
            lovia_host::ContentPart::Image { mime_type, data }
                if data.len() <= MAX_IMAGE_BYTES && lovia_host::call::looks_like(mime_type, data) =>
            {
                json!({
                "type": "image",
                "source": {
                    "type": "base64",
                    "media_type": mime_type,
                    "data": base64::engine::general_purpose::STANDARD.encode(data),
                },
                })
            }
            other => json!({"type": "text", "text": other.model_text()}),
        })
        .collect();
    Value::Array(blocks)
}
