//! The `lovia:tools` contract versions (docs/contract.md): a component
//! built against 0.1.0 as released runs unchanged beside 0.2.0 ones, and
//! each 0.2.0 addition (tool titles, named error kinds, content parts)
//! reaches the executor, `lovia serve` (SSE, transcripts, metrics) and MCP
//! with the exact strings and shapes the docs give.

use crate::exec::executor;
use crate::serve::{Sse, json, request, start_with, tenant};
use lovia_host::{CallRequest, ContentPart, ContractVersion, ExecSettings, RunState, Tool};
use lovia_serve::{ProviderConfig, ServeConfig};
use lovia_tests::turn::{call, run};
use lovia_tests::{fixtures, load};
use serde_json::{Value, json as j};

/// The chart `bar_chart` draws for `[3, 1, 2]` labelled `visits`, as parts.
pub(crate) async fn direct_chart() -> Vec<ContentPart> {
    let charts = load(fixtures::CHARTS).await;
    match charts.invoke(&CallRequest::new("bar_chart", r#"{"values": [3, 1, 2], "label": "visits"}"#)).await {
        lovia_host::CallOutcome::Parts(parts) => parts,
        other => panic!("bar_chart returned {other:?}"),
    }
}

const CHART_TEXT: &str = "3 bars of visits, the highest 3.";
const CHART_LINK: &str = "[resource link: visits.csv, data:text/csv,visits%0A3%0A1%0A2, text/csv]";

fn png_size(data: &[u8]) -> (u32, u32) {
    assert_eq!(&data[..8], b"\x89PNG\r\n\x1a\n", "a PNG signature");
    assert_eq!(&data[12..16], b"IHDR");
    let be = |at: usize| u32::from_be_bytes([data[at], data[at + 1], data[at + 2], data[at + 3]]);
    (be(16), be(20))
}

#[tokio::test]
async fn a_0_1_component_runs_unchanged_beside_a_0_2_one_in_one_toolset() {
    let legacy = load(fixtures::CONTRACT_0_1).await;
    let charts = load(fixtures::CHARTS).await;
    assert_eq!(legacy.contract_version(), ContractVersion::V0_1);
    assert_eq!(charts.contract_version(), ContractVersion::V0_2);
    assert!(legacy.imports().iter().any(|i| i == "lovia:tools/context@0.1.0"), "{:?}", legacy.imports());

    let mut tools = Tool::from_plugin(&legacy);
    tools.extend(Tool::from_plugin(&charts));
    let exec = executor(tools, ExecSettings::default());
    let turn = run(
        &exec,
        vec![
            call("c1", "legacy_echo", r#"{"text": "hello"}"#),
            call("c2", "legacy_double", r#"{"n": 21}"#),
            call("c3", "legacy_fail", "{}"),
            call("c4", "bar_chart", r#"{"values": [3, 1, 2], "label": "visits"}"#),
            call("c5", "legacy_double", r#"{"n": "x"}"#),
        ],
        &RunState::default(),
        |_| None,
    )
    .await;
    assert_eq!(turn.output("c1"), "hello (call c1)");
    assert_eq!(turn.output("c2"), r#"{"n": 21, "double": 42}"#);
    // A 0.1.0 error has no kind: the class-name fallback of docs/semantics.md §5.
    assert_eq!(turn.output("c3"), "Tool error: ToolError");
    assert!(turn.output("c4").starts_with(CHART_TEXT), "{}", turn.output("c4"));
    // The host checks a 0.1.0 tool's arguments as any other.
    assert!(
        turn.output("c5").starts_with("Tool error: Invalid arguments for tool 'legacy_double': n:"),
        "{}",
        turn.output("c5")
    );
    let legacy_results: Vec<_> = turn.results().iter().filter(|r| r.call_id != "c4").collect();
    assert!(legacy_results.iter().all(|r| r.parts.is_none() && r.tool_error_kind.is_none()));
}

#[tokio::test]
async fn a_title_is_declared_in_0_2_and_absent_in_0_1() {
    let charts = load(fixtures::CHARTS).await;
    assert_eq!(charts.tool("bar_chart").and_then(|t| t.title.as_deref()), Some("Bar chart"));
    let legacy = load(fixtures::CONTRACT_0_1).await;
    assert!(legacy.tools().all(|t| t.title.is_none()));
    // The title is for people: the model's function carries the name only.
    let function = charts.tool("bar_chart").expect("bar_chart").openai_function();
    assert!(!function.to_string().contains("Bar chart"), "{function}");
}

#[tokio::test]
async fn a_message_less_error_reads_as_its_kind() {
    let charts = load(fixtures::CHARTS).await;
    let exec = executor(Tool::from_plugin(&charts), ExecSettings::default());
    let turn = run(&exec, vec![call("c1", "bar_chart", r#"{"values": []}"#)], &RunState::default(), |_| None).await;
    assert_eq!(turn.output("c1"), "Tool error: EmptySeries");
    let entry = &turn.results()[0];
    assert_eq!(entry.tool_error_kind.as_deref(), Some("EmptySeries"));
    assert_eq!(entry.error_kind, Some(lovia_host::ErrorKind::ToolError));
}

#[tokio::test]
async fn content_parts_reach_a_text_only_model_as_their_rendering() {
    let parts = direct_chart().await;
    let [ContentPart::Text { text }, ContentPart::Image { mime_type, data }, ContentPart::ResourceLink { .. }] =
        parts.as_slice()
    else {
        panic!("three parts: {parts:?}")
    };
    assert_eq!(text, CHART_TEXT);
    assert_eq!(mime_type, "image/png");
    // Three bars of 6 px with 2 px gaps and margins; 50 px high.
    assert_eq!(png_size(data), (26, 50));
    assert_eq!(data.len(), 1418);
    let rendered = lovia_host::render_parts(&parts);
    assert_eq!(rendered, format!("{CHART_TEXT}\n[image: image/png, 1.4 KB]\n{CHART_LINK}"));

    let charts = load(fixtures::CHARTS).await;
    let exec = executor(Tool::from_plugin(&charts), ExecSettings::default());
    let args = r#"{"values": [3, 1, 2], "label": "visits"}"#;
    let turn = run(&exec, vec![call("c1", "bar_chart", args)], &RunState::default(), |_| None).await;
    assert_eq!(turn.output("c1"), rendered);
    assert_eq!(turn.results()[0].parts.as_deref(), Some(parts.as_slice()));

    // Parts are their own rendering: an agent's renderer is bypassed.
    let renderer: lovia_host::Renderer = std::sync::Arc::new(|_, _| Ok(lovia_host::Rendered::Text("rendered".into())));
    let settings = ExecSettings::default().with_renderer(Some(renderer));
    let exec = executor(Tool::from_plugin(&charts), settings);
    let turn = run(&exec, vec![call("c1", "bar_chart", args)], &RunState::default(), |_| None).await;
    assert_eq!(turn.output("c1"), rendered);
}

#[tokio::test]
async fn a_truncated_rich_result_degrades_to_its_truncated_projection() {
    let charts = load(fixtures::CHARTS).await;
    let settings = ExecSettings::default().with_max_output_chars(Some(10));
    let exec = executor(Tool::from_plugin(&charts), settings);
    let args = r#"{"values": [3, 1, 2], "label": "visits"}"#;
    let turn = run(&exec, vec![call("c1", "bar_chart", args)], &RunState::default(), |_| None).await;
    let entry = &turn.results()[0];
    assert_eq!(entry.parts, None, "the parts are dropped with the cut");
    assert_eq!(entry.raw, None);
    let projection = format!("{CHART_TEXT}\n[image: image/png, 1.4 KB]\n{CHART_LINK}");
    assert_eq!(entry.output, lovia_host::truncate(&projection, 10).expect("over the cap"));
    assert!(entry.output.starts_with("3 bars o\n\n[... tool output truncated: kept 10 of "), "{}", entry.output);
}

#[tokio::test]
async fn hostile_content_parts_are_refused_with_the_reason() {
    let hostile = load(fixtures::HOSTILE).await;
    for (case, reason) in [
        (
            "html_image",
            "an image's MIME type must be one of image/png, image/jpeg, image/gif, image/webp, not \"text/html\"",
        ),
        ("too_many", "300 content parts; the limit is 256"),
        ("forged_link_name", "a resource link's name must be 1 to 256 bytes without control characters"),
        ("huge_image", "result too large"),
        // Issue 26, item 7: bytes that are not the type they are labelled.
        ("mislabelled_image", "an image's bytes must be the image/png its MIME type says; these are not"),
    ] {
        let outcome =
            hostile.invoke(&CallRequest::new("bad_parts", format!(r#"{{"case": "{case}"}}"#))).await.model_output();
        assert!(outcome.starts_with("Tool error: "), "{case}: {outcome}");
        assert!(outcome.contains(reason), "{case}: {outcome}");
    }
}

/// Issue 26, item 7: a link a client would open runs nothing (only
/// `https:`, `http:` and `data:`), and an image is the type it says by its
/// first bytes. A lying part fails the whole call with the reason, so it
/// reaches no client: not the executor, not `/api/tools/*/call`.
#[tokio::test]
async fn links_that_run_script_and_images_that_lie_are_refused() {
    let plugin = load(fixtures::BAD_LINKS).await;
    let invoke = |tool: &'static str, args: Value| {
        let plugin = plugin.clone();
        async move { plugin.invoke(&CallRequest::new(tool, args.to_string())).await }
    };
    for uri in ["javascript:alert(document.cookie)", "JavaScript:alert(1)", "vbscript:msgbox(1)", "file:///etc/passwd"]
    {
        let outcome = invoke("link_to", j!({"uri": uri})).await.model_output();
        assert!(
            outcome.starts_with("Tool error: ")
                && outcome.contains("a resource link's URI must start with https:, http:, data:, not"),
            "{uri}: {outcome}"
        );
    }
    for uri in ["https://example.com/report.pdf", "http://example.com/", "data:text/csv,a%0A1"] {
        let outcome = invoke("link_to", j!({"uri": uri})).await;
        assert!(matches!(&outcome, lovia_host::CallOutcome::Parts(parts) if parts.len() == 2), "{uri}: {outcome:?}");
    }
    let svg = invoke("image_of", j!({"mime_type": "image/png", "bytes": "<svg onload=alert(1)>"})).await;
    assert!(
        svg.model_output().contains("an image's bytes must be the image/png its MIME type says"),
        "{}",
        svg.model_output()
    );
    let gif = invoke("image_of", j!({"mime_type": "image/gif", "bytes": "GIF89a;"})).await;
    assert!(matches!(&gif, lovia_host::CallOutcome::Parts(_)), "{gif:?}");

    // What an API client gets: the refusal as text, no part.
    let mut config = ServeConfig::new(vec![tenant("acme", "acme-key", &[fixtures::BAD_LINKS])]);
    config.metrics_public = true;
    let addr = start_with(config).await;
    let (status, body) =
        request(addr, "POST", "/api/tools/link_to/call", Some("acme-key"), r#"{"uri": "javascript:alert(1)"}"#).await;
    assert_eq!(status, 200, "{body}");
    let answer = json(&body);
    assert_eq!(answer["is_error"], true, "{body}");
    assert!(answer.get("parts").is_none_or(Value::is_null), "{body}");
    assert!(answer["output"].as_str().is_some_and(|o| o.contains("must start with https:, http:, data:")), "{body}");
}

fn chart_tenant(dir: &std::path::Path) -> lovia_serve::TenantConfig {
    let script = dir.join("script.json");
    let replies = j!([
        {"tool_calls": [{"id": "c1", "name": "bar_chart", "arguments": r#"{"values": [3, 1, 2], "label": "visits"}"#}]},
        {"tool_calls": [{"id": "c2", "name": "bar_chart", "arguments": r#"{"values": []}"#}]},
        {"content": "Here is the chart."}
    ]);
    std::fs::write(&script, replies.to_string()).expect("script");
    let mut t = tenant("acme", "acme-key", &[fixtures::CHARTS, fixtures::CONTRACT_0_1]);
    t.provider = ProviderConfig::scripted(script);
    t
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_image_part_reaches_an_sse_client_and_the_transcript_intact() {
    let parts = serde_json::to_value(direct_chart().await).expect("parts");
    let dir = tempfile::tempdir().expect("tempdir");
    let mut config = ServeConfig::new(vec![chart_tenant(dir.path())]);
    config.metrics_public = true;
    let addr = start_with(config).await;
    let mut sse = Sse::post(addr, "/api/chat", "acme-key", r#"{"session_id": "s1", "input": "chart my visits"}"#).await;
    assert_eq!(sse.status, 200);
    let events = sse.rest().await;
    let results: Vec<&Value> = events.iter().filter(|(n, _)| n == "tool_result").map(|(_, d)| d).collect();
    assert_eq!(results.len(), 2, "{events:?}");
    assert_eq!(results[0]["parts"], parts, "the parts on SSE are the tool's, byte for byte");
    assert_eq!(results[0]["is_error"], false);
    assert_eq!(results[1]["result"], "Tool error: EmptySeries");
    assert_eq!(results[1]["tool_error_kind"], "EmptySeries");

    let (status, body) = request(addr, "GET", "/api/chat/s1", Some("acme-key"), "").await;
    assert_eq!(status, 200, "{body}");
    let transcript = json(&body);
    let messages = transcript["messages"].as_array().expect("messages");
    let tool = messages.iter().find(|m| m["tool_call_id"] == "c1").expect("the chart's tool message");
    assert_eq!(tool["parts"], parts, "the transcript keeps the parts");
    assert_eq!(tool["content"], results[0]["result"], "beside the text a model reads");

    let (_, metrics) = request(addr, "GET", "/metrics", None, "").await;
    assert!(
        metrics.contains(r#"lovia_tool_error_kinds_total{tenant="acme",tool="bar_chart",kind="EmptySeries"} 1"#),
        "{metrics}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_direct_call_through_serve_returns_the_parts_and_the_kind() {
    let parts = serde_json::to_value(direct_chart().await).expect("parts");
    let dir = tempfile::tempdir().expect("tempdir");
    let addr = start_with(ServeConfig::new(vec![chart_tenant(dir.path())])).await;
    let (status, body) = request(
        addr,
        "POST",
        "/api/tools/bar_chart/call",
        Some("acme-key"),
        r#"{"values": [3, 1, 2], "label": "visits"}"#,
    )
    .await;
    assert_eq!(status, 200, "{body}");
    let body = json(&body);
    assert_eq!(body["parts"], parts);
    assert!(body["output"].as_str().unwrap_or_default().starts_with(CHART_TEXT), "{body}");
    let (_, body) = request(addr, "POST", "/api/tools/bar_chart/call", Some("acme-key"), r#"{"values": []}"#).await;
    assert_eq!(
        json(&body),
        j!({"output": "Tool error: EmptySeries", "is_error": true, "error_kind": "tool_error", "tool_error_kind": "EmptySeries"})
    );
    let (_, body) = request(addr, "POST", "/api/tools/legacy_echo/call", Some("acme-key"), r#"{"text": "old"}"#).await;
    assert_eq!(json(&body)["output"], "old (call http_2)");
}
