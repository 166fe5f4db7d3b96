//! Chat workspaces in `lovia serve`: one root per tenant and session under
//! `workspaces_dir`, the workspace tools only for a tenant with a
//! `[tenants.workspace]` table, the tenant's bounds shared by all its
//! sessions, and an idle session's workspace removed after its retention.

use super::{Sse, start_with, tenant};
use lovia_serve::{ProviderConfig, ServeConfig, TenantConfig, TenantWorkspace};
use lovia_tests::fixtures;
use lovia_workspace::Mode;
use serde_json::{Value, json};
use std::path::Path;
use std::time::{Duration, Instant};

fn calls(list: &[(&str, &str, Value)]) -> Value {
    json!({"tool_calls": list.iter().map(|(id, name, args)| json!({"id": id, "name": name, "arguments": args.to_string()})).collect::<Vec<_>>()})
}

/// A tenant whose scripted model replays `replies` in every session.
fn scripted(dir: &Path, name: &str, replies: &Value) -> TenantConfig {
    let script = dir.join(format!("{name}.json"));
    std::fs::write(&script, replies.to_string()).expect("script");
    let mut t = tenant(name, &format!("{name}-key"), &[fixtures::DIAGNOSTICS]);
    t.provider = ProviderConfig::scripted(script);
    t
}

