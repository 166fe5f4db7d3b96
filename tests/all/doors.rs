//! The capability × door table (docs/architecture.md, "Capabilities at
//! each door"): each door is built with every capability configured (a
//! plugin, an MCP server, a deferred one, the web tools, the workspace,
//! `ask_human`, code mode) and asked what it offers: the MCP doors list
//! their tools to the official Python client, the others are called with
//! one tool of each capability by a scripted model or a request, and an
//! unknown tool answers as one. The table in the docs must be the one
//! measured here, cell for cell.

use crate::mcp::{python, root};
use crate::serve::{Sse, json, request, start_with, tenant};
use lovia_mcp::source::{McpServerConfig, SandboxConfig};
use lovia_serve::{ProviderConfig, ServeConfig, TenantWeb, TenantWorkspace};
use lovia_tests::fixtures;
use serde_json::{Value, json as j};
use std::path::Path;
use std::process::Command;

/// Each capability, and the tool that shows a door has it.
const PROBES: [(&str, &str); 7] = [
    ("plugins", "search_docs"),
    ("MCP servers", "src__echo"),
    ("deferred MCP servers", "search_mcp_tools"),
    ("web tools", "read_page"),
    ("workspace", "read_file"),
    ("`ask_human`", "ask_human"),
    ("code mode", "run_code"),
];

/// The doors, as the table's columns.
const DOORS: [&str; 6] =
    ["`lovia call`", "`lovia run`", "`lovia mcp`", "serve: direct route", "serve: chats", "serve: `/mcp`"];

/// The test MCP server on stdio, confined as by default, taking only
/// `echo`; deferred when `defer`.
fn server(py: &Path, name: &str, defer: bool) -> McpServerConfig {
    let mut config = McpServerConfig::command(name, py.display().to_string());
    config.args = vec![root().join("tests/mcp/source_server.py").display().to_string()];
    config.include = Some(vec!["echo".into()]);
    config.sandbox = SandboxConfig::default().grant_read_only(root().join("tests/mcp"));
    config.defer = defer;
    config
}

/// The same two servers as a `--mcp-servers` file.
fn servers_toml(py: &Path) -> String {
    let table = |name: &str, defer: bool| {
        format!(
            "[[mcp_servers]]\nname = {name:?}\ncommand = {:?}\nargs = [{:?}]\ninclude = [\"echo\"]\ndefer = {defer}\nsandbox = {{ read_only = [{:?}] }}\n",
            py.display().to_string(),
            root().join("tests/mcp/source_server.py").display().to_string(),
            root().join("tests/mcp").display().to_string(),
        )
    };
    format!("{}\n{}", table("src", false), table("later", true))
}

/// One model turn calling every probe with `{}`, then a text turn (whose
/// key is `text` in a `lovia run` script, `content` in a scripted model's
/// replies).
fn probe_turns(text_key: &str) -> Value {
    let calls: Vec<Value> =
        PROBES.iter().map(|(_, tool)| j!({"id": format!("p_{tool}"), "name": tool, "arguments": "{}"})).collect();
    j!([{"tool_calls": calls}, {text_key: "done"}])
}

/// The probes a run offered: those whose call did not read as unknown.
fn offered_in_results(result_of: impl Fn(&str) -> String) -> Vec<&'static str> {
    PROBES
        .iter()
        .map(|(_, tool)| *tool)
        .filter(|tool| result_of(&format!("p_{tool}")) != lovia_host::call::text::unknown_tool(tool))
        .collect()
}

fn lovia() -> Command {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_lovia"));
    cmd.arg("--no-cache");
    cmd
}

/// `lovia call`: it takes a plugin and one tool, nothing else.
fn call_offers() -> Vec<&'static str> {
    PROBES
        .iter()
        .map(|(_, tool)| *tool)
        .filter(|tool| {
            let o = lovia().args(["call", fixtures::DOCS, tool, "{}"]).output().expect("lovia call");
            !String::from_utf8_lossy(&o.stderr).contains(&format!("has no tool named `{tool}`"))
        })
        .collect()
}

/// `lovia run` with every capability's flag.
fn run_offers(py: &Path, dir: &Path) -> Vec<&'static str> {
    let servers = dir.join("servers.toml");
    std::fs::write(&servers, servers_toml(py)).expect("servers");
    let script = dir.join("script.json");
    std::fs::write(&script, j!({"turns": probe_turns("text")}).to_string()).expect("script");
    let workspace = dir.join("run-workspace");
    std::fs::create_dir_all(&workspace).expect("workspace");
    let o = lovia()
        .args(["run", "--plugin", fixtures::DOCS, "--read-page", "--ask-human", "--code-mode"])
        .arg("--mcp-servers")
        .arg(&servers)
        .arg("--workspace")
        .arg(&workspace)
        .arg("--script")
        .arg(&script)
        .output()
        .expect("lovia run");
    let stdout = String::from_utf8_lossy(&o.stdout);
    assert_eq!(o.status.code(), Some(0), "{stdout}\n{}", String::from_utf8_lossy(&o.stderr));
    let events: Vec<Value> = stdout.lines().map(|l| serde_json::from_str(l).expect("an event")).collect();
    offered_in_results(|id| {
        events
            .iter()
            .find(|e| e["event"] == "tool_result" && e["id"] == id)
            .and_then(|e| e["result"].as_str())
            .unwrap_or_else(|| panic!("no result for {id}: {stdout}"))
            .to_owned()
    })
}

