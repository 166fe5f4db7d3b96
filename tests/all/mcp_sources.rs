//! MCP servers as tool sources: `lovia run --mcp-servers` with a real
//! Python MCP server (tests/mcp/source_server.py, official `mcp` package)
//! driven by a scripted model (docs/mcp.md, "MCP servers as tool sources";
//! docs/semantics.md §20). The server runs confined, as every command
//! server does by default; confined.rs tests the confinement itself.

mod confined;
pub(crate) mod http;
mod tasks;

use crate::mcp::{python, root};
use lovia_tests::fixtures;
use serde_json::{Value, json};
use std::path::PathBuf;
use std::process::{Command, Output};

/// A scratch directory with the server list, the script and the call log.
struct Case {
    dir: tempfile::TempDir,
    py: PathBuf,
}

impl Case {
    /// `None` when the `mcp-client` part is opted out (`LOVIA_SKIP`); a
    /// failed test when the Python MCP package is missing.
    fn new() -> Option<Self> {
        let py = python()?;
        Some(Self { dir: tempfile::tempdir().expect("tempdir"), py })
    }

    fn log(&self) -> PathBuf {
        self.dir.path().join("calls.jsonl")
    }

    /// A `[[mcp_servers]]` table for the test server, with `extra` lines,
    /// confined (the default) with the grants it needs: its script read-only,
    /// this case's directory (the call log) read-write.
    fn server(&self, name: &str, extra: &str) -> String {
        self.server_with(name, "source_server.py", &self.sandbox(""), extra)
    }

    /// The `sandbox` table granting what the test servers need, with `more`
    /// keys (`, network = true`).
    fn sandbox(&self, more: &str) -> String {
        format!(
            "{{ read_only = [{:?}], read_write = [{:?}]{more} }}",
            root().join("tests/mcp").display().to_string(),
            self.dir.path().display().to_string()
        )
    }

    /// A `[[mcp_servers]]` table for the script `tests/mcp/<script>` with
    /// `sandbox` as its sandbox table (`""`: no `sandbox` key).
    fn server_with(&self, name: &str, script: &str, sandbox: &str, extra: &str) -> String {
        let script = root().join("tests/mcp").join(script);
        let sandbox = if sandbox.is_empty() { String::new() } else { format!("sandbox = {sandbox}\n") };
        format!(
            "[[mcp_servers]]\nname = {name:?}\ncommand = {:?}\nargs = [{:?}]\nenv = {{ CALL_LOG = {:?} }}\n{sandbox}{extra}\n",
            self.py.display().to_string(),
            script.display().to_string(),
            self.log().display().to_string(),
        )
    }

    /// Runs `lovia run` with `servers` (TOML) and `turns`; `plugins` too.
    fn run(&self, servers: &str, turns: Value, plugins: &[&str]) -> (Output, Vec<Value>) {
        self.run_with_env(servers, turns, plugins, &[])
    }

    /// As [`Case::run`], with `env` added to lovia's environment.
    fn run_with_env(
        &self,
        servers: &str,
        turns: Value,
        plugins: &[&str],
        env: &[(&str, &str)],
    ) -> (Output, Vec<Value>) {
        self.run_script(servers, &json!({"turns": turns}), plugins, env)
    }

    /// As [`Case::run_with_env`], with the whole script (agent settings too).
    fn run_script(
        &self,
        servers: &str,
        script: &Value,
        plugins: &[&str],
        env: &[(&str, &str)],
    ) -> (Output, Vec<Value>) {
        let servers_path = self.dir.path().join("servers.toml");
        std::fs::write(&servers_path, servers).expect("write servers");
        let script_path = self.dir.path().join("script.json");
        std::fs::write(&script_path, script.to_string()).expect("write script");
        let mut cmd = Command::new(env!("CARGO_BIN_EXE_lovia"));
        cmd.args(["--no-cache", "run"]).arg("--mcp-servers").arg(&servers_path).arg("--script").arg(&script_path);
        for p in plugins {
            cmd.args(["--plugin", p]);
        }
        cmd.envs(env.iter().copied());
        let o = cmd.output().expect("run lovia");
        let events = String::from_utf8_lossy(&o.stdout)
            .lines()
            .map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("{l}: {e}")))
            .collect();
        (o, events)
    }

    /// The calls the server saw: (pid, tool, arguments).
    fn calls(&self) -> Vec<(u64, String, Value)> {
        let text = std::fs::read_to_string(self.log()).unwrap_or_default();
        text.lines()
            .map(|l| {
                let v: Value = serde_json::from_str(l).expect("log line");
                (
                    v["instance"].as_u64().expect("instance"),
                    v["tool"].as_str().expect("tool").to_owned(),
                    v["arguments"].clone(),
                )
            })
            .collect()
    }
}

