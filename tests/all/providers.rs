//! Each model provider against a local server speaking its real wire
//! format: the request it sends (tools, messages, settings, headers) and the
//! replies it understands, streamed and not; retries; environment config.

use lovia_runner::providers::{
    Anthropic, OpenAiChat, OpenAiResponses, ProviderKind, ProviderOptions, RetryPolicy, build, from_vars,
};
use lovia_runner::{Agent, ModelProvider, ModelReply, ModelRequest, RunEvent, Runner};
use lovia_tests::model_api::{Canned, ModelApi};
use lovia_tests::{fixtures, load};
use serde_json::{Value, json};
use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

fn options(api: &ModelApi, base: &str, stream: bool) -> ProviderOptions {
    let mut o = ProviderOptions::new(api.url(base), "test-model");
    o.api_key = Some("sk-test".into());
    o.stream = stream;
    o.retry = RetryPolicy::new(3, Duration::from_millis(5), Duration::from_millis(50));
    o
}

/// The system text of `orders_agent`: its instructions, then the orders
/// plugin's.
const SYSTEM: &str = "Be brief.\n\nAmounts are in cents. Look an order up before refunding it.";

async fn orders_agent(parallel: bool) -> Agent {
    let mut agent = Agent::new("desk").with_plugin(&load(fixtures::ORDERS).await);
    agent.instructions = Some("Be brief.".into());
    agent.settings.parallel_tool_calls = parallel;
    agent
}

/// Runs `agent` on `provider` streaming, and returns (output, text deltas).
async fn run(agent: Agent, provider: Arc<dyn ModelProvider>, input: &str) -> (String, Vec<String>) {
    let mut handle = Runner::new(agent, provider).stream(input);
    let mut deltas = Vec::new();
    while let Some(event) = handle.next_event().await {
        if let RunEvent::TextDelta { text } = event {
            deltas.push(text);
        }
    }
    (handle.result().await.expect("run").output, deltas)
}

fn tool_messages(body: &Value, role_key: &str) -> Vec<Value> {
    body[role_key].as_array().into_iter().flatten().cloned().collect()
}

