//! Code mode (issue 28; docs/code-mode.md): `run_code` runs a model's
//! program in a fresh QuickJS component, and every call the program makes
//! goes through the real executor with the orders plugin's real tools.

use lovia_code::{CodeEngine, CodeLimits, run_code};
use lovia_host::{ExecSettings, Executor, RunState, Tool, ToolOutput, ToolSource, Toolset};
use lovia_tests::native::sleeper;
use lovia_tests::turn::{Turn, call, run};
use lovia_tests::{fixtures, host, load};
use serde_json::json;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, OnceLock};
use std::time::{Duration, Instant};

/// One compiled engine for the test binary (a compile takes about a second).
fn engine() -> Arc<CodeEngine> {
    static ENGINE: OnceLock<Arc<CodeEngine>> = OnceLock::new();
    ENGINE.get_or_init(|| Arc::new(CodeEngine::new(&host()).expect("the code-mode engine compiles"))).clone()
}

/// The orders plugin's tools and a sleeper, with `run_code` over them.
async fn executor(limits: CodeLimits) -> Executor {
    let plugin = load(fixtures::ORDERS).await;
    let mut tools = Tool::from_plugin(&plugin);
    tools.push(sleeper("nap"));
    let code = run_code(engine(), &tools, limits).expect("run_code builds");
    let toolset = Toolset::new()
        .with(ToolSource::Plugin, tools)
        .and_then(|t| t.with(ToolSource::AgentTools, [code]))
        .expect("no name conflict");
    Executor::new(toolset, ExecSettings::default())
}

/// Runs one program as call `p`; approvals are decided by `decide`.
async fn program(exec: &Executor, code: &str, decide: impl Fn(&str) -> Option<bool> + Send + 'static) -> Turn {
    let args = json!({ "code": code }).to_string();
    run(exec, vec![call("p", "run_code", &args)], &RunState::default(), move |request| decide(&request.tool)).await
}

fn error_of(turn: &Turn) -> &str {
    let result = turn.results().iter().find(|r| r.call_id == "p").expect("the program's result");
    assert!(result.is_error, "expected an error result, got {:?}", result.output);
    &result.output
}

#[tokio::test]
async fn a_program_calls_the_tools_and_returns_only_what_it_computes() {
    let exec = executor(CodeLimits::default()).await;
    let code = r#"
        let total = 0;
        const big = [];
        for (const n of [1001, 1002, 1003, 1004, 1005]) {
          const order = await tools.lookup_order({ order_id: `A-${n}` });
          if (order.total_cents > 3000) { total += order.total_cents; big.push(order.id); }
        }
        console.log("orders over $30:", big.join(", "));
        return { total };
    "#;
    let turn = program(&exec, code, |_| None).await;
    assert_eq!(turn.output("p"), "orders over $30: A-1001, A-1002, A-1004, A-1005\n{\"total\":24950}");
    // Each nested call is a call of its own, with its own id under the program's.
    let nested: Vec<String> = turn.trace().into_iter().filter(|t| t.contains("p/")).collect();
    assert_eq!(nested.len(), 10, "started and completed for five lookups: {nested:?}");
    assert_eq!(nested[0], "started:p/1");
    assert_eq!(nested[9], "completed:p/5");
    // The turn's results are the model's calls only.
    assert_eq!(turn.order(), ["p"]);
}

#[tokio::test]
async fn the_engine_imports_one_function_and_a_program_reaches_nothing_else() {
    assert_eq!(engine().imports(), ["lovia:code-mode/host@0.1.0"]);
    let exec = executor(CodeLimits::default()).await;
    let code = r#"
        const probes = {
          fetch: typeof fetch, require: typeof require, process: typeof process,
          setTimeout: typeof setTimeout, std: typeof std, os: typeof os, WebAssembly: typeof WebAssembly,
        };
        // The host interface itself is the same one door, with the same rules.
        const host = (await import("lovia:code-mode/host@0.1.0")).default;
        let direct;
        const id = host.startCall("delete_everything", "{}");
        direct = host.nextEnd();
        direct = { same_id: direct.id === id, ...direct.output };
        return { probes, direct, keys: Object.keys(tools).sort() };
    "#;
    let turn = program(&exec, code, |_| None).await;
    let out: serde_json::Value = serde_json::from_str(turn.output("p")).expect("JSON");
    for (name, kind) in out["probes"].as_object().expect("probes") {
        assert_eq!(kind, "undefined", "{name} is reachable from a program");
    }
    assert_eq!(
        out["direct"],
        json!({"same_id": true, "tag": "err", "val": "Tool 'delete_everything' is not available."})
    );
    assert_eq!(out["keys"], json!(["lookup_order", "nap", "refund", "top_customers"]));
}