fn stderr(o: &Output) -> String {
    String::from_utf8_lossy(&o.stderr).into_owned()
}

/// A turn of calls: (id, name, arguments).
fn calls(list: &[(&str, &str, Value)]) -> Value {
    let calls: Vec<Value> =
        list.iter().map(|(id, name, args)| json!({"id": id, "name": name, "arguments": args.to_string()})).collect();
    json!({"tool_calls": calls})
}

/// The output the model read for call `id`.
fn output<'a>(events: &'a [Value], id: &str) -> &'a str {
    events
        .iter()
        .find(|e| e["event"] == "tool_result" && e["id"] == id)
        .and_then(|e| e["result"].as_str())
        .unwrap_or_else(|| panic!("no completed call {id} in {events:#?}"))
}

fn completed(o: &Output, events: &[Value]) {
    assert_eq!(o.status.code(), Some(0), "stderr: {}\nevents: {events:#?}", stderr(o));
    assert_eq!(events.last().map(|e| &e["event"]), Some(&json!("run_completed")), "{events:#?}");
}

#[test]
fn tools_are_prefixed_and_filtered_on_raw_names() {
    let Some(case) = Case::new() else { return };
    let servers = format!(
        "{}{}",
        case.server("src", "exclude = [\"secret\"]"),
        case.server("alt", "prefix = \"alt_\"\ninclude = [\"echo\"]")
    );
    let turns = json!([
        calls(&[
            ("a", "src__echo", json!({"text": "hi"})),
            ("b", "alt_echo", json!({"text": "there"})),
            ("c", "src__secret", json!({})),
            ("d", "alt_add", json!({"a": 1, "b": 2})),
            ("e", "echo", json!({"text": "raw"})),
            ("f", "src__broken", json!({})),
            ("g", "src__tasks_only", json!({})),
        ]),
        {"text": "done"}
    ]);
    let (o, events) = case.run(&servers, turns, &[]);
    completed(&o, &events);
    assert_eq!(output(&events, "a"), "hi");
    assert_eq!(output(&events, "b"), "there");
    assert_eq!(output(&events, "c"), "Tool 'src__secret' is not available.", "excluded");
    assert_eq!(output(&events, "d"), "Tool 'alt_add' is not available.", "not included");
    assert_eq!(output(&events, "e"), "Tool 'echo' is not available.", "only prefixed names");
    assert_eq!(output(&events, "f"), "Tool 'src__broken' is not available.", "a schema that does not compile");
    // Called as a task (tasks.rs); this server answers such a call at once.
    assert_eq!(output(&events, "g"), "asked as a task", "it runs only as a task");
    let err = stderr(&o);
    assert!(
        err.contains("mcp server 'src': tool \"broken\" refused: tool 'src__broken'"),
        "the reason is logged: {err}"
    );
    let mut seen: Vec<String> = case.calls().into_iter().map(|(_, t, _)| t).collect();
    seen.sort();
    assert_eq!(seen, ["echo", "echo", "tasks_only"], "only the selected calls reached a server");
}

#[test]
fn results_and_invalid_arguments() {
    let Some(case) = Case::new() else { return };
    let turns = json!([
        calls(&[
            ("sum", "src__add", json!({"a": 2, "b": 3})),
            ("bad", "src__add", json!({"a": "two", "b": 3})),
            ("missing", "src__add", json!({"a": 2})),
            ("bare", "src__bare", json!({})),
        ]),
        {"text": "done"}
    ]);
    let (o, events) = case.run(&case.server("src", ""), turns, &[]);
    completed(&o, &events);
    assert_eq!(output(&events, "sum"), "5");
    for id in ["bad", "missing"] {
        let out = output(&events, id);
        assert!(out.starts_with("Tool error: ") && out.contains("src__add"), "{id}: {out}");
    }
    assert_eq!(output(&events, "bare"), "bare");
    // The calls of a turn run in parallel: the log's order is not fixed.
    let mut seen: Vec<(String, Value)> = case.calls().into_iter().map(|(_, t, a)| (t, a)).collect();
    seen.sort_by(|a, b| a.0.cmp(&b.0));
    assert_eq!(
        seen,
        [("add".to_owned(), json!({"a": 2, "b": 3})), ("bare".to_owned(), json!({}))],
        "invalid calls never reached the server"
    );
}

