//! Spec §14: policy order, raw arguments, short-circuit, retries, and the built-ins.

use super::executor;
use lovia_host::BoxFuture;
use lovia_host::policy::AttemptResult;
use lovia_host::{
    CallContext, ExecSettings, Failure, Next, Policy, RateLimit, Redact, ResultCache, RunState, ToolOutput,
};
use lovia_tests::native::{echo_json, flaky};
use lovia_tests::turn::{call, run};
use serde_json::{Value, json};
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

/// Records the arguments it sees, then prefixes text results with its tag.
struct Tag {
    tag: &'static str,
    seen: Arc<Mutex<Vec<String>>>,
}

impl Policy for Tag {
    fn call<'a>(
        &'a self,
        _tool: &'a str,
        args: Value,
        _ctx: &'a CallContext,
        next: Next<'a>,
    ) -> BoxFuture<'a, AttemptResult> {
        Box::pin(async move {
            self.seen.lock().expect("lock").push(format!("{}:{}", self.tag, args));
            match next.run(args).await? {
                ToolOutput::Json(v) => Ok(ToolOutput::Text(format!("{}:{}", self.tag, v))),
                ToolOutput::Text(t) => Ok(ToolOutput::Text(format!("{}:{t}", self.tag))),
                other => Ok(other),
            }
        })
    }
}

/// Rewrites `n` to the integer 7 before going on.
struct SetN(Value);

impl Policy for SetN {
    fn call<'a>(
        &'a self,
        _tool: &'a str,
        mut args: Value,
        _ctx: &'a CallContext,
        next: Next<'a>,
    ) -> BoxFuture<'a, AttemptResult> {
        Box::pin(async move {
            args["n"] = self.0.clone();
            next.run(args).await
        })
    }
}