/// `lovia mcp` on stdio with every capability's flag: what it lists.
fn mcp_offers(py: &Path, dir: &Path) -> Vec<&'static str> {
    let servers = dir.join("servers.toml");
    std::fs::write(&servers, servers_toml(py)).expect("servers");
    let workspace = dir.join("mcp-workspace");
    std::fs::create_dir_all(&workspace).expect("workspace");
    let o = Command::new(py)
        .arg(root().join("tests/mcp/client.py"))
        .args(["auto", "hints", "stdio", env!("CARGO_BIN_EXE_lovia"), "--no-cache", "mcp", fixtures::DOCS])
        .args(["--read-page", "--ask-human", "--code-mode", "--mcp-servers"])
        .arg(&servers)
        .arg("--workspace")
        .arg(&workspace)
        .output()
        .expect("the MCP client");
    let stdout = String::from_utf8_lossy(&o.stdout);
    assert!(o.status.success(), "{stdout}\n{}", String::from_utf8_lossy(&o.stderr));
    let out: Value = serde_json::from_str(stdout.trim()).expect("the client's JSON");
    let listed = out["annotations"].as_object().expect("tools by name");
    PROBES.iter().map(|(_, tool)| *tool).filter(|tool| listed.contains_key(*tool)).collect()
}

/// What each of a tenant's doors offers: (direct route, chats, `/mcp`).
async fn serve_offers(py: &Path, dir: &Path) -> (Vec<&'static str>, Vec<&'static str>, Vec<&'static str>) {
    let script = dir.join("serve-script.json");
    std::fs::write(&script, probe_turns("content").to_string()).expect("script");
    let mut acme = tenant("acme", "acme-key", &[fixtures::DOCS]);
    acme.provider = ProviderConfig::scripted(script);
    acme.mcp_servers = vec![server(py, "src", false), server(py, "later", true)];
    let mut web = TenantWeb::default();
    web.read_page = true;
    acme.web = Some(web);
    acme.workspace = Some(TenantWorkspace::default());
    acme.agent.ask_human = true;
    acme.agent.code_mode = true;
    let mut config = ServeConfig::new(vec![acme]);
    config.workspaces_dir = Some(dir.join("serve-workspaces"));
    let addr = start_with(config).await;

    let mut direct = Vec::new();
    for (_, tool) in PROBES {
        let (status, body) = request(addr, "POST", &format!("/api/tools/{tool}/call"), Some("acme-key"), "{}").await;
        if status != 404 {
            assert_eq!(status, 200, "{tool}: {body}");
            direct.push(tool);
        }
    }

    let mut sse = Sse::post(addr, "/api/chat", "acme-key", r#"{"session_id": "s1", "input": "probe"}"#).await;
    assert_eq!(sse.status, 200);
    let events = sse.rest().await;
    let chats = offered_in_results(|id| crate::serve::tool_result(&events, id));

    let o = Command::new(py)
        .arg(root().join("tests/mcp/serve_client.py"))
        .args(["auto", "names", &format!("http://{addr}/mcp"), "acme-key"])
        .output()
        .expect("the MCP client");
    let stdout = String::from_utf8_lossy(&o.stdout);
    assert!(o.status.success(), "{stdout}\n{}", String::from_utf8_lossy(&o.stderr));
    let out: Value = json(stdout.trim());
    let listed: Vec<&str> = out["tools"].as_array().expect("tools").iter().filter_map(Value::as_str).collect();
    let mcp = PROBES.iter().map(|(_, tool)| *tool).filter(|tool| listed.contains(tool)).collect();
    (direct, chats, mcp)
}

/// The table as the docs write it: one row per capability, a cell per door.
fn measured_table(offers: &[Vec<&'static str>; 6]) -> String {
    let mut table = format!("| capability | {} |\n|---|{}\n", DOORS.join(" | "), "---|".repeat(DOORS.len()));
    for (capability, tool) in PROBES {
        let cells: Vec<&str> = offers.iter().map(|o| if o.contains(&tool) { "yes" } else { "—" }).collect();
        table.push_str(&format!("| {capability} (`{tool}`) | {} |\n", cells.join(" | ")));
    }
    table
}

/// The table between the markers of docs/architecture.md.
fn documented_table() -> String {
    let doc = std::fs::read_to_string(root().join("docs/architecture.md")).expect("docs/architecture.md");
    let begin = "<!-- doors-table: begin -->\n";
    let start = doc.find(begin).expect("the begin marker") + begin.len();
    let end = doc.find("<!-- doors-table: end -->").expect("the end marker");
    doc[start..end].to_owned()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn each_door_offers_what_the_table_in_the_docs_says() {
    let Some(py) = python() else { return };
    let dir = tempfile::tempdir().expect("tempdir");
    let (direct, chats, served_mcp) = serve_offers(&py, dir.path()).await;
    let offers = [call_offers(), run_offers(&py, dir.path()), mcp_offers(&py, dir.path()), direct, chats, served_mcp];
    let measured = measured_table(&offers);
    assert_eq!(
        documented_table(),
        measured,
        "docs/architecture.md's table differs from what the doors offer; the measured table:\n{measured}"
    );
}