#[test]
fn an_is_error_result_and_an_image_are_text() {
    let Some(case) = Case::new() else { return };
    let turns = json!([
        calls(&[("fail", "src__fail", json!({"message": "disk full"})), ("pic", "src__picture", json!({}))]),
        {"text": "done"}
    ]);
    let (o, events) = case.run(&case.server("src", ""), turns, &[]);
    completed(&o, &events);
    // A successful call whose output says the tool failed (the reference's string).
    assert_eq!(output(&events, "fail"), "[tool error] disk full");
    let ok = events.iter().find(|e| e["event"] == "tool_result" && e["id"] == "fail").expect("fail");
    assert!(ok.get("error").is_none_or(Value::is_null), "not a failed call: {ok}");
    assert_eq!(output(&events, "pic"), "a chart\n[image: image/png, 16 B]");
}

#[test]
fn a_server_that_dies_mid_call_fails_that_call_and_is_restarted() {
    let Some(case) = Case::new() else { return };
    let turns = json!([
        calls(&[("crash", "src__crash", json!({}))]),
        calls(&[("after", "src__echo", json!({"text": "back"}))]),
        {"text": "done"}
    ]);
    let (o, events) = case.run(&case.server("src", ""), turns, &[]);
    completed(&o, &events);
    let failed = output(&events, "crash");
    assert!(failed.starts_with("Tool error: MCP tool 'crash' failed: "), "{failed}");
    assert!(failed.contains("\n  hint: "), "{failed}");
    assert_eq!(output(&events, "after"), "back");
    let pids: Vec<u64> = case.calls().into_iter().map(|(pid, _, _)| pid).collect();
    assert_eq!(pids.len(), 2, "{pids:?}");
    assert_ne!(pids[0], pids[1], "the second call ran in a new process");
}

#[test]
fn a_message_over_the_bound_fails_the_call_and_restarts_the_server() {
    let Some(case) = Case::new() else { return };
    // One JSON-RPC line of over 5 MiB against lovia's 4 MiB bound.
    let turns = json!([
        calls(&[("big", "src__huge", json!({"bytes": 5 << 20}))]),
        calls(&[("small", "src__huge", json!({"bytes": 3})), ("after", "src__echo", json!({"text": "back"}))]),
        {"text": "done"}
    ]);
    let (o, events) = case.run(&case.server("src", ""), turns, &[]);
    completed(&o, &events);
    let failed = output(&events, "big");
    assert!(
        failed.starts_with("Tool error: MCP tool 'huge' failed: the server sent a message over 4194304 bytes"),
        "{failed}"
    );
    assert_eq!(output(&events, "small"), "xxx");
    assert_eq!(output(&events, "after"), "back");
    let pids: Vec<u64> = case.calls().into_iter().map(|(pid, _, _)| pid).collect();
    assert_eq!(pids.len(), 3, "{pids:?}");
    assert_ne!(pids[0], pids[1], "the server was restarted after the oversized message");
}

#[test]
fn a_list_change_is_seen_on_the_next_turn() {
    let Some(case) = Case::new() else { return };
    let turns = json!([
        calls(&[("before", "src__extra", json!({})), ("grow", "src__grow", json!({}))]),
        calls(&[("after", "src__extra", json!({}))]),
        {"text": "done"}
    ]);
    let (o, events) = case.run(&case.server("src", ""), turns, &[]);
    completed(&o, &events);
    assert_eq!(output(&events, "before"), "Tool 'src__extra' is not available.");
    assert_eq!(output(&events, "grow"), "grown");
    assert_eq!(output(&events, "after"), "extra");
}

#[test]
fn a_name_clash_names_both_sources() {
    let Some(case) = Case::new() else { return };
    let (o, _) = case.run(&case.server("src", "prefix = \"\""), json!([{"text": "done"}]), &[fixtures::DIAGNOSTICS]);
    assert_ne!(o.status.code(), Some(0));
    let err = stderr(&o);
    assert!(
        err.contains("Tool name conflict for 'echo' from mcp server 'src' (already from plugin)."),
        "both sources named: {err}"
    );
    assert!(case.calls().is_empty());
}

#[test]
fn an_unknown_config_key_is_named() {
    let Some(case) = Case::new() else { return };
    let (o, _) = case.run(&case.server("src", "environment = { A = \"1\" }"), json!([{"text": "done"}]), &[]);
    assert_eq!(o.status.code(), Some(2), "{}", stderr(&o));
    let err = stderr(&o);
    assert!(err.contains("unknown field `environment`"), "{err}");
    assert!(err.contains("env_from"), "the allowed keys are listed: {err}");
}

