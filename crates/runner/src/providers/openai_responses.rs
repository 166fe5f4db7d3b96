//! OpenAI Responses: `POST {base}/responses`, the system message as
//! `instructions`, calls as `function_call` items and results as
//! `function_call_output` items; streamed as typed SSE events, of which the
//! text deltas are passed on and `response.completed` carries the reply.

use super::ProviderOptions;
use super::http::{Answer, request as request_api};
use crate::provider::{FinishReason, Message, ModelProvider, ModelReply, ModelRequest, ProviderError, TextSink};
use lovia_host::BoxFuture;
use lovia_host::exec::{ToolCall, Usage};
use serde_json::{Value, json};

const NAME: &str = "openai-responses";

/// The Responses provider.
#[derive(Debug, Clone)]
pub struct OpenAiResponses {
    options: ProviderOptions,
}

impl OpenAiResponses {
    /// A provider with `options`.
    pub fn new(options: ProviderOptions) -> Self {
        Self { options }
    }

    /// The request body for `request`.
    pub fn body(&self, request: &ModelRequest) -> Value {
        let mut instructions = Vec::new();
        let mut input = Vec::new();
        for m in &request.messages {
            match m {
                Message::System { content } => instructions.push(content.as_str()),
                Message::User { content } => input.push(json!({"role": "user", "content": content})),
                Message::Assistant { content, tool_calls } => {
                    if let Some(text) = content.as_deref().filter(|t| !t.is_empty()) {
                        input.push(json!({"role": "assistant", "content": text}));
                    }
                    for c in tool_calls {
                        input.push(
                            json!({"type": "function_call", "call_id": c.id, "name": c.name, "arguments": c.arguments}),
                        );
                    }
                }
                Message::Tool { tool_call_id, content, .. } => {
                    input.push(json!({"type": "function_call_output", "call_id": tool_call_id, "output": content}));
                }
            }
        }
        let mut body = json!({"model": request.model.as_deref().unwrap_or(&self.options.model), "input": input});
        if !instructions.is_empty() {
            body["instructions"] = json!(instructions.join("\n\n"));
        }
        if !request.tools.is_empty() {
            body["tools"] = request
                .tools
                .iter()
                .map(|t| json!({"type": "function", "name": t.name, "description": t.description, "parameters": t.parameters, "strict": t.strict}))
                .collect();
            body["parallel_tool_calls"] = json!(request.settings.parallel_tool_calls);
        }
        if let Some(t) = request.settings.temperature {
            body["temperature"] = json!(t);
        }
        if let Some(n) = request.settings.max_output_tokens {
            body["max_output_tokens"] = json!(n);
        }
        if self.options.stream {
            body["stream"] = json!(true);
        }
        body
    }

    async fn call(&self, request: &ModelRequest, on_text: &TextSink) -> Result<ModelReply, ProviderError> {
        let url = format!("{}/responses", self.options.base_url.trim_end_matches('/'));
        let mut headers = Vec::new();
        if let Some(key) = &self.options.api_key {
            headers.push(("authorization", format!("Bearer {key}")));
        }
        let mut events = match request_api(NAME, &url, &headers, &self.body(request), &self.options).await? {
            Answer::Json(value) => return parse_response(&value),
            Answer::Stream(events) => events,
        };
        while let Some(event) = events.next().await? {
            let value = events.json(&event)?;
            match value["type"].as_str().unwrap_or(&event.event) {
                "response.output_text.delta" => {
                    if let Some(text) = value["delta"].as_str() {
                        on_text(text);
                    }
                }
                "response.completed" | "response.incomplete" => return parse_response(&value["response"]),
                "response.failed" | "error" => {
                    let message = value
                        .pointer("/response/error/message")
                        .or_else(|| value.get("message"))
                        .and_then(Value::as_str)
                        .unwrap_or("the response failed");
                    return Err(ProviderError::new(NAME, message));
                }
                _ => {}
            }
        }
        Err(ProviderError::new(NAME, "the stream ended without response.completed"))
    }
}

impl ModelProvider for OpenAiResponses {
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

/// A finished response object.
fn parse_response(value: &Value) -> Result<ModelReply, ProviderError> {
    let output = value["output"].as_array().ok_or_else(|| ProviderError::new(NAME, "the response has no output"))?;
    let mut text: Option<String> = None;
    let mut tool_calls = Vec::new();
    for item in output {
        match item["type"].as_str() {
            Some("message") => {
                for part in item["content"].as_array().into_iter().flatten() {
                    if part["type"] == "output_text" {
                        text.get_or_insert_default().push_str(part["text"].as_str().unwrap_or_default());
                    }
                }
            }
            Some("function_call") => tool_calls.push(ToolCall::new(
                item["call_id"].as_str().unwrap_or_default(),
                item["name"].as_str().unwrap_or_default(),
                item["arguments"].as_str().unwrap_or_default(),
            )),
            _ => {}
        }
    }
    let usage = value.get("usage").filter(|u| u.is_object()).map(|u| Usage {
        input_tokens: u["input_tokens"].as_u64().unwrap_or(0),
        output_tokens: u["output_tokens"].as_u64().unwrap_or(0),
    });
    let finish_reason = value
        .pointer("/incomplete_details/reason")
        .and_then(Value::as_str)
        .or_else(|| value["status"].as_str())
        .map(FinishReason::from);
    Ok(ModelReply { content: text, tool_calls, usage, finish_reason })
}