#[tokio::test]
async fn tool_errors_throw_inside_the_program_with_lovias_strings() {
    let exec = executor(CodeLimits::default()).await;
    let code = r#"
        const seen = [];
        for (const bad of [{ order_id: "nope" }, { order_id: "A-9999" }, {}]) {
          try { await tools.lookup_order(bad); } catch (e) { seen.push(`${e.name}: ${e.message}`); }
        }
        try { await tools.delete_everything({}); } catch (e) { seen.push(`${e.name}: ${e.message}`); }
        return seen.join("\n");
    "#;
    let turn = program(&exec, code, |_| None).await;
    let lines: Vec<&str> = turn.output("p").lines().collect();
    assert_eq!(
        lines,
        [
            "ToolError: Tool error: Invalid arguments for tool 'lookup_order': order_id: String should match pattern '^A-[0-9]{4}$'",
            "ToolError: Tool error: no order A-9999",
            "  hint: ids look like A-1001",
            "ToolError: Tool error: Invalid arguments for tool 'lookup_order': order_id: Field required",
            "TypeError: tools.delete_everything is not a tool; the tools are tools.lookup_order, tools.refund, tools.top_customers, tools.nap",
        ]
    );
    // An uncaught one ends the program as the call's error, with what it
    // logged: the tool and the program's own line and column, said once.
    let turn =
        program(&exec, "console.log('before');\n  await tools.lookup_order({order_id: 'A-9999'});", |_| None).await;
    assert_eq!(
        error_of(&turn),
        "Tool error: Uncaught ToolError from tools.lookup_order: no order A-9999\n  hint: ids look like A-1001\n    at line 2, column 15 of the program\nconsole output before it:\nbefore"
    );
    // A syntax error is the program's error, at the program's line.
    let turn = program(&exec, "const a = 1;\nreturn a +* 2;", |_| None).await;
    assert_eq!(
        error_of(&turn),
        "Tool error: Uncaught SyntaxError: unexpected token in expression: '*'\n    at line 2, column 11 of the program"
    );
    let turn = program(&exec, "return (", |_| None).await;
    assert!(error_of(&turn).ends_with("\n    at the end of the program"), "{}", error_of(&turn));
    let turn = program(&exec, "await tools.nope({})", |_| None).await;
    assert!(
        error_of(&turn)
            .starts_with("Tool error: Uncaught TypeError: tools.nope is not a tool; the tools are tools.lookup_order,"),
        "{}",
        error_of(&turn)
    );
    assert!(error_of(&turn).ends_with("\n    at line 1, column 7 of the program"), "{}", error_of(&turn));
    // The clock is not there: the program is told so, not given a trap's backtrace.
    let turn = program(&exec, "return Date.now()", |_| None).await;
    assert!(
        error_of(&turn)
            .starts_with("Tool error: Uncaught Error: Date.now() needs a clock, which code mode does not have"),
        "{}",
        error_of(&turn)
    );
    let turn = program(&exec, "return new Date(0).toISOString()", |_| None).await;
    assert_eq!(turn.output("p"), "1970-01-01T00:00:00.000Z", "a date without the clock works");
}

#[tokio::test]
async fn an_approval_gated_nested_call_is_asked_and_the_program_goes_on_or_catches_the_denial() {
    let exec = executor(CodeLimits::default()).await;
    let code = r#"
        const small = await tools.refund({ order_id: "A-1003", amount_cents: 500 });
        let big;
        try { big = await tools.refund({ order_id: "A-1002", amount_cents: 12000, reason: "damaged" }); }
        catch (e) { big = `denied: ${e.message}`; }
        return [small, big].join("\n");
    "#;
    // The person sees the nested call (the refund and its arguments), not the program.
    let approved = program(&exec, code, |name| Some(name == "refund")).await;
    assert_eq!(approved.output("p"), "Refunded 500 cents on A-1003\nRefunded 12000 cents on A-1002 (damaged)");
    assert!(approved.trace().contains(&"approval_required:p/2".to_owned()), "{:?}", approved.trace());
    let denied = program(&exec, code, |_| Some(false)).await;
    assert_eq!(denied.output("p"), "Refunded 500 cents on A-1003\ndenied: Tool refund was not approved.");
}

