//! `[[tenants.mcp_servers]]`: a tenant's MCP servers (one started as a
//! command, one reached by URL; tests/mcp/source_server.py, the official
//! Python `mcp` package) join that tenant's tools and no other's; a chat
//! follows a server's list change, and a clash with a plugin stops the start.

use super::{Sse, json, request, start, tenant};
use crate::mcp::{python, root};
use lovia_mcp::source::{McpServerConfig, SandboxConfig};
use lovia_serve::{ProviderConfig, ServeConfig, Service};
use lovia_tests::{fixtures, host};

/// The test server on stdio, taking only `include`.
fn stdio_server(py: &std::path::Path, include: &[&str]) -> McpServerConfig {
    let mut config = McpServerConfig::command("src", py.display().to_string());
    config.args = vec![root().join("tests/mcp/source_server.py").display().to_string()];
    config.include = Some(include.iter().map(|s| (*s).to_owned()).collect());
    // Confined, as by default; its venv is granted as the command's install directory.
    config.sandbox = SandboxConfig::default().grant_read_only(root().join("tests/mcp"));
    config
}

#[tokio::test]
async fn a_tenants_mcp_servers_join_its_tools_and_no_one_elses() {
    let Some(py) = python() else { return };
    let dir = tempfile::tempdir().expect("tempdir");
    let (mut web_server, port) = crate::mcp_sources::http::spawn_with(&py, &dir.path().join("calls.jsonl"), 0);
    let mut web = McpServerConfig::url("web", format!("http://127.0.0.1:{port}/mcp"));
    web.include = Some(vec!["add".into()]);
    let mut acme = tenant("acme", "acme-key", &[fixtures::DOCS]);
    acme.mcp_servers = vec![stdio_server(&py, &["echo"]), web];
    let addr = start(vec![acme, tenant("globex", "globex-key", &[])]).await;

    let (status, body) = request(addr, "GET", "/api/tools", Some("acme-key"), "").await;
    let listed = json(&body);
    let names: Vec<&str> =
        listed.as_array().expect("list").iter().map(|t| t["function"]["name"].as_str().expect("name")).collect();
    assert_eq!((status, names), (200, vec!["search_docs", "src__echo", "web__add"]));
    let (status, body) =
        request(addr, "POST", "/api/tools/src__echo/call", Some("acme-key"), r#"{"text": "hi"}"#).await;
    assert_eq!((status, json(&body)), (200, serde_json::json!({"output": "hi", "is_error": false})));
    let (status, body) =
        request(addr, "POST", "/api/tools/web__add/call", Some("acme-key"), r#"{"a": 2, "b": 3}"#).await;
    assert_eq!((status, json(&body)), (200, serde_json::json!({"output": "5", "is_error": false})));

    let (_, body) = request(addr, "GET", "/api/tools", Some("globex-key"), "").await;
    assert_eq!(json(&body), serde_json::json!([]));
    let (status, _) = request(addr, "POST", "/api/tools/src__echo/call", Some("globex-key"), r#"{"text": "x"}"#).await;
    assert_eq!(status, 404, "another tenant's MCP tool reads as missing");
    let _ = web_server.kill();
    let _ = web_server.wait();
}

#[tokio::test]
async fn a_clash_with_a_plugin_stops_the_start_naming_both() {
    let Some(py) = python() else { return };
    let dir = tempfile::tempdir().expect("tempdir");
    let mut server = stdio_server(&py, &["echo"]);
    server.prefix = Some(String::new());
    let mut acme = tenant("acme", "acme-key", &[fixtures::DIAGNOSTICS]);
    acme.mcp_servers = vec![server];
    let mut config = ServeConfig::new(vec![acme]);
    config.store = Some(dir.path().join("sessions.db").into());
    config.resolve(std::path::Path::new(".")).expect("valid config");
    let err = Service::new(&host(), &config).await.err().expect("refused").to_string();
    assert!(
        err.starts_with("tenant acme: Tool name conflict for 'echo' from mcp server 'src' (already from plugin)."),
        "{err}"
    );
}

#[test]
fn a_bad_mcp_server_entry_is_refused_with_the_config() {
    let text = r#"
        [[tenants]]
        name = "acme"
        api_keys = ["0000000000000000000000000000000000000000000000000000000000000000"]
        [[tenants.mcp_servers]]
        name = "web"
        url = "ftp://example.com/mcp"
    "#;
    let mut config: ServeConfig = toml::from_str(text).expect("parses");
    let err = config.resolve(std::path::Path::new(".")).expect_err("refused");
    assert_eq!((err.setting, err.tenant.as_deref()), ("mcp_servers", Some("acme")));
    assert!(std::error::Error::source(&err).is_some(), "the MCP server's own error is kept as the source");
    let err = err.to_string();
    assert!(err.contains("tenant \"acme\": mcp server 'web': `url` is \"ftp://example.com/mcp\""), "{err}");
    let unknown = toml::from_str::<ServeConfig>(&text.replace("url =", "uri =")).expect_err("unknown key");
    assert!(unknown.to_string().contains("unknown field `uri`"), "{unknown}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_chat_and_the_direct_route_follow_a_servers_list_change() {
    let Some(py) = python() else { return };
    let dir = tempfile::tempdir().expect("tempdir");
    let call = |id: &str, name: &str| serde_json::json!({"id": id, "name": name, "arguments": "{}"});
    let replies = serde_json::json!([
        {"tool_calls": [call("before", "src__extra"), call("grow", "src__grow")]},
        {"tool_calls": [call("after", "src__extra")]},
        {"content": "grown"}
    ]);
    let script = dir.path().join("script.json");
    std::fs::write(&script, replies.to_string()).expect("write the script");
    let mut acme = tenant("acme", "acme-key", &[]);
    acme.provider = ProviderConfig::scripted(script);
    acme.mcp_servers = vec![stdio_server(&py, &["grow", "extra"])];
    let addr = start(vec![acme]).await;

    let mut sse = Sse::post(addr, "/api/chat", "acme-key", r#"{"session_id": "s1", "input": "grow"}"#).await;
    assert_eq!(sse.status, 200);
    let events = sse.rest().await;
    let result = |id: &str| super::tool_result(&events, id);
    assert_eq!(result("before"), "Tool 'src__extra' is not available.");
    assert_eq!(result("grow"), "grown");
    assert_eq!(result("after"), "extra", "the next turn had the new list");
    assert_eq!(events.last().map(|(n, _)| n.as_str()), Some("run_completed"), "{events:?}");
    // The direct route follows it too, though the chat took the change.
    let (_, body) = request(addr, "GET", "/api/tools", Some("acme-key"), "").await;
    assert_eq!(json(&body).as_array().map(Vec::len), Some(2), "{body}");
    let (status, body) = request(addr, "POST", "/api/tools/src__extra/call", Some("acme-key"), "{}").await;
    assert_eq!((status, json(&body)["output"].clone()), (200, serde_json::json!("extra")), "{body}");
}

/// What a tenant's MCP server said of its tools reaches the tenant's
/// clients as it said it: only the hints it stated (server-filesystem's
/// `write_file` is destructive, and no hint it left out reads `false`), a
/// schema without `properties` normalised, an image as an image block.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_source_servers_hints_schemas_and_images_reach_the_tenants_clients() {
    let Some(py) = python() else { return };
    let mut acme = tenant("acme", "acme-key", &[]);
    acme.mcp_servers = vec![stdio_server(&py, &["write_file", "bare", "picture"])];
    let addr = start(vec![acme]).await;

    let (status, body) = request(addr, "GET", "/api/tools/detailed", Some("acme-key"), "").await;
    assert_eq!(status, 200, "{body}");
    let detailed = json(&body);
    let write = detailed.as_array().expect("list").iter().find(|t| t["name"] == "src__write_file").expect("listed");
    assert_eq!(write["hints"], serde_json::json!({"read_only": false, "destructive": true}), "{write}");
    let (_, body) = request(addr, "GET", "/api/tools", Some("acme-key"), "").await;
    let listed = json(&body);
    let bare = listed.as_array().expect("list").iter().find(|t| t["function"]["name"] == "src__bare").expect("bare");
    assert_eq!(bare["function"]["parameters"], serde_json::json!({"type": "object", "properties": {}}));

    for mode in ["auto", "legacy"] {
        let seen = super::mcp::client(&py, &[mode, "source", &format!("http://{addr}/mcp"), "acme-key"]).await;
        let mut write = seen["tools"]["src__write_file"]["annotations"].clone();
        write.as_object_mut().expect("annotations").remove("title");
        assert_eq!(write, serde_json::json!({"readOnlyHint": false, "destructiveHint": true}), "{mode}: {seen}");
        let picture = &seen["picture"];
        assert_eq!(picture[0], serde_json::json!({"type": "text", "text": "a chart"}), "{mode}: {seen}");
        assert_eq!(picture[1]["type"], "image", "{mode}: an image block, not its description: {seen}");
        assert_eq!(picture[1]["mimeType"], "image/png", "{mode}: {seen}");
    }
}

/// Issue 26 item 8: a tenant's MCP server that does not start (a command
/// that does not exist; another that fails until a file appears) does not
/// stop the service: it starts, serves that tenant's plugin tools and the
/// other tenants, reports the servers not ready in `GET /api/status`, and
/// retries them in the background; the second's tools join once it comes up.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_mcp_server_that_does_not_start_leaves_only_its_tools_out_until_it_does() {
    let Some(py) = python() else { return };
    let dir = tempfile::tempdir().expect("tempdir");
    let flag = dir.path().join("up");
    let broken = McpServerConfig::command("broken", dir.path().join("no-such-command").display().to_string());
    let mut late = McpServerConfig::command("late", "sh");
    late.args = vec![
        "-c".into(),
        r#"test -f "$0" || exit 1; exec "$1" "$2""#.into(),
        flag.display().to_string(),
        py.display().to_string(),
        root().join("tests/mcp/source_server.py").display().to_string(),
    ];
    late.include = Some(vec!["echo".into()]);
    // `sh` is the command: the venv it runs, and the Python the venv was
    // made from, are granted by hand.
    let venv = py.parent().and_then(std::path::Path::parent).expect("the venv of target/mcp-venv/bin/python");
    let real = std::fs::canonicalize(&py).expect("the venv's python");
    let base = real.parent().and_then(std::path::Path::parent).expect("the prefix of the venv's python");
    late.sandbox = SandboxConfig::default()
        .grant_read_only(venv)
        .grant_read_only(base)
        .grant_read_only(root().join("tests/mcp"))
        .grant_read_only(dir.path());
    // A server whose sandbox cannot be installed is not started, and says why.
    let mut unconfinable = McpServerConfig::command("unconfinable", py.display().to_string());
    unconfinable.sandbox = SandboxConfig::default().grant_read_only("/nonexistent-lovia-grant");
    let mut acme = tenant("acme", "acme-key", &[fixtures::DIAGNOSTICS]);
    acme.mcp_servers = vec![broken, late, unconfinable];
    let addr = start(vec![acme, tenant("globex", "globex-key", &[fixtures::DIAGNOSTICS])]).await;

    let names = |body: &str| -> Vec<String> {
        json(body)
            .as_array()
            .expect("list")
            .iter()
            .map(|t| t["function"]["name"].as_str().expect("name").to_owned())
            .collect()
    };
    let (status, body) = request(addr, "GET", "/api/tools", Some("acme-key"), "").await;
    assert_eq!(status, 200, "{body}");
    assert!(names(&body).iter().all(|n| !n.contains("__")), "no MCP tool yet: {body}");
    let (status, body) = request(addr, "POST", "/api/tools/echo/call", Some("acme-key"), r#"{"text": "hi"}"#).await;
    assert_eq!((status, json(&body)), (200, serde_json::json!({"output": "hi", "is_error": false})));
    let (status, body) = request(addr, "POST", "/api/tools/echo/call", Some("globex-key"), r#"{"text": "hi"}"#).await;
    assert_eq!(status, 200, "another tenant is served: {body}");
    let (status, body) = request(addr, "GET", "/api/status", Some("acme-key"), "").await;
    let report = json(&body);
    assert_eq!((status, &report["ready"]), (200, &serde_json::json!(false)), "{body}");
    let servers = report["mcp_servers"].as_array().expect("servers");
    assert_eq!(servers.len(), 3, "{body}");
    let unconfinable = servers.iter().find(|s| s["name"] == "unconfinable").expect("reported");
    assert!(
        unconfinable["error"]
            .as_str()
            .is_some_and(|e| e.contains("not started, because it cannot be confined: cannot grant")),
        "{body}"
    );
    assert!(
        servers.iter().all(|s| s["ready"] == false && s["error"].as_str().is_some_and(|e| !e.is_empty())),
        "{body}"
    );
    let (_, body) = request(addr, "GET", "/api/status", Some("globex-key"), "").await;
    assert_eq!(json(&body)["ready"], true, "{body}");

    // The second comes up: its tools join at a retry, the first stays out.
    std::fs::write(&flag, b"").expect("flag");
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(20);
    loop {
        let (_, body) = request(addr, "GET", "/api/status", Some("acme-key"), "").await;
        let report = json(&body);
        let late_up = report["mcp_servers"]
            .as_array()
            .expect("servers")
            .iter()
            .any(|s| s["name"] == "late" && s["ready"] == true);
        if late_up {
            assert_eq!(report["ready"], false, "the broken one is still not ready: {body}");
            break;
        }
        assert!(std::time::Instant::now() < deadline, "the late server's tools never joined: {body}");
        tokio::time::sleep(std::time::Duration::from_millis(200)).await;
    }
    let (_, body) = request(addr, "GET", "/api/tools", Some("acme-key"), "").await;
    assert!(names(&body).contains(&"late__echo".to_owned()), "{body}");
    let (status, body) =
        request(addr, "POST", "/api/tools/late__echo/call", Some("acme-key"), r#"{"text": "up"}"#).await;
    assert_eq!((status, json(&body)), (200, serde_json::json!({"output": "up", "is_error": false})));
}

/// `defer = true` in `lovia serve`: the server's tools are in no list, and
/// every door reaches them through `search_mcp_tools` and `call_mcp_tool`
/// (a chat under the tenant's quotas).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_chat_reaches_a_deferred_servers_tools_through_two_tools() {
    let Some(py) = python() else { return };
    let dir = tempfile::tempdir().expect("tempdir");
    let call = |id: &str, name: &str, arguments: serde_json::Value| serde_json::json!({"id": id, "name": name, "arguments": arguments.to_string()});
    let replies = serde_json::json!([
        {"tool_calls": [
            call("search", "search_mcp_tools", serde_json::json!({"query": "echo"})),
            call("direct", "src__echo", serde_json::json!({"text": "x"}))
        ]},
        {"tool_calls": [call("run", "call_mcp_tool", serde_json::json!({"tool": "src__echo", "arguments": {"text": "deferred hi"}}))]},
        {"content": "done"}
    ]);
    let script = dir.path().join("script.json");
    std::fs::write(&script, replies.to_string()).expect("write the script");
    let mut acme = tenant("acme", "acme-key", &[]);
    acme.provider = ProviderConfig::scripted(script);
    let mut server = stdio_server(&py, &["echo", "add"]);
    server.defer = true;
    acme.mcp_servers = vec![server];
    let addr = start(vec![acme]).await;

    let (_, body) = request(addr, "GET", "/api/tools", Some("acme-key"), "").await;
    let listed = json(&body);
    let names: Vec<&str> =
        listed.as_array().expect("a list").iter().filter_map(|t| t["function"]["name"].as_str()).collect();
    assert_eq!(names, ["search_mcp_tools", "call_mcp_tool"], "a deferred server's tools are in no list");
    let body = r#"{"tool": "src__echo", "arguments": {"text": "direct hi"}}"#;
    let (status, body) = request(addr, "POST", "/api/tools/call_mcp_tool/call", Some("acme-key"), body).await;
    assert_eq!((status, json(&body)["output"].clone()), (200, serde_json::json!("direct hi")), "{body}");
    let (_, body) = request(addr, "GET", "/api/status", Some("acme-key"), "").await;
    assert_eq!(json(&body)["mcp_servers"], serde_json::json!([{"name": "src", "ready": true}]), "{body}");

    let mut sse = Sse::post(addr, "/api/chat", "acme-key", r#"{"session_id": "s1", "input": "echo"}"#).await;
    assert_eq!(sse.status, 200);
    let events = sse.rest().await;
    let result = |id: &str| super::tool_result(&events, id);
    assert!(result("search").starts_with(r#"[{"name": "src__echo""#), "{}", result("search"));
    assert_eq!(result("direct"), "Tool 'src__echo' is not available.");
    assert_eq!(result("run"), "deferred hi");
    assert_eq!(events.last().map(|(n, _)| n.as_str()), Some("run_completed"), "{events:?}");
}
