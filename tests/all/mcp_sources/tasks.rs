//! Source tools that run only as tasks (2025-11-25, `execution.taskSupport:
//! "required"`): lovia calls them as tasks, polls them and reads their
//! result, and cancels the task when its call times out, over stdio and
//! streamable HTTP; a plain call that times out is cancelled at the server
//! too. The server is tests/mcp-fs/task_server.mjs on the
//! official TypeScript SDK's task runtime (tests/mcp-fs's lockfile).

use super::{Case, calls, completed, output};
use serde_json::{Value, json};
use std::io::{BufRead, BufReader};
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// The task server's script.
fn task_server() -> Option<PathBuf> {
    crate::mcp::tasks::mcp_fs_script("task_server.mjs")
}

fn case() -> Case {
    Case { dir: tempfile::tempdir().expect("tempdir"), py: PathBuf::from("node") }
}

/// A task that completes, one that fails, a plain call, a task that never
/// ends and a plain call that waits for its cancel (both time out at 3 s);
/// then a second task, which runs while the two cancels reach the server.
fn turns() -> Value {
    json!([
        calls(&[
            ("a", "tq__slow", json!({"ms": 300})),
            ("b", "tq__fails", json!({})),
            ("c", "tq__echo", json!({"text": "plain"})),
            ("d", "tq__hang", json!({})),
            ("f", "tq__wait", json!({})),
        ]),
        calls(&[("e", "tq__slow", json!({"ms": 500}))]),
        {"text": "done"}
    ])
}

/// What the server logged: each tool called, and each task cancelled.
fn logged(case: &Case) -> Vec<String> {
    // The cancel is sent on a task of its own; give it a moment to land.
    let deadline = Instant::now() + Duration::from_secs(5);
    loop {
        let text = std::fs::read_to_string(case.log()).unwrap_or_default();
        let tools: Vec<String> = text
            .lines()
            .map(|l| serde_json::from_str::<Value>(l).expect("a log line")["tool"].as_str().expect("tool").to_owned())
            .collect();
        let landed = |name: &str| tools.iter().any(|t| t == name);
        if (landed("cancelled") && landed("aborted")) || Instant::now() > deadline {
            return tools;
        }
        std::thread::sleep(Duration::from_millis(50));
    }
}

fn check(case: &Case, events: &[Value]) {
    assert_eq!(output(events, "a"), "slept 300 ms");
    assert_eq!(output(events, "e"), "slept 500 ms");
    // A failed task's result is its tool's error, as a plain call's is.
    assert_eq!(output(events, "b"), "[tool error] the disk is full");
    assert_eq!(output(events, "c"), "plain");
    for id in ["d", "f"] {
        let hung = events.iter().find(|e| e["event"] == "tool_result" && e["id"] == id).expect("a result");
        assert_eq!(hung["error_kind"], json!("timeout"), "{hung}");
    }
    let mut tools = logged(case);
    tools.sort();
    assert_eq!(
        tools,
        ["aborted", "cancelled", "echo", "fails", "hang", "slow", "slow", "wait"],
        "each called once; the hung task cancelled (tasks/cancel), the waiting call too (notifications/cancelled)"
    );
}

#[test]
fn a_task_only_tool_is_called_as_a_task_over_stdio() {
    let Some(script) = task_server() else { return };
    let case = case();
    let servers = format!(
        "[[mcp_servers]]\nname = \"tq\"\ncommand = \"node\"\nargs = [{:?}]\nenv = {{ CALL_LOG = {:?} }}\n\
         timeout_ms = 3000\nretries = 0\n# The confinement is tested elsewhere (confined.rs).\nsandbox = {{ mode = \"off\" }}\n",
        script.display().to_string(),
        case.log().display().to_string(),
    );
    let (o, events) = case.run(&servers, turns(), &[]);
    completed(&o, &events);
    check(&case, &events);
}

/// The server on a free loopback port; killed when dropped.
struct HttpTaskServer(Child, u16);

impl Drop for HttpTaskServer {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

#[test]
fn a_task_only_tool_is_called_as_a_task_over_http() {
    let Some(script) = task_server() else { return };
    let case = case();
    let mut child = Command::new("node")
        .arg(&script)
        .args(["--http", "0"])
        .env("CALL_LOG", case.log())
        .stdout(Stdio::piped())
        .spawn()
        .expect("start the task server");
    let mut line = String::new();
    BufReader::new(child.stdout.take().expect("stdout")).read_line(&mut line).expect("the port");
    let port: u16 = line.trim().parse().unwrap_or_else(|e| panic!("port {line:?}: {e}"));
    let server = HttpTaskServer(child, port);
    let servers = format!(
        "[[mcp_servers]]\nname = \"tq\"\nurl = \"http://127.0.0.1:{}/mcp\"\ntimeout_ms = 3000\nretries = 0\n",
        server.1
    );
    let (o, events) = case.run(&servers, turns(), &[]);
    completed(&o, &events);
    check(&case, &events);
}