#[tokio::test]
async fn hostile_programs_are_stopped_with_a_clear_result_and_the_next_one_runs() {
    let mut limits = CodeLimits::default();
    limits.max_cpu = Duration::from_millis(300);
    limits.max_calls = 50;
    limits.max_wait = Duration::from_secs(1);
    let exec = executor(limits).await;
    let started = Instant::now();
    let endless = program(&exec, "while (true) {}", |_| None).await;
    assert_eq!(error_of(&endless), "Tool error: the program ran for more than 300 ms of CPU");
    assert!(started.elapsed() < Duration::from_secs(10), "the loop ran {:?}", started.elapsed());
    let bomb = program(&exec, "const a = []; while (true) a.push(new ArrayBuffer(8 << 20));", |_| None).await;
    assert_eq!(error_of(&bomb), "Tool error: out of memory (limit 64 MiB)");
    let many = program(&exec, "for (let i = 0; i < 10000; i++) await tools.nap({ ms: 0 });", |_| None).await;
    assert_eq!(error_of(&many), "Tool error: the program made more than 50 tool calls");
    let started = Instant::now();
    let waits = program(&exec, "for (;;) await tools.nap({ ms: 200 });", |_| None).await;
    assert_eq!(error_of(&waits), "Tool error: the program waited on tools for more than 1 s");
    assert!(started.elapsed() < Duration::from_secs(3), "{:?}", started.elapsed());
    let host = r#"(await import("lovia:code-mode/host@0.1.0")).default.nextEnd();"#;
    let waiting = program(&exec, host, |_| None).await;
    assert_eq!(error_of(&waiting), "Tool error: the program waited for a tool call, and none was in flight");
    let deep = program(&exec, "const f = (n) => f(n + 1) + 1; return f(0);", |_| None).await;
    assert!(error_of(&deep).contains("stack") || error_of(&deep).contains("RangeError"), "{}", error_of(&deep));
    let fine = program(&exec, "return (await tools.top_customers({ limit: 1 }))[0].customer;", |_| None).await;
    assert_eq!(fine.output("p"), "grace");
}

#[tokio::test]
async fn a_cancel_stops_a_program_at_once_whether_it_waits_on_a_tool_or_computes() {
    let exec = executor(CodeLimits::default()).await;
    for code in ["await tools.nap({ ms: 10000 });", "while (true) {}"] {
        let state = RunState::default();
        let cancel = state.cancel.clone();
        tokio::spawn(async move {
            tokio::time::sleep(Duration::from_millis(200)).await;
            cancel.cancel(Some("cancelled by the test"));
        });
        let started = Instant::now();
        let args = json!({ "code": code }).to_string();
        let turn = run(&exec, vec![call("p", "run_code", &args)], &state, |_| None).await;
        let took = started.elapsed();
        assert!(
            matches!(&turn.result, Err(lovia_host::TurnError::Cancelled { reason, .. }) if reason == "cancelled by the test"),
            "{code}: {:?}",
            turn.result
        );
        assert!(took < Duration::from_millis(1500), "{code}: the program ran on for {took:?}");
    }
}

/// Two calls that each finish only once the other has started: they end only
/// if a program's calls are in flight together.
fn meeting() -> Tool {
    let barrier = Arc::new(tokio::sync::Barrier::new(2));
    Tool::builder("meet")
        .invoke(move |_, _| {
            let barrier = barrier.clone();
            async move {
                match tokio::time::timeout(Duration::from_secs(5), barrier.wait()).await {
                    Ok(_) => Ok(ToolOutput::Text("met".into())),
                    Err(_) => Ok(ToolOutput::Text("alone".into())),
                }
            }
        })
        .expect("tool")
}

/// A barrier (`parallel: false`) that counts how many of its calls overlap.
fn solo(running: Arc<AtomicUsize>, most: Arc<AtomicUsize>) -> Tool {
    Tool::builder("solo")
        .invoke(move |_, _| {
            let (running, most) = (running.clone(), most.clone());
            async move {
                let now = running.fetch_add(1, Ordering::SeqCst) + 1;
                most.fetch_max(now, Ordering::SeqCst);
                tokio::time::sleep(Duration::from_millis(30)).await;
                running.fetch_sub(1, Ordering::SeqCst);
                Ok(ToolOutput::Text("solo".into()))
            }
        })
        .expect("tool")
        .with_parallel(false)
}

