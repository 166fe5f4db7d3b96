//! Outcomes: what the model reads for each way a call can end (docs/semantics.md §5, §11,
//! §12, docs/semantics.md D5, D6).

use lovia_host::{CallContext, CallOutcome, CallRequest, Failure, MemoryStore, SessionStore};
use lovia_tests::{fixtures, load};
use serde_json::json;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

#[tokio::test]
async fn text_passes_verbatim_and_json_uses_the_reference_separators() {
    let diag = load(fixtures::DIAGNOSTICS).await;
    let echo = diag.invoke(&CallRequest::new("echo", r#"{"text": "{\"looks\":\"like json\"} héllo"}"#)).await;
    assert_eq!(echo.model_output(), r#"{"looks":"like json"} héllo"#);
    let orders = load(fixtures::ORDERS).await;
    let order = orders.invoke(&CallRequest::new("lookup_order", r#"{"order_id": "A-1001"}"#)).await;
    assert_eq!(
        order.model_output(),
        r#"{"id": "A-1001", "customer": "ada", "status": "shipped", "total_cents": 4250}"#
    );
    assert!(!order.is_error());
}

#[tokio::test]
async fn tool_errors_carry_their_hint_on_its_own_line() {
    let orders = load(fixtures::ORDERS).await;
    let out = orders.invoke(&CallRequest::new("lookup_order", r#"{"order_id": "A-9999"}"#)).await;
    assert_eq!(out.model_output(), "Tool error: no order A-9999\n  hint: ids look like A-1001");
    assert!(out.is_error());
    let refund = orders.invoke(&CallRequest::new("refund", r#"{"order_id": "A-1003", "amount_cents": 5000}"#)).await;
    assert_eq!(
        refund,
        CallOutcome::Failed(Failure::InvalidArguments("amount_cents 5000 exceeds the order total 990".into()))
    );
    assert_eq!(refund.model_output(), "Tool error: amount_cents 5000 exceeds the order total 990");
}

#[test]
fn failure_strings_match_the_spec() {
    let s = |f: Failure| CallOutcome::Failed(f).model_output();
    assert_eq!(
        s(Failure::Tool { message: "db down".into(), hint: Some("retry later".into()), kind: None }),
        "Tool error: db down\n  hint: retry later"
    );
    assert_eq!(
        s(Failure::Tool { message: String::new(), hint: Some("only hint".into()), kind: None }),
        "Tool error: only hint"
    );
    assert_eq!(s(Failure::Tool { message: String::new(), hint: None, kind: None }), "Tool error: ToolError");
    assert_eq!(s(Failure::TimedOut { ms: 50 }), "Tool error: timed out after 50 ms");
    assert_eq!(s(Failure::OutOfMemory { limit_mib: 64 }), "Tool error: out of memory (limit 64 MiB)");
    assert_eq!(s(Failure::StackOverflow), "Tool error: stack overflow");
    assert_eq!(s(Failure::CpuBudget), "Tool error: CPU budget exhausted");
    assert_eq!(s(Failure::Panicked("boom".into())), "Tool error: tool panicked: boom");
    assert_eq!(
        s(Failure::Trap("wasm trap: integer divide by zero".into())),
        "Tool error: trap: wasm trap: integer divide by zero"
    );
    assert_eq!(
        s(Failure::BudgetExceeded("total tokens 2 exceeds budget 1".into())),
        "Tool error: total tokens 2 exceeds budget 1"
    );
    assert_eq!(CallOutcome::CancelRun("stop".into()).model_output(), "Tool error: run cancelled");
    assert!(!Failure::OutOfMemory { limit_mib: 1 }.is_retryable());
    assert!(!Failure::InvalidArguments(String::new()).is_retryable());
    assert!(Failure::TimedOut { ms: 1 }.is_retryable());
    assert!(Failure::Panicked(String::new()).is_retryable());
}

#[tokio::test]
async fn a_spinning_call_is_interrupted_at_its_timeout() {
    let diag = load(fixtures::DIAGNOSTICS).await;
    let start = Instant::now();
    let req =
        CallRequest { timeout: Some(Duration::from_millis(50)), ..CallRequest::new("spin_ms", r#"{"ms": 10000}"#) };
    let out = diag.invoke(&req).await;
    let took = start.elapsed();
    assert_eq!(out, CallOutcome::Failed(Failure::TimedOut { ms: 50 }));
    // Generous margin: the guarantee is "stopped", the precise figure is a benchmark's job.
    assert!(took < Duration::from_secs(2), "took {took:?}");
}

#[tokio::test]
async fn a_sleeping_call_finishes_within_its_timeout() {
    let diag = load(fixtures::DIAGNOSTICS).await;
    let req = CallRequest { timeout: Some(Duration::from_secs(5)), ..CallRequest::new("sleep_ms", r#"{"ms": 20}"#) };
    assert_eq!(diag.invoke(&req).await, CallOutcome::Text("slept 20 ms".into()));
}

#[tokio::test]
async fn outputs_over_the_cap_are_truncated_but_rejections_are_not() {
    let diag = load(fixtures::DIAGNOSTICS).await;
    let out = diag.invoke(&CallRequest::new("emit_chars", r#"{"count": 10000}"#)).await;
    let text = out.final_output(Some(1000));
    assert!(text.starts_with(&"x".repeat(800)));
    assert!(text.contains("\n\n[... tool output truncated: kept 1,000 of 10,000 chars ...]\n\n"));
    assert!(text.ends_with(&"x".repeat(200)));
    let rejected = diag.invoke(&CallRequest::new("no_such_tool_with_a_long_name", "{}")).await;
    assert_eq!(rejected.final_output(Some(1)), "Tool 'no_such_tool_with_a_long_name' is not available.");
    let error = CallOutcome::Failed(Failure::Tool { message: "x".repeat(100), hint: None, kind: None });
    assert_eq!(
        error.final_output(Some(20)),
        format!("Tool error: xxxx\n\n[... tool output truncated: kept 20 of 112 chars ...]\n\nxxxx")
    );
}

#[tokio::test]
async fn progress_reaches_the_sink_in_order() {
    let diag = load(fixtures::DIAGNOSTICS).await;
    let seen = Arc::new(Mutex::new(Vec::new()));
    let sink = seen.clone();
    let context = CallContext {
        progress: Some(Arc::new(move |m: &str| sink.lock().expect("lock").push(m.to_owned()))),
        ..CallContext::default()
    };
    let out = diag.invoke(&CallRequest { context, ..CallRequest::new("progress", r#"{"steps": 3}"#) }).await;
    assert_eq!(out, CallOutcome::Text("done in 3 steps".into()));
    assert_eq!(*seen.lock().expect("lock"), ["step 1 of 3", "step 2 of 3", "step 3 of 3"]);
}

#[tokio::test]
async fn the_store_is_denied_by_default_and_scoped_to_the_session_when_granted() {
    let notes = load(fixtures::NOTES).await;
    let in_session = |id: &str| CallContext { session_id: Some(id.into()), ..CallContext::default() };
    let denied = notes
        .invoke(&CallRequest {
            context: in_session("s1"),
            ..CallRequest::new("save_note", r#"{"title": "a", "body": "b"}"#)
        })
        .await;
    assert!(denied.model_output().starts_with("Tool error: the store is not granted"), "{denied:?}");

    let store: Arc<dyn SessionStore> = Arc::new(MemoryStore::default());
    let call = |session: &str, tool: &str, args: &str| CallRequest {
        context: in_session(session),
        session_store: Some(store.clone()),
        ..CallRequest::new(tool, args)
    };
    let saved = notes.invoke(&call("s1", "save_note", r#"{"title": "plan", "body": "ship it"}"#)).await;
    assert_eq!(saved.model_output(), "Saved note 'plan' in session s1");
    assert_eq!(notes.invoke(&call("s1", "read_note", r#"{"title": "plan"}"#)).await.model_output(), "ship it");
    assert_eq!(notes.invoke(&call("s1", "list_notes", "")).await, CallOutcome::Json(json!(["plan"])));
    assert_eq!(
        notes.invoke(&call("s2", "list_notes", "")).await,
        CallOutcome::Json(json!([])),
        "another session sees nothing"
    );

    let diag = load(fixtures::DIAGNOSTICS).await;
    for attempt in 1..=2 {
        let out = diag.invoke(&call("s1", "fail_times", r#"{"times": 2}"#)).await;
        assert_eq!(out.model_output(), format!("Tool error: failure {attempt} of 2"));
    }
    assert_eq!(
        diag.invoke(&call("s1", "fail_times", r#"{"times": 2}"#)).await.model_output(),
        "succeeded after 2 failures"
    );
    assert_eq!(
        store.keys(&format!("/{}/s1", notes.digest()), ""),
        ["note/plan"],
        "diagnostics' counter lives in its own namespace, not in the notes plugin's"
    );
}

#[tokio::test]
async fn the_approval_predicate_runs_in_the_plugin() {
    let orders = load(fixtures::ORDERS).await;
    let ctx = CallContext::default();
    assert_eq!(
        orders.needs_approval("refund", r#"{"order_id": "A-1002", "amount_cents": 6000}"#, &ctx).await,
        Ok(true)
    );
    assert_eq!(
        orders.needs_approval("refund", r#"{"order_id": "A-1002", "amount_cents": 100}"#, &ctx).await,
        Ok(false)
    );
    assert_eq!(orders.needs_approval("lookup_order", r#"{"order_id": "A-1002"}"#, &ctx).await, Ok(false));
    assert!(orders.needs_approval("refund", "[]", &ctx).await.is_err(), "unparseable arguments deny");
}