#[test]
fn a_json_rpc_error_answer_says_the_server_keeps_running() {
    let Some(case) = Case::new() else { return };
    let turns = json!([
        calls(&[("rpc", "src__rpc_error", json!({}))]),
        calls(&[("after", "src__echo", json!({"text": "still here"}))]),
        {"text": "done"}
    ]);
    let (o, events) = case.run(&case.server("src", ""), turns, &[]);
    completed(&o, &events);
    assert_eq!(
        output(&events, "rpc"),
        "Tool error: MCP tool 'rpc_error' failed: the server answered with error -32602: no such row\n  hint: The MCP server \
         answered this call with an error instead of a result; it keeps running. Check the arguments against the tool's \
         description, or continue without this tool."
    );
    assert_eq!(output(&events, "after"), "still here");
    let pids: Vec<u64> = case.calls().into_iter().map(|(pid, _, _)| pid).collect();
    assert_eq!(pids.len(), 2);
    assert_eq!(pids[0], pids[1], "the same process answered both calls: it was not restarted");
}

#[test]
fn a_servers_progress_becomes_tool_progress_events_of_its_call() {
    let Some(case) = Case::new() else { return };
    let turns = json!([calls(&[("s", "src__steps", json!({}))]), {"text": "done"}]);
    // rmcp hands each notification to a task of its own, so the order they
    // reach lovia in is the scheduler's: one that arrives after a later one
    // is dropped (progress only increases), and one that arrives after the
    // result is past its call. What reaches the call is in order.
    let (o, events) = case.run(&case.server_with("src", "source_server.py", "{ mode = \"off\" }", ""), turns, &[]);
    completed(&o, &events);
    assert_eq!(output(&events, "s"), "stepped");
    let progress: Vec<&str> = events
        .iter()
        .filter(|e| e["event"] == "tool_progress" && e["id"] == "s")
        .map(|e| e["message"].as_str().expect("message"))
        .collect();
    let steps = ["step 1 of 3", "step 2 of 3", "step 3 of 3"];
    assert!(!progress.is_empty(), "no progress reached the call");
    let at: Vec<usize> =
        progress.iter().map(|m| steps.iter().position(|s| s == m).unwrap_or_else(|| panic!("{m}"))).collect();
    assert!(at.windows(2).all(|w| w[0] < w[1]), "progress went back: {progress:?}");
}

