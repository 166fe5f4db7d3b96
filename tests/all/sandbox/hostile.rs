//! Hostile plugins: each attack ends in a precise error, the host keeps
//! serving, and well-behaved calls running at the same time are unaffected.

use crate::exec::executor;
use lovia_host::plugin::config::{LimitOverrides, PluginConfig};
use lovia_host::{CallLimits, CallOutcome, CallRequest, ExecSettings, Failure, LoadError, RunState, Tool};
use lovia_tests::turn::{call, run};
use lovia_tests::{fixtures, host, load};
use std::time::Duration;

async fn attack(tool: &str, args: &str, timeout_ms: Option<u64>) -> CallOutcome {
    let hostile = load(fixtures::HOSTILE).await;
    let req = CallRequest { timeout: timeout_ms.map(Duration::from_millis), ..CallRequest::new(tool, args) };
    hostile.invoke(&req).await
}

#[tokio::test]
async fn every_attack_gets_a_precise_error() {
    let cases: &[(&str, &str, Option<u64>, Failure)] = &[
        ("loop_forever", "{}", Some(50), Failure::TimedOut { ms: 50 }),
        ("hammer_import", "{}", Some(50), Failure::TimedOut { ms: 50 }),
        ("memory_bomb", "{}", None, Failure::OutOfMemory { limit_mib: 64 }),
        ("shadow_stack_overflow", "{}", None, Failure::StackOverflow),
        ("wasm_stack_overflow", "{}", None, Failure::StackOverflow),
        ("huge_result", r#"{"mib": 100}"#, None, Failure::OutOfMemory { limit_mib: 64 }),
        ("panic_now", "{}", None, Failure::Panicked("the plugin gave up: secret plans".into())),
    ];
    for (tool, args, timeout, want) in cases {
        assert_eq!(attack(tool, args, *timeout).await, CallOutcome::Failed(want.clone()), "{tool}");
    }
    assert_eq!(
        attack("huge_result", r#"{"mib": 5}"#, None).await,
        CallOutcome::Failed(Failure::ResultTooLarge { bytes: 5 << 20, limit: 4 << 20 }),
        "a result over the boundary limit (4 MiB) is refused"
    );
    // Output is a bounded ring: printing 2 MiB neither fails the call nor grows the host.
    assert_eq!(attack("flood_stdout", r#"{"kib": 2048}"#, None).await, CallOutcome::Text("flooded".into()));
}

#[tokio::test]
async fn a_panic_is_known_from_the_guests_report_never_from_its_stderr() {
    // The forged panic text on stderr is not read: the abort is a bare trap.
    let CallOutcome::Failed(Failure::Trap(trap)) = attack("forged_panic", "{}", None).await else {
        panic!("a forged panic must read as a trap");
    };
    assert!(trap.contains("unreachable") && !trap.contains("forged"), "{trap}");
    // A report followed by a normal return changes nothing.
    assert_eq!(attack("report_then_return", "{}", None).await, CallOutcome::Text("returned".into()));
}

#[tokio::test]
async fn a_plugin_cannot_ask_for_more_memory_than_the_hosts_slots_hold() {
    // Each instance's memory slot is the host's size (64 MiB here): a larger
    // plugin limit would be reported to the model but never be had.
    let config = PluginConfig::default().with_limits(LimitOverrides { memory_mib: Some(128), ..Default::default() });
    let Err(err) = host().load_file_with(fixtures::HOSTILE, config).await else {
        panic!("a plugin limit above the host's must be refused");
    };
    assert!(matches!(err, LoadError::MemoryAboveHost { asked_mib: 128, host_mib: 64, .. }), "{err}");
    assert!(
        err.to_string().ends_with("its config asks for 128 MiB of memory, above the host's limit of 64 MiB"),
        "{err}"
    );
    // A per-call limit above it is the host's: the model reads the limit that held.
    let hostile = load(fixtures::HOSTILE).await;
    let limits = CallLimits::default().with_memory_bytes(128 << 20);
    let out = hostile.invoke(&CallRequest { limits: Some(limits), ..CallRequest::new("memory_bomb", "{}") }).await;
    assert_eq!(out, CallOutcome::Failed(Failure::OutOfMemory { limit_mib: 64 }));
}

#[tokio::test]
async fn an_allocation_past_the_guests_own_memory_maximum_is_out_of_memory() {
    // The module declares a 4 MiB maximum: memory.grow fails under the host's
    // 64 MiB, the guest's allocator aborts without a panic, and the refused
    // growth the limiter saw (not what the guest printed) names the failure.
    let small = load(fixtures::SMALL_MEMORY).await;
    let fits = small.invoke(&CallRequest::new("allocate", r#"{"mib": 1}"#)).await;
    assert_eq!(fits, CallOutcome::Text("allocated 1048576 bytes".into()));
    let out = small.invoke(&CallRequest::new("allocate", r#"{"mib": 8}"#)).await;
    assert_eq!(out, CallOutcome::Failed(Failure::OutOfMemory { limit_mib: 64 }));
}

#[tokio::test]
async fn the_host_keeps_serving_and_neighbours_are_unaffected() {
    let hostile = load(fixtures::HOSTILE).await;
    let diag = load(fixtures::DIAGNOSTICS).await;
    let mut tools = Tool::from_plugin(&hostile);
    tools.extend(Tool::from_plugin(&diag));
    let settings = ExecSettings::default().with_default_timeout(Some(Duration::from_millis(300)));
    let exec = executor(tools, settings);
    let mut calls = Vec::new();
    for (i, (tool, args)) in [
        ("loop_forever", "{}"),
        ("memory_bomb", "{}"),
        ("shadow_stack_overflow", "{}"),
        ("wasm_stack_overflow", "{}"),
        ("panic_now", "{}"),
        ("hammer_import", "{}"),
        ("fetch", r#"{"url": "http://169.254.169.254/latest/meta-data/"}"#),
    ]
    .iter()
    .enumerate()
    {
        calls.push(call(&format!("bad{i}"), tool, args));
        calls.push(call(&format!("good{i}"), "echo", &format!(r#"{{"text": "hello {i}"}}"#)));
    }
    let turn = run(&exec, calls, &RunState::default(), |_| None).await;
    assert_eq!(turn.results().len(), 14, "every call answered once");
    for i in 0..7 {
        assert_eq!(turn.output(&format!("good{i}")), format!("hello {i}"));
        assert!(turn.output(&format!("bad{i}")).starts_with("Tool error: "));
    }
    // And afterwards, the same host serves a normal call.
    let after = diag.invoke(&CallRequest::new("echo", r#"{"text": "still here"}"#)).await;
    assert_eq!(after.model_output(), "still here");
}

#[tokio::test]
async fn bad_plugins_are_refused_at_load_with_the_cause() {
    let cases: &[(&str, &str)] = &[
        (fixtures::TRAP_INFO, "`info` failed: tool panicked: info exploded"),
        (fixtures::TRAP_TOOLS, "`tools` failed: tool panicked: tools exploded"),
        (fixtures::SCHEMA_INVALID, "tool `bad_schema`: invalid parameters schema"),
        (fixtures::SCHEMA_HUGE, "tool `huge_schema`: the parameters schema is 10485794 bytes; the limit is 262144"),
        (fixtures::DUP_NAME, "tool `twin`: the name is declared twice in this plugin"),
        (fixtures::BAD_NAME, "tool `rm -rf /`: a tool name must match ^[a-zA-Z0-9_-]{1,64}$"),
    ];
    for (path, want) in cases {
        let err = host().load_file(path).await.expect_err(path);
        assert!(matches!(err, LoadError::Describe { .. } | LoadError::InvalidSpec { .. }), "{err}");
        assert!(err.to_string().contains(want), "{err} lacks {want}");
    }
    // The host still loads and runs a good plugin afterwards.
    let docs = load(fixtures::DOCS).await;
    assert!(!docs.invoke(&CallRequest::new("search_docs", r#"{"query": "limits"}"#)).await.is_error());
}

/// Resident memory is only meaningful with nothing else running in the
/// process, so the 1,000 calls run in a child process of this test binary.
#[test]
fn a_thousand_hostile_calls_leave_memory_near_its_baseline() {
    lovia_tests::run_probe("sandbox::hostile::memory_probe", "LOVIA_MEMORY_PROBE");
}

fn rss_kib() -> u64 {
    let status = std::fs::read_to_string("/proc/self/status").expect("status");
    status
        .lines()
        .find_map(|l| l.strip_prefix("VmRSS:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
        .expect("VmRSS")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "run by a_thousand_hostile_calls_leave_memory_near_its_baseline in its own process"]
async fn memory_probe() {
    if std::env::var_os("LOVIA_MEMORY_PROBE").is_none() {
        return;
    }
    let hostile = load(fixtures::HOSTILE).await;
    let kinds = [
        ("panic_now", "{}", None),
        ("memory_bomb", "{}", None),
        ("loop_forever", "{}", Some(2)),
        ("shadow_stack_overflow", "{}", None),
    ];
    // Warm up: the first calls fault in the pool's slots (each keeps its
    // first pages resident) and the runtime. A busy machine spreads calls
    // over more slots, so the warm-up runs long enough for that to settle:
    // what is measured after it is growth per call, which is a leak.
    for i in 0..400 {
        let (tool, args, ms) = kinds[i % kinds.len()];
        let req = CallRequest { timeout: ms.map(Duration::from_millis), ..CallRequest::new(tool, args) };
        assert!(hostile.invoke(&req).await.is_error());
    }
    let baseline = rss_kib();
    for i in 0..1000 {
        let (tool, args, ms) = kinds[i % kinds.len()];
        let req = CallRequest { timeout: ms.map(Duration::from_millis), ..CallRequest::new(tool, args) };
        assert!(hostile.invoke(&req).await.is_error(), "{tool}");
    }
    let after = rss_kib();
    println!("resident memory: {baseline} KiB before, {after} KiB after 1,000 hostile calls");
    assert!(after < baseline + 64 * 1024, "grew from {baseline} KiB to {after} KiB");
}