#[tokio::test]
async fn a_programs_calls_run_together_and_a_barrier_still_runs_alone() {
    let (running, most) = (Arc::new(AtomicUsize::new(0)), Arc::new(AtomicUsize::new(0)));
    let tools = vec![meeting(), solo(running, most.clone())];
    let code = run_code(engine(), &tools, CodeLimits::default()).expect("run_code builds");
    let toolset =
        Toolset::new().with(ToolSource::AgentTools, tools.into_iter().chain([code])).expect("no name conflict");
    let exec = Executor::new(toolset, ExecSettings::default());
    // Started together (Promise.all, or before the first await), the calls
    // are in flight together: each meets the other.
    let together =
        program(&exec, "return (await Promise.all([tools.meet(), tools.meet()])).join(' ');", |_| None).await;
    assert_eq!(together.output("p"), "met met");
    let started = "const a = tools.meet(); const b = tools.meet(); return `${await a} ${await b}`;";
    assert_eq!(program(&exec, started, |_| None).await.output("p"), "met met");
    // A barrier's calls never overlap, whatever the program asks.
    let barrier = "await Promise.all([tools.solo(), tools.solo(), tools.solo()]); return 'ok';";
    assert_eq!(program(&exec, barrier, |_| None).await.output("p"), "ok");
    assert_eq!(most.load(Ordering::SeqCst), 1, "a barrier's calls overlapped");
    // A call the program starts and never awaits still ends before the
    // program's result: nothing is cut off midway.
    let left = program(&exec, "tools.solo(); return 'returned';", |_| None).await;
    assert_eq!(left.output("p"), "returned");
    assert!(left.trace().contains(&"completed:p/1".to_owned()), "{:?}", left.trace());
}

/// A program stopped by its call budget lets the calls it started end first:
/// a call in flight is recorded, never cut off midway.
#[tokio::test]
async fn a_program_stopped_by_its_budget_lets_its_calls_in_flight_end_first() {
    let mut limits = CodeLimits::default();
    limits.max_calls = 2;
    let exec = executor(limits).await;
    let code = "const slow = tools.nap({ ms: 300 }); await tools.nap({ ms: 10 }); await tools.nap({ ms: 0 });";
    let turn = program(&exec, code, |_| None).await;
    assert_eq!(error_of(&turn), "Tool error: the program made more than 2 tool calls");
    let trace = turn.trace();
    for id in ["p/1", "p/2"] {
        assert!(trace.contains(&format!("started:{id}")), "{trace:?}");
        assert!(trace.contains(&format!("completed:{id}")), "{id} was cut off: {trace:?}");
    }
}

/// A resumed program (docs/code-mode.md, "Resumed programs"): the calls its
/// journal holds are answered from it, not made again; a call that differs
/// from the journal's stops the program before it acts.
#[tokio::test]
async fn a_resumed_program_is_answered_from_its_journal_and_stopped_where_it_differs() {
    let exec = executor(CodeLimits::default()).await;
    let code = r#"
        const a = await tools.lookup_order({ order_id: "A-1001" });
        const b = await tools.lookup_order({ order_id: "A-1002" });
        return [a.note, b.id];
    "#;
    let args = json!({ "code": code }).to_string();
    let journaled = |arguments: &str| {
        let entry = json!({
            "id": "p/1", "name": "lookup_order", "arguments": arguments,
            "output": "journaled", "raw": {"id": "A-1001", "note": "from the journal"}, "is_error": false
        });
        lovia_host::exec::Journal::new([serde_json::from_value(entry).expect("a journaled call")])
    };
    // The same first call: answered from the journal (the plugin has no `note`).
    let state = RunState { journal: journaled(r#"{"order_id":"A-1001"}"#), ..RunState::default() };
    let turn = run(&exec, vec![call("p", "run_code", &args)], &state, |_| None).await;
    assert_eq!(turn.output("p"), r#"["from the journal","A-1002"]"#);
    // Another first call: stopped, saying why.
    let state = RunState { journal: journaled(r#"{"order_id":"A-9999"}"#), ..RunState::default() };
    let turn = run(&exec, vec![call("p", "run_code", &args)], &state, |_| None).await;
    assert!(
        error_of(&turn).contains(
            "This program was resumed after its host stopped, and its call p/1 is not the one it made before (lookup_order with other arguments)."
        ),
        "{}",
        error_of(&turn)
    );
    // A call started beside the one that differs does not act either.
    let code = r#"
        const [a, r] = await Promise.all([
            tools.lookup_order({ order_id: "A-1001" }),
            tools.refund({ order_id: "A-1003", amount_cents: 100 }),
        ]);
        return r;
    "#;
    let args = json!({ "code": code }).to_string();
    let state = RunState { journal: journaled(r#"{"order_id":"A-9999"}"#), ..RunState::default() };
    let turn = run(&exec, vec![call("p", "run_code", &args)], &state, |_| None).await;
    error_of(&turn);
    assert!(!turn.events.iter().any(|e| e.call == "p/2" && e.kind == "started"), "the refund ran: {:?}", turn.events);
}
