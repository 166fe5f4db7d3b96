//! Tool sources reached by `url`: tests/mcp/source_server.py serving
//! streamable HTTP on a loopback port (the official Python `mcp` package
//! and uvicorn), `lovia run` as its client.

use super::{Case, calls, completed, output, stderr};
use serde_json::json;
use std::io::{BufRead, BufReader};
use std::process::{Child, Command, Stdio};
use std::sync::{Arc, Mutex};

/// The value the header's variable holds: it must reach the server and
/// never lovia's log.
const SECRET: &str = "key-5f2c9a17-not-logged";

/// A running HTTP server; killed when dropped.
struct HttpServer {
    child: Arc<Mutex<Option<Child>>>,
    port: u16,
}

impl HttpServer {
    /// Starts the server on a free port.
    fn start(case: &Case) -> Self {
        let (child, port) = spawn(case, 0);
        Self { child: Arc::new(Mutex::new(Some(child))), port }
    }

    fn url(&self) -> String {
        format!("http://127.0.0.1:{}/mcp", self.port)
    }

    /// Once the server exits, starts another on the same port.
    fn restart_when_it_exits(&self, case: &Case) -> std::thread::JoinHandle<()> {
        let (slot, port) = (self.child.clone(), self.port);
        let (py, log) = (case.py.clone(), case.log());
        let mut first = slot.lock().expect("child").take().expect("running");
        std::thread::spawn(move || {
            let _ = first.wait();
            let (next, _) = spawn_with(&py, &log, port);
            *slot.lock().expect("child") = Some(next);
        })
    }

    fn kill(&self) {
        if let Some(mut child) = self.child.lock().unwrap_or_else(|p| p.into_inner()).take() {
            let _ = child.kill();
            let _ = child.wait();
        }
    }
}

impl Drop for HttpServer {
    fn drop(&mut self) {
        self.kill();
    }
}

fn spawn(case: &Case, port: u16) -> (Child, u16) {
    spawn_with(&case.py, &case.log(), port)
}

/// The server on `port` (0: any), and the port it announced.
pub(crate) fn spawn_with(py: &std::path::Path, log: &std::path::Path, port: u16) -> (Child, u16) {
    let script = crate::mcp::root().join("tests/mcp/source_server.py");
    let mut child = Command::new(py)
        .arg(script)
        .args(["--http", &port.to_string()])
        .env("CALL_LOG", log)
        .stdout(Stdio::piped())
        .spawn()
        .expect("start the HTTP server");
    let mut line = String::new();
    BufReader::new(child.stdout.take().expect("stdout")).read_line(&mut line).expect("the port");
    let port = line.trim().parse().unwrap_or_else(|e| panic!("port {line:?}: {e}"));
    (child, port)
}

/// A `[[mcp_servers]]` table for `url`, with `extra` lines.
fn server(name: &str, url: &str, extra: &str) -> String {
    format!("[[mcp_servers]]\nname = {name:?}\nurl = {url:?}\n{extra}\n")
}

#[test]
fn a_url_server_is_listed_called_and_sent_its_header() {
    let Some(case) = Case::new() else { return };
    let http = HttpServer::start(&case);
    let servers =
        server("web", &http.url(), "headers_from_env = { X-Api-Key = \"LOVIA_TEST_MCP_KEY\" }\nexclude = [\"secret\"]");
    let turns = json!([
        calls(&[
            ("echo", "web__echo", json!({"text": "over http"})),
            ("fail", "web__fail", json!({"message": "quota"})),
            ("key", "web__header", json!({"name": "X-Api-Key"})),
            ("secret", "web__secret", json!({})),
            ("invalid", "web__add", json!({"a": "one", "b": 2})),
        ]),
        {"text": "done"}
    ]);
    let env = [("LOVIA_TEST_MCP_KEY", SECRET), ("LOVIA_LOG", "debug")];
    let (o, events) = case.run_with_env(&servers, turns, &[], &env);
    completed(&o, &events);
    assert_eq!(output(&events, "echo"), "over http");
    assert_eq!(output(&events, "fail"), "[tool error] quota");
    assert_eq!(output(&events, "key"), SECRET, "the header reached the server");
    assert_eq!(output(&events, "secret"), "Tool 'web__secret' is not available.");
    assert!(output(&events, "invalid").starts_with("Tool error: "), "validated before the server saw it");
    assert!(!stderr(&o).contains(SECRET), "the header's value is never logged");
    let mut seen: Vec<String> = case.calls().into_iter().map(|(_, t, _)| t).collect();
    seen.sort();
    assert_eq!(seen, ["echo", "fail", "header"]);
}