#[tokio::test]
async fn openai_chat_completions_round_trip() {
    let api = ModelApi::start(vec![
        Canned::json(json!({
            "id": "chatcmpl-1", "object": "chat.completion", "model": "test-model",
            "choices": [{"index": 0, "finish_reason": "tool_calls", "message": {
                "role": "assistant", "content": null,
                "tool_calls": [
                    {"id": "call_a", "type": "function", "function": {"name": "lookup_order", "arguments": "{\"order_id\": \"A-1001\"}"}},
                    {"id": "call_b", "type": "function", "function": {"name": "lookup_order", "arguments": "{\"order_id\": "}}
                ]}}],
            "usage": {"prompt_tokens": 50, "completion_tokens": 20, "total_tokens": 70}
        })),
        Canned::json(json!({
            "id": "chatcmpl-2", "object": "chat.completion",
            "choices": [{"index": 0, "finish_reason": "stop", "message": {"role": "assistant", "content": "A-1001 has shipped."}}],
            "usage": {"prompt_tokens": 90, "completion_tokens": 8, "total_tokens": 98}
        })),
    ])
    .await;
    let provider = Arc::new(OpenAiChat::new(options(&api, "/v1", false)));
    let result = Runner::new(orders_agent(false).await, provider).run("Where is A-1001?").await.expect("run");
    assert_eq!(result.output, "A-1001 has shipped.");
    assert_eq!((result.usage.input_tokens, result.usage.output_tokens), (140, 28));
    let got = api.received();
    assert_eq!(got.len(), 2);
    assert_eq!(got[0].path, "/v1/chat/completions");
    assert_eq!(got[0].headers["authorization"], "Bearer sk-test");
    let first = &got[0].body;
    assert_eq!(first["model"], "test-model");
    assert_eq!(first["messages"][0], json!({"role": "system", "content": SYSTEM}));
    assert_eq!(first["messages"][1], json!({"role": "user", "content": "Where is A-1001?"}));
    assert_eq!(first["parallel_tool_calls"], false);
    let lookup = first["tools"].as_array().expect("tools").iter().find(|t| t["function"]["name"] == "lookup_order");
    let lookup = lookup.expect("lookup_order offered");
    assert_eq!(lookup["type"], "function");
    assert!(
        lookup["function"]["strict"].is_boolean()
            && lookup["function"]["parameters"]["properties"]["order_id"].is_object()
    );
    // The second request carries the assistant's calls and one tool message per call id;
    // arguments that were not a JSON object travel as {"_raw": text} (docs/semantics.md D11).
    let messages = tool_messages(&got[1].body, "messages");
    assert_eq!(messages[2]["tool_calls"][1]["function"]["arguments"], r#"{"_raw":"{\"order_id\": "}"#);
    let tools: Vec<&Value> = messages.iter().filter(|m| m["role"] == "tool").collect();
    assert_eq!(tools.len(), 2);
    let answer = |id: &str| {
        tools.iter().find(|m| m["tool_call_id"] == id).expect("answered")["content"].as_str().expect("text").to_owned()
    };
    assert!(answer("call_a").contains("\"status\": \"shipped\""));
    // Arguments that are not JSON are a rejection the model reads (docs/semantics.md §3).
    assert!(answer("call_b").starts_with("Invalid JSON in tool arguments: "), "{}", answer("call_b"));
}

#[tokio::test]
async fn openai_chat_completions_streaming_assembles_deltas_and_call_pieces() {
    let chunk = |delta: Value, finish: Value| {
        (
            "",
            json!({"id": "c", "object": "chat.completion.chunk", "choices": [{"index": 0, "delta": delta, "finish_reason": finish}]}),
        )
    };
    let api = ModelApi::start(vec![
        Canned::sse(&[
            chunk(json!({"role": "assistant", "content": ""}), Value::Null),
            chunk(json!({"tool_calls": [{"index": 0, "id": "call_1", "type": "function", "function": {"name": "lookup_order", "arguments": ""}}]}), Value::Null),
            chunk(json!({"tool_calls": [{"index": 0, "function": {"arguments": "{\"order_id\""}}]}), Value::Null),
            chunk(json!({"tool_calls": [{"index": 0, "function": {"arguments": ": \"A-1002\"}"}}]}), Value::Null),
            chunk(json!({}), json!("tool_calls")),
            ("", json!({"id": "c", "object": "chat.completion.chunk", "choices": [], "usage": {"prompt_tokens": 10, "completion_tokens": 5}})),
            ("", json!("[DONE]")),
        ]),
        Canned::sse(&[
            chunk(json!({"role": "assistant", "content": "A-1002 is "}), Value::Null),
            chunk(json!({"content": "processing."}), Value::Null),
            chunk(json!({}), json!("stop")),
            ("", json!("[DONE]")),
        ]),
    ])
    .await;
    let provider = Arc::new(OpenAiChat::new(options(&api, "/v1", true)));
    let (output, deltas) = run(orders_agent(true).await, provider, "A-1002?").await;
    assert_eq!(output, "A-1002 is processing.");
    assert_eq!(deltas, ["A-1002 is ", "processing."]);
    let got = api.received();
    assert_eq!(got[0].body["stream"], true);
    assert_eq!(got[0].body["stream_options"]["include_usage"], true);
    let messages = tool_messages(&got[1].body, "messages");
    assert_eq!(messages[2]["tool_calls"][0]["function"]["arguments"], "{\"order_id\": \"A-1002\"}");
    assert!(messages[3]["content"].as_str().expect("tool content").contains("processing"));
}

#[tokio::test]
async fn openai_responses_round_trip_streamed_and_not() {
    let completed = |output: Value| {
        json!({"type": "response.completed", "response": {
            "id": "resp_1", "object": "response", "status": "completed", "output": output,
            "usage": {"input_tokens": 30, "output_tokens": 9}
        }})
    };
    let api = ModelApi::start(vec![
        Canned::json(json!({
            "id": "resp_1", "object": "response", "status": "completed",
            "output": [{"type": "function_call", "id": "fc_1", "call_id": "call_9", "name": "lookup_order", "arguments": "{\"order_id\": \"A-1003\"}", "status": "completed"}],
            "usage": {"input_tokens": 30, "output_tokens": 9}
        })),
        Canned::sse(&[
            ("response.created", json!({"type": "response.created", "response": {"id": "resp_2", "status": "in_progress", "output": []}})),
            ("response.output_text.delta", json!({"type": "response.output_text.delta", "item_id": "msg_1", "output_index": 0, "content_index": 0, "delta": "Delivered"})),
            ("response.output_text.delta", json!({"type": "response.output_text.delta", "item_id": "msg_1", "output_index": 0, "content_index": 0, "delta": "."})),
            ("response.completed", completed(json!([{"type": "message", "id": "msg_1", "role": "assistant", "status": "completed", "content": [{"type": "output_text", "text": "Delivered.", "annotations": []}]}]))),
        ]),
    ])
    .await;
    // The first reply is read as JSON, the second as a stream: the same provider reads both.
    let mut opts = options(&api, "/v1", true);
    opts.stream = true;
    let provider = Arc::new(OpenAiResponses::new(opts));
    let (output, deltas) = run(orders_agent(true).await, provider, "A-1003?").await;
    assert_eq!((output.as_str(), deltas.concat().as_str()), ("Delivered.", "Delivered."));
    let got = api.received();
    assert_eq!(got[0].path, "/v1/responses");
    assert_eq!(got[0].body["instructions"], SYSTEM);
    assert_eq!(got[0].body["input"][0], json!({"role": "user", "content": "A-1003?"}));
    let tool = got[0].body["tools"].as_array().expect("tools").iter().find(|t| t["name"] == "lookup_order").cloned();
    assert_eq!(tool.expect("flat function tool")["type"], "function");
    let input = tool_messages(&got[1].body, "input");
    assert_eq!(
        input[1],
        json!({"type": "function_call", "call_id": "call_9", "name": "lookup_order", "arguments": "{\"order_id\": \"A-1003\"}"})
    );
    assert_eq!(input[2]["type"], "function_call_output");
    assert_eq!(input[2]["call_id"], "call_9");
    assert!(input[2]["output"].as_str().expect("output").contains("delivered"));
}

#[tokio::test]
async fn anthropic_messages_streaming_with_tool_use_and_error_results() {
    let api = ModelApi::start(vec![
        Canned::sse(&[
            ("message_start", json!({"type": "message_start", "message": {"id": "msg_1", "type": "message", "role": "assistant", "content": [], "model": "test-model", "stop_reason": null, "usage": {"input_tokens": 40, "output_tokens": 1}}})),
            ("content_block_start", json!({"type": "content_block_start", "index": 0, "content_block": {"type": "text", "text": ""}})),
            ("content_block_delta", json!({"type": "content_block_delta", "index": 0, "delta": {"type": "text_delta", "text": "Checking."}})),
            ("content_block_stop", json!({"type": "content_block_stop", "index": 0})),
            ("ping", json!({"type": "ping"})),
            ("content_block_start", json!({"type": "content_block_start", "index": 1, "content_block": {"type": "tool_use", "id": "toolu_1", "name": "lookup_order", "input": {}}})),
            ("content_block_delta", json!({"type": "content_block_delta", "index": 1, "delta": {"type": "input_json_delta", "partial_json": "{\"order_id\": "}})),
            ("content_block_delta", json!({"type": "content_block_delta", "index": 1, "delta": {"type": "input_json_delta", "partial_json": "\"A-9999\"}"}})),
            ("content_block_stop", json!({"type": "content_block_stop", "index": 1})),
            ("message_delta", json!({"type": "message_delta", "delta": {"stop_reason": "tool_use", "stop_sequence": null}, "usage": {"output_tokens": 30}})),
            ("message_stop", json!({"type": "message_stop"})),
        ]),
        Canned::json(json!({
            "id": "msg_2", "type": "message", "role": "assistant", "model": "test-model",
            "content": [{"type": "text", "text": "There is no order A-9999."}],
            "stop_reason": "end_turn", "usage": {"input_tokens": 80, "output_tokens": 9}
        })),
    ])
    .await;
    let provider = Arc::new(Anthropic::new(options(&api, "", true)));
    let (output, deltas) = run(orders_agent(false).await, provider, "A-9999?").await;
    assert_eq!(output, "There is no order A-9999.");
    assert_eq!(deltas.first().map(String::as_str), Some("Checking."));
    let got = api.received();
    assert_eq!(got[0].path, "/v1/messages");
    assert_eq!(got[0].headers["x-api-key"], "sk-test");
    assert_eq!(got[0].headers["anthropic-version"], "2023-06-01");
    let first = &got[0].body;
    assert_eq!((first["system"].as_str(), first["max_tokens"].as_u64()), (Some(SYSTEM), Some(4096)));
    assert_eq!(first["tool_choice"], json!({"type": "auto", "disable_parallel_tool_use": true}));
    assert!(
        first["tools"]
            .as_array()
            .expect("tools")
            .iter()
            .any(|t| t["name"] == "lookup_order" && t["input_schema"].is_object())
    );
    let messages = tool_messages(&got[1].body, "messages");
    assert_eq!(messages[1]["role"], "assistant");
    assert_eq!(
        messages[1]["content"][1],
        json!({"type": "tool_use", "id": "toolu_1", "name": "lookup_order", "input": {"order_id": "A-9999"}})
    );
    let result = &messages[2]["content"][0];
    assert_eq!((result["type"].as_str(), result["tool_use_id"].as_str()), (Some("tool_result"), Some("toolu_1")));
    assert_eq!(result["is_error"], true);
    assert!(result["content"].as_str().expect("content").contains("no order A-9999"));
}

#[tokio::test]
async fn transient_failures_are_retried_and_others_are_not() {
    let ok = Canned::json(
        json!({"choices": [{"index": 0, "finish_reason": "stop", "message": {"role": "assistant", "content": "ok"}}]}),
    );
    let mut limited = Canned::error(429, "Rate limit reached");
    limited.headers.push(("retry-after", "0".into()));
    let api = ModelApi::start(vec![limited, Canned::error(503, "overloaded"), ok]).await;
    let provider = build(ProviderKind::OpenaiChat, options(&api, "/v1", false));
    let request = ModelRequest { model: None, messages: vec![], tools: vec![], settings: Default::default() };
    let reply = provider.respond(&request, &|_| {}).await.expect("third attempt");
    assert_eq!(
        reply,
        ModelReply { content: Some("ok".into()), finish_reason: Some("stop".into()), ..ModelReply::default() }
    );
    assert_eq!(api.received().len(), 3);

    let api = ModelApi::start(vec![Canned::error(400, "Invalid schema for function 'x'")]).await;
    let provider = build(ProviderKind::OpenaiChat, options(&api, "/v1", false));
    let err = provider.respond(&request, &|_| {}).await.expect_err("400");
    assert_eq!(err.to_string(), "openai: HTTP 400: Invalid schema for function 'x'");
    assert_eq!((err.status, api.received().len()), (Some(400), 1));

    let api = ModelApi::start((0..4).map(|_| Canned::error(500, "boom")).collect()).await;
    let provider = build(ProviderKind::Anthropic, options(&api, "", false));
    let err = provider.respond(&request, &|_| {}).await.expect_err("exhausted");
    assert_eq!(err.to_string(), "anthropic: HTTP 500: boom (after 4 attempts)");
}

#[tokio::test]
async fn providers_are_configured_from_the_environment() {
    let vars = |pairs: &[(&str, &str)]| {
        let map: HashMap<String, String> = pairs.iter().map(|(k, v)| ((*k).to_owned(), (*v).to_owned())).collect();
        move |name: &str| map.get(name).cloned()
    };
    let err = from_vars(vars(&[])).err().expect("nothing configured");
    assert_eq!(err.message, "no model configured: set OPENAI_API_KEY (or OPENAI_BASE_URL for a local server)");
    let (kind, _) = from_vars(vars(&[("ANTHROPIC_API_KEY", "k")])).expect("anthropic");
    assert_eq!(kind, ProviderKind::Anthropic);
    let err = from_vars(vars(&[("LOVIA_PROVIDER", "gemini")])).err().expect("unknown");
    assert!(err.message.contains("not one of openai-chat, openai-responses, anthropic"), "{}", err.message);
    // A local OpenAI-compatible server with no key.
    let api = ModelApi::start(vec![Canned::json(json!({"choices": [{"index": 0, "finish_reason": "stop", "message": {"role": "assistant", "content": "local"}}]}))]).await;
    let url = api.url("/v1");
    let (kind, provider) =
        from_vars(vars(&[("OPENAI_BASE_URL", &url), ("LOVIA_STREAM", "0"), ("LOVIA_MODEL", "llama")])).expect("local");
    assert_eq!(kind, ProviderKind::OpenaiChat);
    let request = ModelRequest { model: None, messages: vec![], tools: vec![], settings: Default::default() };
    assert_eq!(provider.respond(&request, &|_| {}).await.expect("reply").content.as_deref(), Some("local"));
    let got = &api.received()[0];
    assert_eq!(got.body["model"], "llama");
    assert!(!got.headers.contains_key("authorization"));
}

/// A rich result (contract 0.2) goes to Anthropic as an image block beside
/// its text, and to OpenAI Chat, which takes no images in tool messages, as
/// the text rendering a model reads (docs/semantics.md §11).
#[tokio::test]
async fn content_parts_reach_each_provider_in_the_form_it_takes() {
    use lovia_host::{ContentPart, ToolCall};
    use lovia_runner::Message;
    let png = b"\x89PNG\r\n\x1a\n".to_vec();
    let parts = vec![
        ContentPart::Text { text: "chart".into() },
        ContentPart::Text { text: String::new() },
        ContentPart::Image { mime_type: "image/png".into(), data: png },
        // Labelled PNG, but not one: the API would refuse it on every later turn.
        ContentPart::Image { mime_type: "image/png".into(), data: vec![9] },
    ];
    let rendered = lovia_host::render_parts(&parts);
    let messages = vec![
        Message::User { content: "draw".into() },
        Message::Assistant { content: None, tool_calls: vec![ToolCall::new("c1", "bar_chart", "{}")] },
        Message::Tool {
            tool_call_id: "c1".into(),
            content: rendered.clone(),
            is_error: false,
            error_kind: None,
            parts: Some(parts),
            tool_error_kind: None,
        },
    ];
    let request = ModelRequest { model: None, messages, tools: vec![], settings: Default::default() };
    let reply = json!({
        "id": "m", "type": "message", "role": "assistant", "model": "test-model",
        "content": [{"type": "text", "text": "ok"}], "stop_reason": "end_turn",
        "usage": {"input_tokens": 1, "output_tokens": 1}
    });
    let api = ModelApi::start(vec![Canned::json(reply)]).await;
    Anthropic::new(options(&api, "", false)).respond(&request, &|_| {}).await.expect("reply");
    let sent = tool_messages(&api.received()[0].body, "messages");
    assert_eq!(
        sent[2]["content"][0]["content"],
        json!([
            {"type": "text", "text": "chart"},
            {"type": "image", "source": {"type": "base64", "media_type": "image/png", "data": "iVBORw0KGgo="}},
            {"type": "text", "text": "[image: image/png, 1 B]"},
        ])
    );

    let reply =
        json!({"choices": [{"index": 0, "finish_reason": "stop", "message": {"role": "assistant", "content": "ok"}}]});
    let api = ModelApi::start(vec![Canned::json(reply)]).await;
    OpenAiChat::new(options(&api, "/v1", false)).respond(&request, &|_| {}).await.expect("reply");
    let sent = tool_messages(&api.received()[0].body, "messages");
    assert_eq!(sent[2], json!({"role": "tool", "tool_call_id": "c1", "content": rendered}));
}
