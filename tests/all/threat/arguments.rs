//! Issue 12, items 1, 4 (plugin names) and 8: argument checking cannot be
//! made exponential, it counts against the call's timeout, and what a plugin
//! declares for the model is bounded. Each attack is a real hostile guest.

use crate::exec::executor;
use lovia_host::{ErrorKind, ExecSettings, LoadError, RunState, Tool, ToolOutput};
use lovia_tests::turn::{call, run};
use lovia_tests::{fixtures, host, load};
use serde_json::{Value, json};
use std::time::{Duration, Instant};

/// `{"a": {"a": ... leaf ...}}` with `levels` keys.
fn nested(levels: usize, leaf: &str) -> String {
    format!("{}{leaf}{}", r#"{"a":"#.repeat(levels), "}".repeat(levels))
}

/// The union bomb's tool behind the executor with the timeout of
/// `lovia call --timeout-ms 100`.
async fn union_bomb_executor() -> lovia_host::Executor {
    let plugin = load(fixtures::UNION_BOMB).await;
    let tools = Tool::from_plugin(&plugin).into_iter().map(|t| t.with_timeout(Duration::from_millis(100))).collect();
    executor(tools, ExecSettings::default())
}

async fn load_error(path: &str) -> String {
    let err = host().load_file(path).await.expect_err("a hostile plugin must be refused");
    assert!(matches!(err, LoadError::InvalidSpec { .. } | LoadError::InvalidPlugin { .. }), "{err}");
    assert!(err.hint().is_some());
    err.to_string()
}

#[tokio::test]
async fn a_union_nested_14_deep_is_checked_in_linear_time() {
    let exec = union_bomb_executor().await;
    // 15 keys: the root object, 14 union levels, and the integer leaf,
    // given as a string that coercion must turn into 7 through every level.
    let args = nested(15, r#""7""#);
    let start = Instant::now();
    let turn = run(&exec, vec![call("c1", "nest", &args)], &RunState::default(), |_| None).await;
    let took = start.elapsed();
    println!("a {}-byte call through 14 nested unions: answered in {took:?}", args.len());
    let got: Value = serde_json::from_str(turn.output("c1")).unwrap_or_else(|e| panic!("{e}: {}", turn.output("c1")));
    assert_eq!(got, serde_json::from_str::<Value>(&nested(15, "7")).expect("json"), "coerced through every level");
    assert!(took < Duration::from_secs(2), "took {took:?}");
}

#[tokio::test]
async fn invalid_arguments_to_the_union_bomb_hit_the_work_budget() {
    // Invalid at the leaf: reporting why applies every branch at every
    // level (3^14 schema nodes at the leaf), which the estimate refuses.
    let args = nested(15, r#""x""#);
    let plugin = load(fixtures::UNION_BOMB).await;
    let exec = executor(Tool::from_plugin(&plugin), ExecSettings::default());
    let start = Instant::now();
    let turn = run(&exec, vec![call("c1", "nest", &args)], &RunState::default(), |_| None).await;
    let took = start.elapsed();
    println!("without a timeout, the invalid {}-byte call was refused in {took:?}", args.len());
    assert_eq!(
        turn.output("c1"),
        "Tool error: Invalid arguments for tool 'nest': arguments: Input is too large to check against this tool's schema (over 1000000 steps)"
    );
    assert_eq!(turn.results()[0].error_kind, Some(ErrorKind::InvalidArguments));
    assert!(took < Duration::from_secs(2), "took {took:?}");

    // With `--timeout-ms 100`, as in the issue, the check also stops at the
    // call's deadline if that comes first.
    let exec = union_bomb_executor().await;
    let start = Instant::now();
    let turn = run(&exec, vec![call("c1", "nest", &args)], &RunState::default(), |_| None).await;
    let took = start.elapsed();
    println!("with a 100 ms timeout, it was answered in {took:?}: {}", turn.output("c1"));
    assert!(
        ["Tool error: timed out after 100 ms", "(over 1000000 steps)"].iter().any(|t| turn.output("c1").ends_with(t)),
        "{}",
        turn.output("c1")
    );
    assert!(took < Duration::from_millis(600), "took {took:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_neighbour_answers_while_union_bombs_are_checked() {
    let exec = union_bomb_executor().await;
    let diag = load(fixtures::DIAGNOSTICS).await;
    let neighbour = executor(Tool::from_plugin(&diag), ExecSettings::default());
    // As many attacking turns as the runtime has workers, each with calls
    // that run the check to its budget, then a neighbour's call.
    let attacks: Vec<_> = (0..2)
        .map(|i| {
            let exec = exec.clone();
            tokio::spawn(async move {
                let calls = (0..5).map(|j| call(&format!("bomb{i}.{j}"), "nest", &nested(15, r#""x""#))).collect();
                run(&exec, calls, &RunState::default(), |_| None).await
            })
        })
        .collect();
    let start = Instant::now();
    let turn =
        run(&neighbour, vec![call("n", "echo", r#"{"text": "still here"}"#)], &RunState::default(), |_| None).await;
    let took = start.elapsed();
    println!("the neighbour's call answered in {took:?} during the attack");
    assert_eq!(turn.output("n"), "still here");
    assert!(took < Duration::from_secs(2), "took {took:?}");
    for attack in attacks {
        let turn = attack.await.expect("attack turn");
        assert_eq!(turn.results().len(), 5);
        // Each stops at its budget or at its 100 ms deadline, whichever comes first.
        for r in turn.results() {
            assert!(
                ["Tool error: timed out after 100 ms", "(over 1000000 steps)"].iter().any(|t| r.output.ends_with(t)),
                "{r:?}"
            );
        }
    }
}

/// Issue 26, item 1: a parameter whose `pattern` is `a[ab]{300}[^ab]`
/// (about 300 automaton states, within the load-time bound of 2,000). Two
/// turns send it 1 MiB (once a minute of the service's CPU, on its async
/// workers), 10 KB and 1 KB at once, under a 1 s timeout, while a
/// neighbour calls `echo`.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_costly_pattern_is_capped_charged_and_kept_off_the_async_workers() {
    let plugin = load(fixtures::REGEX_BOMB).await;
    let tools = Tool::from_plugin(&plugin).into_iter().map(|t| t.with_timeout(Duration::from_secs(1))).collect();
    let exec = executor(tools, ExecSettings::default());
    let diag = load(fixtures::DIAGNOSTICS).await;
    let neighbour = executor(Tool::from_plugin(&diag), ExecSettings::default());
    let text = |n: usize| json!({"text": "a".repeat(n)}).to_string();
    let attacks: Vec<_> = (0..2)
        .map(|i| {
            let exec = exec.clone();
            let calls = vec![
                call(&format!("mib{i}"), "match_text", &text(1 << 20)),
                call(&format!("tenk{i}"), "match_text", &text(10_000)),
                call(&format!("onek{i}"), "match_text", &text(1_000)),
            ];
            tokio::spawn(async move {
                let start = Instant::now();
                let turn = run(&exec, calls, &RunState::default(), |_| None).await;
                (turn, start.elapsed())
            })
        })
        .collect();
    let start = Instant::now();
    let turn =
        run(&neighbour, vec![call("n", "echo", r#"{"text": "still here"}"#)], &RunState::default(), |_| None).await;
    let took = start.elapsed();
    assert_eq!(turn.output("n"), "still here");
    for (i, attack) in attacks.into_iter().enumerate() {
        let (turn, elapsed) = attack.await.expect("attack turn");
        println!(
            "regex bomb turn {i} (1 MiB, 10 KB, 1 KB) answered in {elapsed:?}: {:?}",
            turn.results()
                .iter()
                .map(|r| r.output.chars().rev().take(60).collect::<String>().chars().rev().collect::<String>())
                .collect::<Vec<_>>()
        );
        assert_eq!(
            turn.output(&format!("mib{i}")),
            "Tool error: Invalid arguments for tool 'match_text': arguments: Input is too long to match against this tool's patterns (a string over 65536 bytes)"
        );
        assert_eq!(
            turn.output(&format!("tenk{i}")),
            "Tool error: Invalid arguments for tool 'match_text': arguments: Input is too large to check against this tool's schema (over 1000000 steps)"
        );
        // Within the budget the pattern is matched (the text has no match),
        // unless the 1 s timeout comes first.
        let onek = turn.output(&format!("onek{i}"));
        assert!(
            onek.ends_with("text: String should match pattern 'a[ab]{300}[^ab]'")
                || onek == "Tool error: timed out after 1000 ms",
            "{onek}"
        );
        assert!(elapsed < Duration::from_millis(1500), "turn {i} took {elapsed:?}");
    }
    println!("the neighbour's call answered in {took:?} during the regex bombs");
    assert!(took < Duration::from_millis(500), "took {took:?}");
}

#[tokio::test]
async fn a_ref_bomb_is_refused_at_load() {
    let path = fixtures::REF_BOMB;
    assert_eq!(
        load_error(path).await,
        format!(
            "{path}: tool `ref_bomb`: the parameters schema lets 16384 schema nodes apply at nesting depth 13 of the arguments; the limit is 10000"
        )
    );
}

#[tokio::test]
async fn arguments_nested_past_the_limit_are_rejected() {
    let diag = load(fixtures::DIAGNOSTICS).await;
    let exec = executor(Tool::from_plugin(&diag), ExecSettings::default());
    let deep = format!(r#"{{"text": {}"x"{}}}"#, "[".repeat(64), "]".repeat(64));
    let within = format!(r#"{{"text": {}"x"{}}}"#, "[".repeat(63), "]".repeat(63));
    let calls = vec![call("deep", "echo", &deep), call("within", "echo", &within)];
    let turn = run(&exec, calls, &RunState::default(), |_| None).await;
    assert_eq!(
        turn.output("deep"),
        "Tool error: Invalid arguments for tool 'echo': arguments: Input should be nested at most 64 levels deep"
    );
    // One level less is checked against the schema as usual.
    assert_eq!(
        turn.output("within"),
        "Tool error: Invalid arguments for tool 'echo': text: Input should be a valid string, got array"
    );
}

/// A host-native tool (the executor's clock is what is under test) whose
/// arguments are an array of integers, and which sleeps for 10 s.
fn slow_to_check() -> Tool {
    Tool::builder("tally")
        .parameters(json!({
            "properties": {"xs": {"items": {"type": "integer"}, "type": "array"}},
            "required": ["xs"], "type": "object", "additionalProperties": false
        }))
        .invoke(|_, _| async {
            tokio::time::sleep(Duration::from_secs(10)).await;
            Ok(ToolOutput::Text("done".into()))
        })
        .expect("tool")
}

#[tokio::test]
async fn argument_checks_count_against_the_call_timeout() {
    // 400,000 integers sent as strings: every one is coerced, so the check
    // is slow (about 800,000 steps, within the budget).
    let items: Vec<String> = (0..400_000).map(|i| format!("\"{}\"", i % 10)).collect();
    let args = format!(r#"{{"xs": [{}]}}"#, items.join(","));
    let tool = slow_to_check();
    let validator = lovia_host::ArgumentValidator::new("tally", &tool.spec().parameters, false).expect("schema");
    let start = Instant::now();
    validator.prepare(&args).expect("valid arguments");
    let check = start.elapsed();

    // The check fits in the timeout with 200 ms to spare, the body does not:
    // the call ends at the timeout, not at the check plus the timeout.
    let timeout = check + Duration::from_millis(200);
    let exec = executor(vec![tool.clone().with_timeout(timeout)], ExecSettings::default());
    let start = Instant::now();
    let turn = run(&exec, vec![call("c", "tally", &args)], &RunState::default(), |_| None).await;
    let took = start.elapsed();
    println!("check alone {check:?}; timeout {timeout:?}; the call ended after {took:?}");
    assert_eq!(turn.output("c"), format!("Tool error: timed out after {} ms", timeout.as_millis()));
    assert!(took < timeout + check / 2 + Duration::from_millis(50), "took {took:?} with a {timeout:?} timeout");

    // A timeout shorter than the check: the check itself stops at the deadline.
    let exec = executor(vec![tool.with_timeout(Duration::from_millis(5))], ExecSettings::default());
    let start = Instant::now();
    let turn = run(&exec, vec![call("c", "tally", &args)], &RunState::default(), |_| None).await;
    let took = start.elapsed();
    println!("with a 5 ms timeout the check gave up after {took:?}");
    assert_eq!(turn.output("c"), "Tool error: timed out after 5 ms");
    assert_eq!(turn.results()[0].error_kind, Some(ErrorKind::Timeout));
    assert!(took < check, "took {took:?}, the whole check takes {check:?}");
}

#[tokio::test]
async fn a_huge_description_is_refused_at_load() {
    let path = fixtures::HUGE_DESCRIPTION;
    assert_eq!(
        load_error(path).await,
        format!("{path}: tool `verbose`: the description is 12582912 bytes; the limit is 4096")
    );
}

#[tokio::test]
async fn huge_instructions_are_refused_at_load() {
    let path = fixtures::HUGE_INSTRUCTIONS;
    assert_eq!(
        load_error(path).await,
        format!("{path}: the plugin's instructions are 1048576 bytes; the limit is 8192")
    );
}

#[tokio::test]
async fn a_plugin_name_that_forges_log_lines_is_refused_at_load() {
    let path = fixtures::BAD_PLUGIN_NAME;
    assert_eq!(
        load_error(path).await,
        format!(
            r#"{path}: the plugin name "evil\nlevel=info msg=\"admin granted\" xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx" must match ^[a-zA-Z0-9_-]{{1,64}}$"#
        )
    );
}

#[tokio::test]
async fn thousands_of_tools_are_refused_at_load() {
    let path = fixtures::MANY_TOOLS;
    assert_eq!(load_error(path).await, format!("{path}: the plugin declares 5000 tools; the limit is 128"));
}

#[tokio::test]
async fn a_plugin_putting_megabytes_before_the_model_is_refused_at_load() {
    let path = fixtures::WIDE_PLUGIN;
    assert_eq!(
        load_error(path).await,
        format!(
            "{path}: the plugin's instructions, tool names, descriptions and schemas are 1504690 bytes; the limit is 1048576"
        )
    );
}

#[test]
fn host_native_tools_have_the_same_description_cap() {
    let err = Tool::builder("wordy")
        .description("x".repeat(5000))
        .invoke(|_, _| async { Ok(ToolOutput::Text(String::new())) })
        .expect_err("too long");
    assert_eq!(err.to_string(), "tool 'wordy': the description is 5000 bytes; the limit is 4096");
}