/// The `tool_result` texts of one chat run, by call id.
async fn chat(addr: std::net::SocketAddr, key: &str, session: &str) -> std::collections::HashMap<String, String> {
    let body = json!({"session_id": session, "input": "go"}).to_string();
    let mut sse = Sse::post(addr, "/api/chat", key, &body).await;
    assert_eq!(sse.status, 200);
    let events = sse.rest().await;
    assert_eq!(events.last().map(|e| e.0.as_str()), Some("run_completed"), "{events:?}");
    events
        .iter()
        .filter(|(n, _)| n == "tool_result")
        .map(|(_, d)| {
            (d["id"].as_str().unwrap_or_default().to_owned(), d["result"].as_str().unwrap_or_default().to_owned())
        })
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn each_chat_session_gets_its_own_workspace_and_only_tenants_with_one() {
    let dir = tempfile::tempdir().expect("tempdir");
    let replies = json!([
        calls(&[("w", "write_file", json!({"path": "notes.txt", "content": "hi\n"}))]),
        calls(&[("sh", "shell", json!({"command": "cat notes.txt; ls .."}))]),
        {"content": "Done."}
    ]);
    let mut acme = scripted(dir.path(), "acme", &replies);
    let mut workspace = TenantWorkspace::default();
    workspace.mode = Mode::Trusted;
    acme.workspace = Some(workspace);
    let globex = scripted(dir.path(), "globex", &replies);
    let mut config = ServeConfig::new(vec![acme, globex]);
    let root = dir.path().join("workspaces");
    config.workspaces_dir = Some(root.clone());
    let addr = start_with(config).await;

    for session in ["s1", "s2", ".."] {
        let results = chat(addr, "acme-key", session).await;
        assert_eq!(results["w"], "created notes.txt (3 bytes)");
        // Confined: the shell sees its own root, and not the other sessions beside it.
        let sh = &results["sh"];
        assert!(sh.starts_with("exit code: 2\nhi\n--- stderr ---\n") && sh.contains("Permission denied"), "{sh}");
        assert!(!sh.contains("s-"), "the sessions beside it are listed: {sh}");
        let file = root.join("acme").join(format!("s-{session}")).join("notes.txt");
        assert_eq!(std::fs::read_to_string(&file).expect("the session's own root"), "hi\n");
    }
    // The `..` session stays inside the tenant's directory.
    assert!(!root.join("notes.txt").exists() && !dir.path().join("notes.txt").exists());

    let results = chat(addr, "globex-key", "s1").await;
    assert_eq!(results["w"], "Tool 'write_file' is not available.");
    assert!(!root.join("globex").exists());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_tenants_sessions_share_its_bounds_and_idle_workspaces_are_removed() {
    let dir = tempfile::tempdir().expect("tempdir");
    let big = "x".repeat(40 << 10);
    let replies = json!([
        calls(&[("w", "write_file", json!({"path": "big.txt", "content": big}))]),
        calls(&[("bg", "shell", json!({"command": "sleep 30", "background": true}))]),
        calls(&[("t", "shell", json!({"command": "true"}))]),
        {"content": "Done."}
    ]);
    let mut acme = scripted(dir.path(), "acme", &replies);
    let mut workspace = TenantWorkspace::default();
    workspace.mode = Mode::Trusted;
    workspace.max_bytes = 64 << 10;
    workspace.max_running_commands = 1;
    // Long enough that the first session's workspace is still there when the second one writes.
    workspace.retention_secs = 5;
    acme.workspace = Some(workspace);
    let mut config = ServeConfig::new(vec![acme]);
    let root = dir.path().join("workspaces");
    config.workspaces_dir = Some(root.clone());
    let addr = start_with(config).await;

    let first = chat(addr, "acme-key", "s1").await;
    assert_eq!(first["w"], "created big.txt (40960 bytes)");
    assert!(first["bg"].starts_with("started background process bg-"), "{}", first["bg"]);
    // One command at a time for the whole tenant: the background one holds it.
    assert_eq!(
        first["t"],
        "Tool error: Too many commands are running in this account's workspaces (1 at once).\n  hint: Wait for a running command to finish, or stop a background process with kill_process, then try again."
    );

    // Another session's write would pass the tenant's bytes.
    let second = chat(addr, "acme-key", "s2").await;
    assert!(second["w"].starts_with("Tool error: Workspace storage is full: "), "{}", second["w"]);
    assert!(!root.join("acme/s-s2/big.txt").exists());

    // Both runs are over: after five seconds of idleness the sweep removes their workspaces.
    let deadline = Instant::now() + Duration::from_secs(30);
    while root.join("acme/s-s1").exists() || root.join("acme/s-s2").exists() {
        assert!(Instant::now() < deadline, "idle workspaces still there");
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}

#[test]
fn a_workspace_table_needs_workspaces_dir() {
    let mut t = TenantConfig::new("acme", vec![lovia_serve::hash_key("k")]);
    t.workspace = Some(TenantWorkspace::default());
    let mut config = ServeConfig::new(vec![t]);
    let err = config.resolve(Path::new(".")).expect_err("refused").to_string();
    assert!(err.contains("workspaces_dir"), "{err}");
    let bad = toml::from_str::<ServeConfig>(
        "workspaces_dir = \"w\"\n[[tenants]]\nname = \"a\"\napi_keys = []\n[tenants.workspace]\nmode = \"yolo\"\n",
    )
    .expect_err("unknown mode");
    assert!(bad.to_string().contains("readonly") && bad.to_string().contains("trusted"), "{bad}");
    // Grants widen a confined shell; with the shell unconfined they would
    // promise what nothing enforces.
    let err = refused_workspace("shell_sandbox = \"off\"\nshell_network = true\n");
    assert_eq!(err.setting, "workspace.shell_sandbox");
    let err = err.to_string();
    assert!(err.contains("shell_network") && err.contains("\"off\""), "{err}");
    // A bound of 0 would refuse everything; the refusal names the key, as
    // the CLI's workspace flags do from the same section.
    let err = refused_workspace("max_files = 0\n");
    assert_eq!(err.setting, "workspace.max_files");
    assert!(err.to_string().contains("max_files must be at least 1"), "{err}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn new_sessions_cannot_make_workspace_directories_past_the_file_bound() {
    let dir = tempfile::tempdir().expect("tempdir");
    let replies = json!([
        calls(&[("w", "write_file", json!({"path": "notes.txt", "content": "hi\n"}))]),
        {"content": "Done."}
    ]);
    let mut acme = scripted(dir.path(), "acme", &replies);
    let mut workspace = TenantWorkspace::default();
    workspace.max_files = 3;
    acme.workspace = Some(workspace);
    let mut config = ServeConfig::new(vec![acme]);
    config.workspaces_dir = Some(dir.path().join("workspaces"));
    let addr = start_with(config).await;
    assert_eq!(chat(addr, "acme-key", "s1").await["w"], "created notes.txt (3 bytes)");
    // `/mcp`'s root, s-s1 and its file are the three entries allowed: a new
    // session is refused, an old one is not.
    let body = json!({"session_id": "s2", "input": "go"}).to_string();
    let (status, text) = super::request(addr, "POST", "/api/chat", Some("acme-key"), &body).await;
    assert_eq!(status, 429, "{text}");
    assert!(text.contains("the tenant's workspaces hold 3 files and directories, the most allowed"), "{text}");
    assert!(!dir.path().join("workspaces/acme/s-s2").exists());
}

/// `shell_read_write` is `--shell-write` of `lovia run` and `lovia mcp`: a
/// confined command of a chat may write there (a package cache, say), and
/// still nowhere else outside its root; with `shell_sandbox = "off"` it is
/// refused, as at the CLI.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_tenants_confined_shell_writes_where_shell_read_write_grants() {
    let dir = tempfile::tempdir().expect("tempdir");
    let cache = dir.path().join("cache");
    let elsewhere = dir.path().join("elsewhere");
    std::fs::create_dir_all(&cache).expect("cache");
    std::fs::create_dir_all(&elsewhere).expect("elsewhere");
    let write = |path: &Path| format!("echo cached > {}/entry && echo wrote", path.display());
    let replies = json!([
        calls(&[("granted", "shell", json!({"command": write(&cache)}))]),
        calls(&[("other", "shell", json!({"command": write(&elsewhere)}))]),
        {"content": "Done."}
    ]);
    let mut acme = scripted(dir.path(), "acme", &replies);
    let mut workspace = TenantWorkspace::default();
    workspace.mode = Mode::Trusted;
    workspace.shell_read_write = vec![cache.clone()];
    acme.workspace = Some(workspace);
    let mut config = ServeConfig::new(vec![acme]);
    config.workspaces_dir = Some(dir.path().join("workspaces"));
    let addr = start_with(config).await;
    // A command that names paths outside the root asks first: approved here.
    let mut sse = Sse::post(addr, "/api/chat", "acme-key", r#"{"session_id": "s1", "input": "go"}"#).await;
    let mut results = std::collections::HashMap::new();
    while let Some((name, data)) = sse.next().await {
        match name.as_str() {
            "approval_required" => {
                let decide = json!({"session_id": "s1", "call_id": data["id"], "decision": "approve"}).to_string();
                let (status, body) = super::request(addr, "POST", "/api/chat/approve", Some("acme-key"), &decide).await;
                assert_eq!(status, 200, "{body}");
            }
            "tool_result" => {
                results.insert(
                    data["id"].as_str().unwrap_or_default().to_owned(),
                    data["result"].as_str().unwrap_or_default().to_owned(),
                );
            }
            "run_completed" => break,
            _ => {}
        }
    }
    assert!(results["granted"].contains("wrote"), "{results:?}");
    assert_eq!(std::fs::read_to_string(cache.join("entry")).expect("written"), "cached\n");
    assert!(!results["other"].contains("wrote"), "{results:?}");
    assert!(!elsewhere.join("entry").exists());

    let err = refused_workspace("shell_sandbox = \"off\"\nshell_read_write = [\"cache\"]\n");
    assert_eq!(err.setting, "workspace.shell_sandbox");
    assert!(err.to_string().contains("shell_read_write"), "{err}");
}

/// Tenant `a` with the `[tenants.workspace]` lines `table` (TOML, each line
/// ending in `\n`), refused by the config's checks.
fn refused_workspace(table: &str) -> lovia_serve::ConfigRuleError {
    let text = format!(
        "workspaces_dir = \"w\"\n[[tenants]]\nname = \"a\"\napi_keys = [{:?}]\n[tenants.workspace]\n{table}",
        lovia_serve::hash_key("k")
    );
    let mut config = toml::from_str::<ServeConfig>(&text).expect("parses");
    config.resolve(Path::new(".")).expect_err("refused")
}
