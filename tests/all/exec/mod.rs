//! The executor, one module per section of the spec.

mod approvals;
mod cancellation;
mod naming;
mod policies;
mod preflight;
mod rendering;
mod retries;
mod scheduling;
mod timeouts;

use lovia_host::{ExecSettings, Executor, Tool, ToolSource, Toolset};

/// An executor over `tools` (as the agent's own tools) with `settings`.
pub(crate) fn executor(tools: Vec<Tool>, settings: ExecSettings) -> Executor {
    Executor::new(Toolset::new().with(ToolSource::AgentTools, tools).expect("unique names"), settings)
}

/// `Executor::call_tool`, the embedder's one call: the executor's rules
/// hold (approval denied without a handler, truncation, the unknown-tool
/// text), unlike `Plugin::invoke`, which runs the component alone.
#[tokio::test]
async fn one_call_through_the_executor_keeps_every_rule() {
    let orders = lovia_tests::load(lovia_tests::fixtures::ORDERS).await;
    let exec = Executor::new(
        Toolset::new().with(ToolSource::Plugin, Tool::from_plugin(&orders)).expect("unique names"),
        ExecSettings::default().with_max_output_chars(Some(40)),
    );
    let found = exec.call_tool("lookup_order", r#"{"order_id": "A-1001"}"#).await.expect("a result");
    assert!(!found.is_error, "{}", found.output);
    assert!(found.output.contains("[... tool output truncated"), "capped at 40: {}", found.output);
    let gated = exec.call_tool("refund", r#"{"order_id": "A-1002", "amount_cents": 6000}"#).await.expect("a result");
    assert_eq!((gated.output.as_str(), gated.is_error), ("Tool refund was not approved.", true));
    let direct =
        orders.invoke(&lovia_host::CallRequest::new("refund", r#"{"order_id": "A-1002", "amount_cents": 6000}"#)).await;
    assert!(!direct.is_error(), "Plugin::invoke asks no one: {direct:?}");
    let unknown = exec.call_tool("nope", "{}").await.expect("a result");
    assert!(unknown.is_error && unknown.output.contains("nope"), "{}", unknown.output);
}