#[test]
fn a_missing_header_variable_or_an_unreachable_url_stops_the_run() {
    let Some(case) = Case::new() else { return };
    let servers =
        server("web", "http://127.0.0.1:9/mcp", "headers_from_env = { Authorization = \"LOVIA_TEST_MCP_UNSET\" }");
    let (o, _) = case.run(&servers, json!([{"text": "done"}]), &[]);
    assert_ne!(o.status.code(), Some(0));
    let err = stderr(&o);
    assert!(
        err.contains(
            "mcp server 'web': the environment variable LOVIA_TEST_MCP_UNSET is not set (named in `headers_from_env`)"
        ),
        "{err}"
    );
    // Port 9 (discard) on loopback: nothing listens there.
    let (o, _) = case.run(&server("web", "http://127.0.0.1:9/mcp", ""), json!([{"text": "done"}]), &[]);
    assert_ne!(o.status.code(), Some(0));
    let err = stderr(&o);
    assert!(err.contains("mcp server 'web': the MCP session did not start: cannot connect to the server"), "{err}");
}

#[test]
fn a_url_server_killed_mid_call_fails_that_call_and_the_next_until_it_is_back() {
    let Some(case) = Case::new() else { return };
    let http = HttpServer::start(&case);
    let turns = json!([
        calls(&[("crash", "web__crash", json!({}))]),
        calls(&[("after", "web__echo", json!({"text": "anyone?"}))]),
        {"text": "done"}
    ]);
    let (o, events) = case.run(&server("web", &http.url(), ""), turns, &[]);
    completed(&o, &events);
    let failed = output(&events, "crash");
    assert!(failed.starts_with("Tool error: MCP tool 'crash' failed: the connection to the server closed"), "{failed}");
    assert!(failed.contains("\n  hint: "), "{failed}");
    let after = output(&events, "after");
    assert!(
        after.starts_with("Tool error: MCP tool 'echo' failed: mcp server 'web': the MCP session did not start: "),
        "{after}"
    );
    assert!(!after.contains(&http.url()), "the URL is not shown to the model: {after}");
}

#[test]
fn a_url_server_killed_mid_call_is_reached_again_when_it_is_back() {
    let Some(case) = Case::new() else { return };
    let http = HttpServer::start(&case);
    let restarter = http.restart_when_it_exits(&case);
    // The call's retries (0, 250, 500, 1000, 2000 ms apart...) outlast the
    // restart of the Python server.
    let servers = server("web", &http.url(), "retries = 8");
    let turns = json!([calls(&[("once", "web__crash_once", json!({}))]), {"text": "done"}]);
    let (o, events) = case.run(&servers, turns, &[]);
    completed(&o, &events);
    assert_eq!(output(&events, "once"), "survived");
    restarter.join().expect("restarted");
    let pids: Vec<u64> = case.calls().into_iter().map(|(pid, _, _)| pid).collect();
    assert!(pids.len() >= 2 && pids.first() != pids.last(), "a new server answered: {pids:?}");
}

#[test]
fn a_response_over_the_bound_fails_the_call() {
    let Some(case) = Case::new() else { return };
    let http = HttpServer::start(&case);
    let turns = json!([
        calls(&[("big", "web__huge", json!({"bytes": 5 << 20}))]),
        calls(&[("small", "web__huge", json!({"bytes": 3}))]),
        {"text": "done"}
    ]);
    let (o, events) = case.run(&server("web", &http.url(), ""), turns, &[]);
    completed(&o, &events);
    // rmcp ends the response stream on the oversized SSE event (and logs
    // `EventTooLarge`); lovia sees the session close and restarts it.
    let failed = output(&events, "big");
    assert!(failed.starts_with("Tool error: MCP tool 'huge' failed: the connection to the server closed"), "{failed}");
    assert!(failed.len() < 2000, "not the message itself: {} bytes", failed.len());
    assert_eq!(output(&events, "small"), "xxx");
    assert!(stderr(&o).contains("EventTooLarge"), "{}", stderr(&o));
}