/// `needs_approval` as rules over the tool and its arguments: only the
/// calls a rule matches ask (and, with the handler denying, never reach
/// the server); the others run. A rule with an unknown key is refused,
/// naming it and the allowed keys.
#[test]
fn approval_rules_ask_only_for_the_calls_they_match() {
    let Some(case) = Case::new() else { return };
    let rules = r#"needs_approval = [{ tool = "write_file", pointer = "/path", prefix = "/etc" }, { pointer = "/a", equals = 13 }]"#;
    let servers = case.server("src", rules);
    let turns = json!([
        calls(&[
            ("etc", "src__write_file", json!({"path": "/etc/passwd"})),
            ("notes", "src__write_file", json!({"path": "notes.txt"})),
            ("thirteen", "src__add", json!({"a": 13, "b": 1})),
            ("sum", "src__add", json!({"a": 1, "b": 2})),
        ]),
        {"text": "Done."}
    ]);
    let script = json!({"agent": {"approval_handler": "deny"}, "turns": turns});
    let (o, events) = case.run_script(&servers, &script, &[], &[]);
    completed(&o, &events);
    let asked: Vec<&str> =
        events.iter().filter(|e| e["event"] == "approval_required").filter_map(|e| e["id"].as_str()).collect();
    assert_eq!(asked, ["etc", "thirteen"], "{events:#?}");
    assert_eq!(output(&events, "etc"), "Tool src__write_file was not approved.");
    assert_eq!(output(&events, "sum"), "3");
    let reached: Vec<String> = case.calls().into_iter().map(|(_, tool, args)| format!("{tool} {args}")).collect();
    assert_eq!(reached.len(), 2, "only the unasked calls reach the server: {reached:?}");

    let bad = case.server("src", r#"needs_approval = [{ tool = "add", when = "always" }]"#);
    let (o, _) = case.run(&bad, json!([{"text": "Done."}]), &[]);
    assert!(!o.status.success());
    let err = stderr(&o);
    assert!(err.contains("unknown field `when`") && err.contains("`tool`, `pointer`, `equals`, `prefix`"), "{err}");
}

/// `defer = true`: the server's tools are not in the table; the model finds
/// them with `search_mcp_tools` and runs them with `call_mcp_tool`, under
/// their own approval rules; the exact misses; and the prompt section.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_deferred_server_is_searched_and_called_through_two_tools() {
    let Some(case) = Case::new() else { return };
    let servers =
        case.server("src", "defer = true\nneeds_approval = [{ tool = \"add\", pointer = \"/a\", equals = 13 }]");
    let turns = json!([
        calls(&[
            ("search", "search_mcp_tools", json!({"query": "adds integers", "max_results": 1})),
            ("none", "search_mcp_tools", json!({"query": "zzzz"})),
            ("direct", "src__add", json!({"a": 2, "b": 3})),
        ]),
        calls(&[
            ("sum", "call_mcp_tool", json!({"tool": "src__add", "arguments": {"a": 2, "b": 3}})),
            ("thirteen", "call_mcp_tool", json!({"tool": "src__add", "arguments": {"a": 13, "b": 1}})),
            ("typo", "call_mcp_tool", json!({"tool": "src__ad", "arguments": {}})),
        ]),
        {"text": "Done."}
    ]);
    let script = json!({"agent": {"approval_handler": "deny"}, "turns": turns});
    // Blocking on lovia here is fine: the server it starts is its own child.
    let (o, events) = tokio::task::block_in_place(|| case.run_script(&servers, &script, &[], &[]));
    completed(&o, &events);
    let search = output(&events, "search");
    assert!(
        search.starts_with(r#"[{"name": "src__add", "description": "Adds two integers.", "parameters": {"#),
        "{search}"
    );
    assert!(search.contains("more matches not shown; refine the query or raise max_results.)"), "{search}");
    let available = output(&events, "none").to_owned();
    assert!(
        available.starts_with("No deferred MCP tool matched 'zzzz' (")
            && available.ends_with(" available — the full name list is in your instructions; try other keywords)."),
        "{available}"
    );
    assert_eq!(output(&events, "direct"), "Tool 'src__add' is not available.");
    assert_eq!(output(&events, "sum"), "5");
    assert_eq!(output(&events, "thirteen"), "Tool call_mcp_tool was not approved.");
    let typo = output(&events, "typo");
    assert!(
        typo.starts_with("Tool error: unknown deferred MCP tool: 'src__ad'\n  hint: Did you mean: src__add"),
        "{typo}"
    );
    assert_eq!(case.calls().len(), 1, "only the approved call reached the server");

    // The section the system message gets.
    #[derive(serde::Deserialize)]
    struct File {
        mcp_servers: Vec<lovia_mcp::source::McpServerConfig>,
    }
    let file: File = toml::from_str(&servers).expect("servers");
    let config = file.mcp_servers.into_iter().next().expect("one");
    let source = lovia_mcp::source::McpSource::start(config).await.expect("started");
    let section = lovia_mcp::source::DeferredMcpTools::new(vec![std::sync::Arc::new(source)]).prompt_section();
    let section = section.expect("a section");
    assert!(section.starts_with("## Deferred MCP tools\n"), "{section}");
    assert!(section.contains("\n- src__ ("), "{section}");
    assert!(section.contains("src__add, src__bare"), "sorted names: {section}");
}

// `lovia mcp --mcp-servers`: one lovia serves a plugin, another MCP server's
// tools (started confined, as `lovia run` starts it) and the web tools to
// an MCP client, which calls across all of them: lovia aggregates and
// confines other servers.
#[test]
fn lovia_mcp_aggregates_plugins_mcp_servers_and_web_tools() {
    let Some(case) = Case::new() else { return };
    let servers = case.dir.path().join("servers.toml");
    std::fs::write(&servers, case.server("src", "include = [\"echo\", \"add\"]")).expect("servers.toml");
    let wanted = json!([["search_docs", {"query": "timeouts"}], ["src__add", {"a": 2, "b": 3}], ["read_page", {"url": "ftp://example.com/x"}]]);
    let mut args: Vec<String> =
        ["auto", "calls", &wanted.to_string(), "stdio", env!("CARGO_BIN_EXE_lovia")].map(String::from).to_vec();
    args.extend(["--no-cache", "mcp", fixtures::DOCS, "--mcp-servers"].map(String::from));
    args.push(servers.display().to_string());
    args.push("--read-page".into());
    let (out, log) = crate::mcp::client_logged(&case.py, &args);
    let texts: Vec<String> = out["results"]
        .as_array()
        .expect("results")
        .iter()
        .map(|r| r["text"][0].as_str().unwrap_or_default().to_owned())
        .collect();
    assert_eq!(texts[0], "[\"Timeouts\"]", "{log}");
    assert_eq!(texts[1].trim(), "5", "{log}");
    assert!(texts[2].contains("Unsupported URL scheme: 'ftp'."), "{log}");
}