#[tokio::test]
async fn the_first_policy_is_outermost_and_policies_see_raw_arguments() {
    let seen = Arc::new(Mutex::new(Vec::new()));
    let tool = echo_json("t")
        .with_policy(Arc::new(Tag { tag: "outer", seen: seen.clone() }))
        .with_policy(Arc::new(Tag { tag: "inner", seen: seen.clone() }));
    let turn = run(
        &executor(vec![tool], ExecSettings::default()),
        vec![call("c", "t", r#"{"n": "7"}"#)],
        &RunState::default(),
        |_| None,
    )
    .await;
    assert_eq!(turn.output("c"), r#"outer:inner:{"n":7,"m":5}"#, "the body got the coerced value with its default");
    assert_eq!(
        *seen.lock().expect("lock"),
        [r#"outer:{"n":"7"}"#, r#"inner:{"n":"7"}"#],
        "policies saw the raw text's value"
    );
}

#[tokio::test]
async fn bad_arguments_from_a_policy_are_not_retried() {
    let count = Arc::new(AtomicU32::new(0));
    struct Counting(Arc<AtomicU32>);
    impl Policy for Counting {
        fn call<'a>(
            &'a self,
            _t: &'a str,
            args: Value,
            _c: &'a CallContext,
            next: Next<'a>,
        ) -> BoxFuture<'a, AttemptResult> {
            self.0.fetch_add(1, Ordering::SeqCst);
            next.run(args)
        }
    }
    let tool = echo_json("t")
        .with_retries(3)
        .with_policy(Arc::new(Counting(count.clone())))
        .with_policy(Arc::new(SetN(json!("x"))));
    let turn = run(
        &executor(vec![tool], ExecSettings::default()),
        vec![call("c", "t", r#"{"n": 1}"#)],
        &RunState::default(),
        |_| None,
    )
    .await;
    assert_eq!(
        turn.output("c"),
        "Tool error: Invalid arguments for tool 't': n: Input should be a valid integer, unable to parse string as an integer"
    );
    assert_eq!(count.load(Ordering::SeqCst), 1);
}

#[tokio::test]
async fn every_retry_re_enters_at_the_outermost_policy() {
    let seen = Arc::new(Mutex::new(Vec::new()));
    let failures = Arc::new(AtomicU32::new(0));
    let tool = flaky("f", 2, failures).with_retries(2).with_policy(Arc::new(Tag { tag: "p", seen: seen.clone() }));
    let turn =
        run(&executor(vec![tool], ExecSettings::default()), vec![call("c", "f", "{}")], &RunState::default(), |_| None)
            .await;
    assert_eq!(turn.output("c"), "p:ok");
    assert_eq!(seen.lock().expect("lock").len(), 3);
}

#[tokio::test]
async fn the_cache_short_circuits_on_equal_arguments() {
    let count = Arc::new(AtomicU32::new(0));
    let tool = flaky("f", 0, count.clone()).with_policy(Arc::new(ResultCache::new(Duration::from_secs(60))));
    let exec = executor(vec![tool], ExecSettings::default());
    for id in ["a", "b"] {
        let turn = run(&exec, vec![call(id, "f", r#"{"x": 1, "y": [1, 2]}"#)], &RunState::default(), |_| None).await;
        assert_eq!(turn.output(id), "ok");
    }
    run(&exec, vec![call("c", "f", r#"{"y": [1, 2], "x": 1}"#)], &RunState::default(), |_| None).await;
    assert_eq!(count.load(Ordering::SeqCst), 1, "key order does not matter; the body ran once");
    run(&exec, vec![call("d", "f", r#"{"x": 2}"#)], &RunState::default(), |_| None).await;
    assert_eq!(count.load(Ordering::SeqCst), 2);
}

#[tokio::test]
async fn the_rate_limit_is_per_tenant() {
    let count = Arc::new(AtomicU32::new(0));
    let tool = flaky("f", 0, count.clone()).with_policy(Arc::new(RateLimit::new(0.0, 2)));
    let exec = executor(vec![tool], ExecSettings::default());
    let tenant = |t: &str| RunState { tenant: Some(t.into()), ..RunState::default() };
    let calls = || vec![call("a", "f", "{}"), call("b", "f", "{}"), call("c", "f", "{}")];
    let turn = run(&exec, calls(), &tenant("acme"), |_| None).await;
    assert_eq!(
        turn.output("c"),
        "Tool error: rate limit exceeded for tool 'f'\n  hint: this tool allows no more calls"
    );
    assert_eq!(count.load(Ordering::SeqCst), 2);
    let other = run(&exec, vec![call("a", "f", "{}")], &tenant("globex"), |_| None).await;
    assert_eq!(other.output("a"), "ok", "another tenant has its own bucket");
}

#[tokio::test]
async fn redaction_happens_before_the_model_sees_the_result() {
    let redact = || Arc::new(Redact::new([r"sk-[A-Za-z0-9]+"]).expect("regex"));
    let text = lovia_host::Tool::builder("text")
        .invoke(|_, _| async { Ok(ToolOutput::Text("keys sk-abc1 and sk-def2".into())) })
        .expect("tool")
        .with_policy(redact());
    let json = lovia_host::Tool::builder("json")
        .invoke(|_, _| async { Ok(ToolOutput::Json(json!({"user": "ada", "keys": ["sk-zz9"]}))) })
        .expect("tool")
        .with_policy(redact());
    let leaky = lovia_host::Tool::builder("leak")
        .invoke(|_, _| async {
            Err::<ToolOutput, _>(Failure::Tool { message: "bad key sk-abc123".into(), hint: None, kind: None })
        })
        .expect("tool")
        .with_policy(Arc::new(Redact::new([r"sk-[A-Za-z0-9]+"]).expect("regex").replacement("***")));
    let exec = executor(vec![text, json, leaky], ExecSettings::default());
    let calls = vec![call("a", "text", "{}"), call("b", "json", "{}"), call("c", "leak", "{}")];
    let turn = run(&exec, calls, &RunState::default(), |_| None).await;
    assert_eq!(turn.output("a"), "keys [REDACTED] and [REDACTED]");
    assert_eq!(turn.output("b"), r#"{"user": "ada", "keys": ["[REDACTED]"]}"#);
    assert_eq!(turn.output("c"), "Tool error: bad key ***");
}
