//! OpenAI-compatible Chat Completions: `POST {base}/chat/completions`,
//! tools as `{"type": "function", "function": {…, "strict"}}`, calls back as
//! `tool_calls`, results as `role: "tool"` messages; streamed as SSE chunks
//! whose `delta.tool_calls` arrive in pieces keyed by `index`.

use super::ProviderOptions;
use super::http::{Answer, request as request_api};
use crate::provider::{FinishReason, Message, ModelProvider, ModelReply, ModelRequest, ProviderError, TextSink};
use lovia_host::BoxFuture;
use lovia_host::exec::{ToolCall, Usage};
use serde_json::{Value, json};

const NAME: &str = "openai";

/// The Chat Completions provider.
#[derive(Debug, Clone)]
pub struct OpenAiChat {
    options: ProviderOptions,
}

impl OpenAiChat {
    /// A provider with `options`.
    pub fn new(options: ProviderOptions) -> Self {
        Self { options }
    }

    /// The request body for `request`.
    pub fn body(&self, request: &ModelRequest) -> Value {
        let messages: Vec<Value> = request
            .messages
            .iter()
            .map(|m| match m {
                Message::System { content } => json!({"role": "system", "content": content}),
                Message::User { content } => json!({"role": "user", "content": content}),
                Message::Assistant { content, tool_calls } => {
                    let mut msg = json!({"role": "assistant", "content": content});
                    if !tool_calls.is_empty() {
                        msg["tool_calls"] = tool_calls
                            .iter()
                            .map(|c| json!({"id": c.id, "type": "function", "function": {"name": c.name, "arguments": c.arguments}}))
                            .collect();
                    }
                    msg
                }
                Message::Tool { tool_call_id, content, .. } => {
                    json!({"role": "tool", "tool_call_id": tool_call_id, "content": content})
                }
            })
            .collect();
        let mut body = json!({"model": request.model.as_deref().unwrap_or(&self.options.model), "messages": messages});
        if !request.tools.is_empty() {
            body["tools"] = request.tools.iter().map(|t| t.openai_function()).collect();
            body["parallel_tool_calls"] = json!(request.settings.parallel_tool_calls);
        }
        if let Some(t) = request.settings.temperature {
            body["temperature"] = json!(t);
        }
        if let Some(n) = request.settings.max_output_tokens {
            body["max_completion_tokens"] = json!(n);
        }
        if self.options.stream {
            body["stream"] = json!(true);
            body["stream_options"] = json!({"include_usage": true});
        }
        body
    }

    async fn call(&self, request: &ModelRequest, on_text: &TextSink) -> Result<ModelReply, ProviderError> {
        let url = format!("{}/chat/completions", self.options.base_url.trim_end_matches('/'));
        let mut headers = Vec::new();
        if let Some(key) = &self.options.api_key {
            headers.push(("authorization", format!("Bearer {key}")));
        }
        let mut events = match request_api(NAME, &url, &headers, &self.body(request), &self.options).await? {
            Answer::Json(value) => return parse_completion(&value),
            Answer::Stream(events) => events,
        };
        let mut reply = StreamedReply::default();
        while let Some(event) = events.next().await? {
            if event.data == "[DONE]" {
                return Ok(reply.finish());
            }
            let chunk = events.json(&event)?;
            if let Some(message) = chunk.pointer("/error/message").and_then(Value::as_str) {
                return Err(ProviderError::new(NAME, message));
            }
            reply.apply(&chunk, on_text);
        }
        Err(ProviderError::new(NAME, "the stream ended without [DONE]"))
    }
}

impl ModelProvider for OpenAiChat {
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

fn usage(value: &Value) -> Option<Usage> {
    let u = value.get("usage").filter(|u| u.is_object())?;
    Some(Usage {
        input_tokens: u["prompt_tokens"].as_u64().unwrap_or(0),
        output_tokens: u["completion_tokens"].as_u64().unwrap_or(0),
    })
}

/// A non-streamed completion.
fn parse_completion(value: &Value) -> Result<ModelReply, ProviderError> {
    let choice = value.pointer("/choices/0").ok_or_else(|| ProviderError::new(NAME, "the response has no choices"))?;
    let message = &choice["message"];
    let tool_calls = message["tool_calls"]
        .as_array()
        .map(|calls| {
            calls
                .iter()
                .map(|c| {
                    ToolCall::new(
                        c["id"].as_str().unwrap_or_default(),
                        c.pointer("/function/name").and_then(Value::as_str).unwrap_or_default(),
                        c.pointer("/function/arguments").and_then(Value::as_str).unwrap_or_default(),
                    )
                })
                .collect()
        })
        .unwrap_or_default();
    Ok(ModelReply {
        content: message["content"].as_str().map(str::to_owned),
        tool_calls,
        usage: usage(value),
        finish_reason: choice["finish_reason"].as_str().map(FinishReason::from),
    })
}

/// A reply assembled from stream chunks.
#[derive(Default)]
struct StreamedReply {
    text: Option<String>,
    calls: Vec<ToolCall>,
    usage: Option<Usage>,
    finish_reason: Option<FinishReason>,
}

impl StreamedReply {
    fn apply(&mut self, chunk: &Value, on_text: &TextSink) {
        if let Some(u) = usage(chunk) {
            self.usage = Some(u);
        }
        let Some(choice) = chunk.pointer("/choices/0") else { return };
        if let Some(reason) = choice["finish_reason"].as_str() {
            self.finish_reason = Some(FinishReason::from(reason));
        }
        let delta = &choice["delta"];
        if let Some(text) = delta["content"].as_str().filter(|t| !t.is_empty()) {
            on_text(text);
            self.text.get_or_insert_default().push_str(text);
        }
        for piece in delta["tool_calls"].as_array().into_iter().flatten() {
            let index = piece["index"].as_u64().unwrap_or(self.calls.len() as u64) as usize;
            while self.calls.len() <= index {
                self.calls.push(ToolCall::new("", "", ""));
            }
            let call = &mut self.calls[index];
            if let Some(id) = piece["id"].as_str() {
                call.id = id.to_owned();
            }
            if let Some(name) = piece.pointer("/function/name").and_then(Value::as_str) {
                call.name.push_str(name);
            }
            if let Some(args) = piece.pointer("/function/arguments").and_then(Value::as_str) {
                call.arguments.push_str(args);
            }
        }
    }

    fn finish(self) -> ModelReply {
        ModelReply { content: self.text, tool_calls: self.calls, usage: self.usage, finish_reason: self.finish_reason }
    }
}
