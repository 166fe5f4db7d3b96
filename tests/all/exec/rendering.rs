//! Spec §11 and §12: renderer precedence, render failures, truncation and raw retention.

use super::executor;
use lovia_host::{ExecSettings, Failure, Rendered, Renderer, RunState, Tool, ToolOutput};
use lovia_tests::turn::{call, run};
use lovia_tests::{fixtures, load};
use serde_json::json;
use std::sync::Arc;

fn returns(name: &str, output: ToolOutput) -> Tool {
    Tool::builder(name)
        .invoke(move |_, _| {
            let o = output.clone();
            async move { Ok(o) }
        })
        .expect("tool")
}

fn renderer(tag: &'static str) -> Renderer {
    Arc::new(move |out, _| Ok(Rendered::Text(format!("{tag}({})", lovia_host::call::render_default(out)))))
}

#[tokio::test]
async fn tool_renderer_beats_agent_renderer_beats_default() {
    let settings = ExecSettings::default().with_renderer(Some(renderer("agent")));
    let tools = vec![
        returns("plain", ToolOutput::Text("hi".into())).with_renderer(renderer("tool")),
        returns("json", ToolOutput::Json(json!({"a": 1, "b": [1, 2.5, true, null], "s": "héllo"}))),
    ];
    let turn = run(
        &executor(tools, settings),
        vec![call("a", "plain", ""), call("b", "json", "")],
        &RunState::default(),
        |_| None,
    )
    .await;
    assert_eq!(turn.output("a"), "tool(hi)");
    assert_eq!(turn.output("b"), r#"agent({"a": 1, "b": [1, 2.5, true, null], "s": "héllo"})"#);
    let plain = run(
        &executor(vec![returns("j", ToolOutput::Json(json!(["中文", 5])))], ExecSettings::default()),
        vec![call("c", "j", "")],
        &RunState::default(),
        |_| None,
    )
    .await;
    assert_eq!(plain.output("c"), r#"["中文", 5]"#);
}

#[tokio::test]
async fn renderers_never_see_errors_and_a_failing_renderer_is_an_error_result() {
    let failing: Renderer = Arc::new(|_, _| Err("template missing".into()));
    let value: Renderer = Arc::new(|_, _| Ok(Rendered::Value(json!({"wrapped": true}))));
    let settings = ExecSettings::default().with_renderer(Some(failing));
    let tools = vec![
        returns("ok", ToolOutput::Text("x".into())),
        Tool::builder("bad")
            .invoke(|_, _| async {
                Err::<ToolOutput, _>(Failure::Tool { message: "nope".into(), hint: None, kind: None })
            })
            .expect("tool"),
        returns("v", ToolOutput::Text("x".into())).with_renderer(value),
    ];
    let turn = run(
        &executor(tools, settings),
        vec![call("a", "ok", ""), call("b", "bad", ""), call("c", "v", "")],
        &RunState::default(),
        |_| None,
    )
    .await;
    assert_eq!(turn.output("a"), "Tool error: result rendering failed: template missing");
    assert!(turn.trace().contains(&"failed:a".to_owned()));
    assert_eq!(turn.output("b"), "Tool error: nope");
    assert_eq!(turn.output("c"), r#"{"wrapped": true}"#, "a non-string goes through the default renderer");
}

/// `1234567` → `1,234,567`, written out independently of the host's formatter.
fn grouped(n: usize) -> String {
    let digits = n.to_string();
    let chunks: Vec<&str> =
        digits.as_bytes().rchunks(3).rev().map(|c| std::str::from_utf8(c).expect("ascii")).collect();
    chunks.join(",")
}

#[tokio::test]
async fn truncation_at_the_spec_limits() {
    let diag = load(fixtures::DIAGNOSTICS).await;
    for (limit, len, head, tail) in [
        (1u64, 20usize, 1usize, 0usize),
        (2, 20, 1, 1),
        (9, 20, 7, 2),
        (1000, 10_000, 800, 200),
        (200_000, 250_000, 160_000, 40_000),
    ] {
        let tools = Tool::from_plugin(&diag)
            .into_iter()
            .map(|t| if t.name() == "emit_chars" { t.with_max_output_chars(limit) } else { t });
        let exec = executor(tools.collect(), ExecSettings::default());
        let turn =
            run(&exec, vec![call("c", "emit_chars", &format!(r#"{{"count": {len}}}"#))], &RunState::default(), |_| {
                None
            })
            .await;
        let out = turn.output("c");
        let marker =
            format!("\n\n[... tool output truncated: kept {} of {} chars ...]\n\n", grouped(head + tail), grouped(len));
        assert_eq!(out, format!("{}{marker}{}", "x".repeat(head), "x".repeat(tail)), "limit {limit}");
        assert_eq!(turn.results()[0].raw, None, "truncation drops the raw value");
    }
}

#[tokio::test]
async fn raw_values_are_kept_up_to_16000_chars() {
    let diag = load(fixtures::DIAGNOSTICS).await;
    let exec = executor(Tool::from_plugin(&diag), ExecSettings::default());
    let turn = run(
        &exec,
        vec![call("s", "emit_chars", r#"{"count": 16000}"#), call("l", "emit_chars", r#"{"count": 16001}"#)],
        &RunState::default(),
        |_| None,
    )
    .await;
    let raw = |id: &str| turn.results().iter().find(|r| r.call_id == id).expect("result").raw.clone();
    assert_eq!(raw("s"), Some(json!("x".repeat(16000))));
    assert_eq!(raw("l"), None);
}

/// A tool that declares an output schema keeps its value past 16,000
/// characters (up to its output cap): an MCP client must get structured
/// content for it. Without a schema, the reference's rule holds.
#[tokio::test]
async fn a_tool_with_an_output_schema_keeps_a_long_raw_value() {
    let rows: Vec<serde_json::Value> = (0..2000).map(|i| json!({"row": i, "name": format!("item {i}")})).collect();
    let value = json!({"rows": rows});
    let schema = json!({"type": "object", "properties": {"rows": {"type": "array"}}});
    let returning = |name: &str, schema: Option<serde_json::Value>| {
        let value = value.clone();
        let builder = Tool::builder(name);
        let builder = match schema {
            Some(schema) => builder.output_schema(schema),
            None => builder,
        };
        builder
            .invoke(move |_, _| {
                let v = value.clone();
                async move { Ok(ToolOutput::Json(v)) }
            })
            .expect("tool")
            .with_max_output_chars(1_000_000)
    };
    let tools = vec![returning("with_schema", Some(schema)), returning("without", None)];
    let turn = run(
        &executor(tools, ExecSettings::default()),
        vec![call("a", "with_schema", ""), call("b", "without", "")],
        &RunState::default(),
        |_| None,
    )
    .await;
    let entry = |id: &str| turn.results().iter().find(|r| r.call_id == id).expect("result").clone();
    assert!(entry("a").output.chars().count() > 16_000, "the case is past the retention bound");
    assert_eq!(entry("a").raw, Some(value));
    assert_eq!(entry("b").raw, None);
}
