//! The web console of `lovia serve` (docs/console.md): its routes and
//! headers over a real socket, and the whole console in headless Chromium
//! driven by Playwright (tests/console/e2e.mjs) against the real `lovia`
//! binary with scripted models.

use crate::serve::{IdSse, Sse, json, plugin, request, start_with, tenant};
use lovia_host::InstanceMode;
use lovia_serve::{ProviderConfig, ServeConfig, TenantConfig};
use lovia_tests::fixtures;
use serde_json::{Value, json as j};
use std::path::{Path, PathBuf};
use std::process::Command;
use tokio::io::{AsyncReadExt, AsyncWriteExt};

const HOSTILE: &str = "<img src=x onerror=alert(1)>";

fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

/// acme's model: a lookup and a refund of $90, which needs an approval.
fn refund_script() -> PathBuf {
    root().join("examples/chat-refund.json")
}

/// globex's model: an echo of HTML, three progress steps and an "image/png"
/// whose bytes are markup beside a 60 s sleep, then an answer.
fn hostile_script(dir: &Path) -> PathBuf {
    let replies = j!([
        {"tool_calls": [
            {"id": "call_echo", "name": "echo", "arguments": j!({"text": HOSTILE}).to_string()},
            {"id": "call_progress", "name": "progress", "arguments": r#"{"steps": 3}"#},
            {"id": "call_mislabelled", "name": "bad_parts", "arguments": r#"{"case": "mislabelled_image"}"#},
            {"id": "call_sleep", "name": "sleep_ms", "arguments": r#"{"ms": 60000}"#},
        ]},
        {"content": "done"}
    ]);
    let path = dir.join("hostile.json");
    std::fs::write(&path, replies.to_string()).expect("write script");
    path
}

/// initech's model: a refund whose amount is past what a double holds
/// exactly, so a browser's JSON.parse would show another number.
fn huge_refund_script(dir: &Path) -> PathBuf {
    let replies = j!([
        {"tool_calls": [{"id": "call_huge", "name": "refund",
            "arguments": r#"{"order_id": "A-1002", "amount_cents": 9007199254740993}"#}]},
        {"content": "done"}
    ]);
    let path = dir.join("huge.json");
    std::fs::write(&path, replies.to_string()).expect("write script");
    path
}

/// hooli's model: a call that fails once and is retried, a chart and a
/// lookup at once; then a refund that needs an approval; then an answer.
fn retry_and_chart_script(dir: &Path) -> PathBuf {
    let replies = j!([
        {"tool_calls": [
            {"id": "call_flaky", "name": "fail_first", "arguments": r#"{"failures": 1, "work_ms": 300}"#},
            {"id": "call_chart", "name": "bar_chart", "arguments": r#"{"values": [3, 1, 4, 1, 5, 9, 2, 6], "label": "orders"}"#},
            {"id": "call_lookup", "name": "lookup_order", "arguments": r#"{"order_id": "A-1002"}"#},
        ]},
        {"tool_calls": [{"id": "call_refund", "name": "refund",
            "arguments": r#"{"order_id": "A-1002", "amount_cents": 9000, "reason": "damaged"}"#}]},
        {"content": "Refunded; the flaky lookup answered on its second attempt."}
    ]);
    let path = dir.join("retry-and-chart.json");
    std::fs::write(&path, replies.to_string()).expect("write script");
    path
}

fn scripted(mut t: TenantConfig, script: PathBuf) -> TenantConfig {
    t.provider = ProviderConfig::scripted(script);
    t
}

/// GET `path`: (status, headers in lower case, body).
async fn get(addr: std::net::SocketAddr, path: &str) -> (u16, String, String) {
    let mut stream = tokio::net::TcpStream::connect(addr).await.expect("connect");
    let head = format!("GET {path} HTTP/1.1\r\nHost: {addr}\r\nConnection: close\r\n\r\n");
    stream.write_all(head.as_bytes()).await.expect("write");
    let mut raw = Vec::new();
    stream.read_to_end(&mut raw).await.expect("read");
    let text = String::from_utf8_lossy(&raw).into_owned();
    let (head, body) = text.split_once("\r\n\r\n").expect("a head");
    let status = head.split(' ').nth(1).and_then(|s| s.parse().ok()).expect("status");
    (status, head.to_ascii_lowercase(), body.to_owned())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn console_assets_are_embedded_and_sent_with_a_strict_policy() {
    let addr = start_with(ServeConfig::new(vec![tenant("acme", "acme-key", &[fixtures::ORDERS])])).await;
    for (path, kind) in [
        ("/console", "text/html"),
        ("/console/", "text/html"),
        ("/console/app.js", "text/javascript"),
        ("/console/dom.js", "text/javascript"),
        ("/console/parts.js", "text/javascript"),
        ("/console/schema-form.js", "text/javascript"),
        ("/console/console.css", "text/css"),
        ("/console/icon.svg", "image/svg+xml"),
    ] {
        let (status, head, body) = get(addr, path).await;
        assert_eq!(status, 200, "{path}");
        assert!(head.contains(&format!("content-type: {kind}")), "{path}: {head}");
        // Every directive, exactly: images from the console itself and the
        // blob: URLs its script makes from checked image bytes, nothing else.
        assert!(
            head.contains(
                "content-security-policy: default-src 'self'; script-src 'self'; style-src 'self'; \
                 img-src 'self' blob:; connect-src 'self'; object-src 'none'; base-uri 'none'; \
                 form-action 'none'; frame-ancestors 'none'\r\n"
            ),
            "{path}: {head}"
        );
        assert!(head.contains("frame-ancestors 'none'") && !head.contains("unsafe-"), "{path}: {head}");
        assert!(head.contains("x-content-type-options: nosniff"), "{path}: {head}");
        assert!(head.contains("x-frame-options: deny"), "{path}: {head}");
        assert!(!body.is_empty());
    }
    // The page loads its script as a module from its own origin, and has no inline script or handler.
    let (_, _, html) = get(addr, "/console").await;
    assert!(html.contains(r#"<script type="module" src="/console/app.js"></script>"#));
    assert_eq!(html.matches("<script").count(), 1, "one script tag, external");
    let inline_handler = html.match_indices(" on").any(|(i, _)| {
        let rest = &html[i + 3..];
        let name_len = rest.chars().take_while(char::is_ascii_lowercase).count();
        name_len > 0 && rest[name_len..].starts_with('=')
    });
    assert!(!inline_handler && !html.contains("javascript:"), "no inline handlers");
    for script in ["app.js", "dom.js", "parts.js", "schema-form.js"] {
        let (_, _, js) = get(addr, &format!("/console/{script}")).await;
        assert!(
            !js.contains("innerHTML") && !js.contains("outerHTML") && !js.contains("insertAdjacentHTML"),
            "{script}"
        );
        assert!(!js.contains("eval(") && !js.contains("new Function") && !js.contains("document.write"), "{script}");
        assert!(!js.contains("localStorage"), "{script}: the key is kept in session storage only");
        // The only image address the console makes is a blob: URL of checked bytes (parts.js).
        assert_eq!(js.contains("createObjectURL"), script == "parts.js", "{script}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn console_routes_show_a_tenant_only_its_own_approvals_sessions_tools_and_metrics() {
    let dir = tempfile::tempdir().expect("tempdir");
    let mut config = ServeConfig::new(vec![
        scripted(tenant("acme", "acme-key", &[fixtures::ORDERS, fixtures::DIAGNOSTICS]), refund_script()),
        scripted(tenant("globex", "globex-key", &[fixtures::DIAGNOSTICS]), hostile_script(dir.path())),
    ]);
    config.approval_timeout_secs = 120;
    let addr = start_with(config).await;
    for path in ["/api/approvals", "/api/chat", "/api/metrics", "/api/tools/detailed"] {
        assert_eq!(request(addr, "GET", path, None, "").await.0, 401, "{path}");
        assert_eq!(request(addr, "GET", path, Some("nope"), "").await.0, 401, "{path}");
    }

    let mut sse = Sse::post(addr, "/api/chat", "acme-key", r#"{"session_id": "r1", "input": "refund A-1002"}"#).await;
    sse.until("approval_required").await;
    let (status, body) = request(addr, "GET", "/api/approvals", Some("acme-key"), "").await;
    assert_eq!(status, 200, "{body}");
    let listed = json(&body);
    let approvals = listed["approvals"].as_array().expect("approvals");
    assert_eq!(approvals.len(), 1, "{listed}");
    let a = &approvals[0];
    assert_eq!((a["session_id"].as_str(), a["call_id"].as_str()), (Some("r1"), Some("call_refund")));
    assert_eq!(a["tool"], "refund");
    assert_eq!(a["arguments"], r#"{"order_id": "A-1002", "amount_cents": 9000, "reason": "damaged"}"#);
    assert_eq!(a["plugin"], "orders");
    assert_eq!(a["plugin_digest"].as_str().map(str::len), Some(64), "{a}");
    assert!(a["description"].as_str().is_some_and(|d| !d.is_empty()), "{a}");
    let (asked, deny_at, now) =
        (a["asked_ms"].as_u64().expect("asked"), a["deny_at_ms"].as_u64().expect("deny"), listed["now_ms"].as_u64());
    assert_eq!(deny_at - asked, 120_000, "denied after approval_timeout_secs");
    assert!(now.is_some_and(|n| n >= asked && n - asked < 30_000), "{listed}");

    // globex sees none of it, on every console route, and cannot decide it.
    let (_, body) = request(addr, "GET", "/api/approvals", Some("globex-key"), "").await;
    assert_eq!(json(&body)["approvals"], j!([]));
    let (_, body) = request(addr, "GET", "/api/chat", Some("globex-key"), "").await;
    assert_eq!(json(&body)["sessions"], j!([]));
    let decide = r#"{"session_id": "r1", "call_id": "call_refund", "decision": "approve"}"#;
    assert_eq!(request(addr, "POST", "/api/chat/approve", Some("globex-key"), decide).await.0, 404);
    let (_, body) = request(addr, "GET", "/api/tools/detailed", Some("globex-key"), "").await;
    let names: Vec<Value> = json(&body).as_array().expect("tools").iter().map(|t| t["name"].clone()).collect();
    assert!(!names.contains(&j!("refund")) && names.contains(&j!("echo")), "{names:?}");

    let (_, body) = request(addr, "GET", "/api/chat", Some("acme-key"), "").await;
    let sessions = json(&body);
    assert_eq!(sessions["sessions"][0]["session_id"], "r1", "{sessions}");
    assert_eq!(sessions["sessions"][0]["status"], "running");
    assert_eq!(sessions["sessions"][0]["pending_approvals"], 1);
    assert_eq!(sessions["sessions"][0]["input"], "refund A-1002");

    assert_eq!(request(addr, "POST", "/api/chat/approve", Some("acme-key"), decide).await.0, 200);
    let rest = sse.rest().await;
    assert_eq!(rest.last().map(|(n, _)| n.as_str()), Some("run_completed"), "{rest:?}");
    let (_, body) = request(addr, "GET", "/api/approvals", Some("acme-key"), "").await;
    assert_eq!(json(&body)["approvals"], j!([]));
    // The session list is updated when the run's task ends, just after its last event.
    let mut status = Value::Null;
    for _ in 0..100 {
        let (_, body) = request(addr, "GET", "/api/chat", Some("acme-key"), "").await;
        status = json(&body)["sessions"][0]["status"].clone();
        if status == "completed" {
            break;
        }
        tokio::time::sleep(std::time::Duration::from_millis(50)).await;
    }
    assert_eq!(status, "completed");

    // Tools in detail: hints, approval mode, limits, grants and the digest.
    let (_, body) = request(addr, "GET", "/api/tools/detailed", Some("acme-key"), "").await;
    let tools = json(&body);
    let refund = tools.as_array().expect("tools").iter().find(|t| t["name"] == "refund").expect("refund");
    assert_eq!(refund["approval"], "ask_plugin");
    assert_eq!(refund["hints"]["destructive"], true);
    assert_eq!(refund["plugin"]["name"], "orders");
    assert_eq!(refund["plugin"]["digest"], a["plugin_digest"]);
    assert_eq!(refund["plugin"]["limits"]["memory_bytes"], 64 << 20);
    assert!(refund["parameters"]["properties"]["amount_cents"].is_object(), "{refund}");

    // Metrics: acme's two calls, none of globex's.
    let (_, body) = request(addr, "POST", "/api/tools/echo/call", Some("globex-key"), r#"{"text": "x"}"#).await;
    assert_eq!(json(&body)["output"], "x");
    let (_, body) = request(addr, "GET", "/api/metrics", Some("acme-key"), "").await;
    let metrics = json(&body);
    let tools: Vec<&str> =
        metrics["tools"].as_array().expect("tools").iter().filter_map(|t| t["tool"].as_str()).collect();
    assert_eq!(tools, ["lookup_order", "refund"], "{metrics}");
    assert_eq!(metrics["runs"], j!({"completed": 1}));
    assert_eq!(metrics["tool_error_kinds"], j!([]));
    assert_eq!(metrics["tools"][1]["buckets"].as_array().map(Vec::len), Some(10));
    let (_, body) = request(addr, "GET", "/api/metrics", Some("globex-key"), "").await;
    let metrics = json(&body);
    assert_eq!(metrics["tools"][0]["tool"], "echo", "{metrics}");
    assert_eq!(metrics["tools"].as_array().map(Vec::len), Some(1), "{metrics}");
    assert_eq!(metrics["runs"], j!({}));
}

/// Where the browser test's tools are, or why they are not.
fn browser_tools() -> Result<(PathBuf, PathBuf), String> {
    let chromium = std::env::var_os("LOVIA_CHROMIUM").map_or_else(|| PathBuf::from("/usr/bin/chromium"), PathBuf::from);
    if !chromium.exists() {
        return Err(format!("no Chromium at {} (apt-get install chromium, or set LOVIA_CHROMIUM)", chromium.display()));
    }
    let dir = root().join("tests/console");
    if !dir.join("node_modules/playwright-core/package.json").exists() {
        return Err("no tests/console/node_modules (cd tests/console && npm ci)".into());
    }
    if !Command::new("node").arg("--version").output().is_ok_and(|o| o.status.success()) {
        return Err("no node on PATH".into());
    }
    Ok((chromium, dir))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_console_works_end_to_end_in_headless_chromium() {
    let Some((chromium, dir)) = lovia_tests::parts::require(lovia_tests::parts::Part::Browser, browser_tools) else {
        return;
    };
    let tmp = tempfile::tempdir().expect("tempdir");
    let tenant_toml = |name: &str, key: &str, script: &Path, plugins: &[&str], in_session: &[&str]| {
        let mut out = format!(
            "[[tenants]]\nname = \"{name}\"\napi_keys = [\"{}\"]\nagent = {{ name = \"support\" }}\n\
             provider = {{ kind = \"scripted\", script = {:?} }}\n",
            lovia_serve::hash_key(key),
            script.display().to_string()
        );
        for p in plugins {
            out += &format!("[[tenants.plugins]]\npath = {p:?}\n");
        }
        // fail_first counts its attempts in its instance: one per session.
        for p in in_session {
            out += &format!("[[tenants.plugins]]\npath = {p:?}\ninstance = \"session\"\n");
        }
        out
    };
    let config = tmp.path().join("serve.toml");
    // umbrella: no plugin, the workspace tools in coding mode, whose
    // command asks; the console approves it and the confined command runs.
    let workspace_script = tmp.path().join("workspace.json");
    std::fs::write(
        &workspace_script,
        serde_json::json!([
            {"tool_calls": [{"id": "call_write", "name": "write_file",
                "arguments": "{\"path\": \"hello.py\", \"content\": \"print('hi from the workspace')\\n\"}"}]},
            {"tool_calls": [{"id": "call_shell", "name": "shell", "arguments": "{\"command\": \"python3 hello.py\"}"}]},
            {"content": "Ran hello.py."}
        ])
        .to_string(),
    )
    .expect("script");
    let umbrella = format!(
        "{}[tenants.workspace]\nmode = \"coding\"\n",
        tenant_toml("umbrella", "umbrella-key", &workspace_script, &[], &[])
    );
    // vandelay: the agent asks a question with options; the console's
    // question card answers it and the run completes.
    let question_script = tmp.path().join("question.json");
    std::fs::write(
        &question_script,
        serde_json::json!([
            {"tool_calls": [{"id": "call_ask", "name": "ask_human", "arguments": serde_json::json!({
                "question": "Tea or coffee?",
                "options": [{"label": "Tea", "description": "green"}, {"label": "Coffee"}]
            }).to_string()}]},
            {"content": "Tea it is."}
        ])
        .to_string(),
    )
    .expect("script");
    // wayne: two refunds; "always allow" on the first approves the second.
    let always_script = tmp.path().join("always.json");
    let refund = |id: &str| {
        serde_json::json!({"tool_calls": [{"id": id, "name": "refund",
        "arguments": "{\"order_id\": \"A-1002\", \"amount_cents\": 9000}"}]})
    };
    std::fs::write(
        &always_script,
        serde_json::json!([refund("call_first"), refund("call_second"), {"content": "Both refunded."}]).to_string(),
    )
    .expect("script");
    let wayne = tenant_toml("wayne", "wayne-key", &always_script, &[fixtures::ORDERS], &[]);
    // pied: code mode; its program's refund is approved in the run view.
    let code_script = tmp.path().join("code.json");
    let program = "const o = await tools.lookup_order({ order_id: 'A-1002' });\n\
                   return await tools.refund({ order_id: o.id, amount_cents: 6000 });";
    std::fs::write(
        &code_script,
        serde_json::json!([
            {"tool_calls": [{"id": "p1", "name": "run_code", "arguments": serde_json::json!({"code": program}).to_string()}]},
            {"content": "Refunded."}
        ])
        .to_string(),
    )
    .expect("script");
    let pied = tenant_toml("pied", "pied-key", &code_script, &[fixtures::ORDERS], &[])
        .replace("agent = { name = \"support\" }", "agent = { name = \"support\", code_mode = true }");
    let vandelay = tenant_toml("vandelay", "vandelay-key", &question_script, &[], &[])
        .replace("agent = { name = \"support\" }", "agent = { name = \"support\", ask_human = true }");
    std::fs::write(
        &config,
        format!(
            "approval_timeout_secs = 300\nworkspaces_dir = {:?}\n{}{}{}{}{umbrella}{vandelay}{wayne}{pied}",
            tmp.path().join("workspaces").display().to_string(),
            tenant_toml("acme", "acme-key", &refund_script(), &[fixtures::ORDERS, fixtures::DIAGNOSTICS], &[]),
            tenant_toml(
                "globex",
                "globex-key",
                &hostile_script(tmp.path()),
                &[fixtures::DIAGNOSTICS, fixtures::HOSTILE],
                &[]
            ),
            tenant_toml("initech", "initech-key", &huge_refund_script(tmp.path()), &[fixtures::ORDERS], &[]),
            tenant_toml(
                "hooli",
                "hooli-key",
                &retry_and_chart_script(tmp.path()),
                &[fixtures::ORDERS, fixtures::CHARTS, fixtures::DOCS, fixtures::PY_TWINS],
                &[fixtures::FLAKY]
            ),
        ),
    )
    .expect("config");
    let (_server, addr) = crate::cli::spawn_serve(&config, &tmp.path().join("sessions.db"), &[]).await;
    let addr = format!("http://{addr}");
    let shots = root().join("target/console-screenshots");
    let out = tokio::process::Command::new("node")
        .arg(dir.join("e2e.mjs"))
        .current_dir(&dir)
        .env("LOVIA_URL", &addr)
        .env("ACME_KEY", "acme-key")
        .env("GLOBEX_KEY", "globex-key")
        .env("INITECH_KEY", "initech-key")
        .env("HOOLI_KEY", "hooli-key")
        .env("UMBRELLA_KEY", "umbrella-key")
        .env("VANDELAY_KEY", "vandelay-key")
        .env("WAYNE_KEY", "wayne-key")
        .env("PIED_KEY", "pied-key")
        .env("CHROMIUM", &chromium)
        .env("SCREENSHOTS", &shots)
        .env("PLAYWRIGHT_SKIP_BROWSER_DOWNLOAD", "1")
        .kill_on_drop(true)
        .output();
    let out = tokio::time::timeout(std::time::Duration::from_secs(300), out)
        .await
        .expect("the browser test finished within 300 s")
        .expect("run node");
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    println!("{stdout}");
    assert!(out.status.success(), "the console e2e failed:\n{stdout}\n{stderr}");
    for name in [
        "sign_in",
        "tools",
        "approve_in_the_console",
        "deny_in_the_console",
        "tenants_see_only_their_own",
        "hostile_output_is_text",
        "open_a_running_run",
        "cancel_a_sleeping_run",
        "metrics",
        "exact_arguments_are_shown",
        "retries_and_images",
        "nested_form",
        "approve_a_workspace_command",
        "code_mode_program",
        "sign_out",
        "no_incidents",
    ] {
        assert!(stdout.lines().any(|l| l.starts_with(&format!("ok {name}"))), "{name} did not pass:\n{stdout}");
        if name != "no_incidents" {
            assert!(shots.join(format!("{name}.png")).exists(), "no screenshot of {name}");
        }
    }
}

/// The session list comes from the run store: a SQLite-backed `lovia serve`
/// is killed and started again, and its sessions are still listed, with
/// their status and input, newest first, in pages, to their tenant only.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_session_list_survives_a_restart_and_pages_per_tenant() {
    let tmp = tempfile::tempdir().expect("tempdir");
    let answer = tmp.path().join("answer.json");
    std::fs::write(&answer, j!([{"content": "Answered."}]).to_string()).expect("script");
    let toml = |name: &str, key: &str| {
        format!(
            "[[tenants]]\nname = \"{name}\"\napi_keys = [\"{}\"]\nagent = {{ name = \"support\" }}\n\
             provider = {{ kind = \"scripted\", script = {:?} }}\n",
            lovia_serve::hash_key(key),
            answer.display().to_string()
        )
    };
    let config = tmp.path().join("serve.toml");
    std::fs::write(&config, format!("{}{}", toml("acme", "acme-key"), toml("globex", "globex-key"))).expect("config");
    let store = tmp.path().join("sessions.db");

    let (mut first, addr) = crate::cli::spawn_serve(&config, &store, &[]).await;
    for i in 0..3 {
        let body = j!({"session_id": format!("keep-{i}"), "input": format!("question {i}")}).to_string();
        let mut sse = Sse::post(addr, "/api/chat", "acme-key", &body).await;
        assert_eq!(sse.rest().await.last().map(|(n, _)| n.clone()).as_deref(), Some("run_completed"));
        // Distinct creation times, so newest-first is the order they ran in.
        tokio::time::sleep(std::time::Duration::from_millis(5)).await;
    }
    first.start_kill().expect("SIGKILL");
    first.wait().await.expect("reaped");

    let (_second, addr) = crate::cli::spawn_serve(&config, &store, &[]).await;
    let (status, body) = request(addr, "GET", "/api/chat", Some("acme-key"), "").await;
    assert_eq!(status, 200, "{body}");
    let listed = json(&body);
    let sessions = listed["sessions"].as_array().expect("sessions");
    let ids: Vec<&str> = sessions.iter().filter_map(|s| s["session_id"].as_str()).collect();
    assert_eq!(ids, ["keep-2", "keep-1", "keep-0"], "listed after the restart, newest first: {listed}");
    for s in sessions {
        assert_eq!(s["status"], "completed", "{s}");
        assert_eq!(s["pending_approvals"], 0);
        assert!(s["started_ms"].as_u64().is_some_and(|t| t > 0) && s["ended_ms"].as_u64().is_some(), "{s}");
    }
    assert_eq!(sessions[0]["input"], "question 2");
    assert_eq!(listed["next"], Value::Null, "one page holds them all");

    // Pages of two: the first gives a cursor, the second the rest, each once.
    let (_, body) = request(addr, "GET", "/api/chat?limit=2", Some("acme-key"), "").await;
    let page = json(&body);
    let ids: Vec<&str> =
        page["sessions"].as_array().expect("page").iter().filter_map(|s| s["session_id"].as_str()).collect();
    assert_eq!(ids, ["keep-2", "keep-1"]);
    let next = page["next"].as_str().expect("a next cursor").to_owned();
    let (_, body) = request(addr, "GET", &format!("/api/chat?limit=2&before={next}"), Some("acme-key"), "").await;
    let page = json(&body);
    let ids: Vec<&str> =
        page["sessions"].as_array().expect("page").iter().filter_map(|s| s["session_id"].as_str()).collect();
    assert_eq!((ids, &page["next"]), (vec!["keep-0"], &Value::Null), "{page}");

    // The other tenant sees none of them, nor their transcripts.
    let (_, body) = request(addr, "GET", "/api/chat", Some("globex-key"), "").await;
    assert_eq!(json(&body)["sessions"], j!([]));
    assert_eq!(request(addr, "GET", "/api/chat/keep-0", Some("globex-key"), "").await.0, 404);

    // Bounds and mistakes are refused, naming what is allowed.
    for (query, says) in [
        ("limit=0", "limit must be 1 to 200"),
        ("limit=201", "limit must be 1 to 200"),
        ("before=nonsense", "<created_ms>.<session id>"),
        ("page=2", "expected `limit` or `before`"),
    ] {
        let (status, body) = request(addr, "GET", &format!("/api/chat?{query}"), Some("acme-key"), "").await;
        assert_eq!(status, 400, "{query}: {body}");
        assert!(body.contains(says), "{query}: {body}");
    }
}

/// Opening a run in progress shows what happened so far: a reader that
/// attaches mid-run gets the earlier events (an echo, its progress, the
/// approval it waits on), then the live ones, each once and in order, with
/// the ids the first reader saw; `Last-Event-ID` resumes after an id.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_reader_attaching_mid_run_gets_the_earlier_events_then_the_live_ones_once() {
    let dir = tempfile::tempdir().expect("tempdir");
    let replies = j!([
        {"tool_calls": [
            {"id": "call_echo", "name": "echo", "arguments": r#"{"text": "before you came"}"#},
            {"id": "call_progress", "name": "progress", "arguments": r#"{"steps": 2}"#},
        ]},
        {"tool_calls": [{"id": "call_refund", "name": "refund",
            "arguments": r#"{"order_id": "A-1002", "amount_cents": 9000, "reason": "damaged"}"#}]},
        {"content": "done"}
    ]);
    let path = dir.path().join("replay.json");
    std::fs::write(&path, replies.to_string()).expect("script");
    let mut config =
        ServeConfig::new(vec![scripted(tenant("acme", "acme-key", &[fixtures::ORDERS, fixtures::DIAGNOSTICS]), path)]);
    config.approval_timeout_secs = 120;
    let addr = start_with(config).await;

    let (status, mut first) = IdSse::post(addr, "acme-key", r#"{"session_id": "mid", "input": "go"}"#, None).await;
    assert_eq!(status, 200);
    let before = first.until("approval_required").await;
    let names: Vec<&str> = before.iter().map(|e| e.1.as_str()).collect();
    assert!(names.contains(&"tool_result") && names.contains(&"tool_progress"), "{names:?}");
    let ids: Vec<Option<u64>> = before.iter().map(|e| e.0).collect();
    assert_eq!(ids, (0..before.len() as u64).map(Some).collect::<Vec<_>>(), "numbered from 0, one by one");

    // Attached mid-run: everything so far, exactly as the first reader got it.
    let (status, mut second) = IdSse::post(addr, "acme-key", r#"{"session_id": "mid"}"#, None).await;
    assert_eq!(status, 200);
    assert_eq!(second.until("approval_required").await, before, "the earlier events, each once, in order");
    // With Last-Event-ID: only what followed that id.
    let cut = before[2].0.expect("an id").to_string();
    let (_, mut third) = IdSse::post(addr, "acme-key", r#"{"session_id": "mid"}"#, Some(&cut)).await;
    assert_eq!(third.until("approval_required").await, before[3..].to_vec());
    // A cursor that is not an event id is refused.
    let (status, _) = IdSse::post(addr, "acme-key", r#"{"session_id": "mid"}"#, Some("soon")).await;
    assert_eq!(status, 400);

    let decide = r#"{"session_id": "mid", "call_id": "call_refund", "decision": "approve"}"#;
    assert_eq!(request(addr, "POST", "/api/chat/approve", Some("acme-key"), decide).await.0, 200);
    let live = first.rest().await;
    assert_eq!(live.last().map(|e| e.1.as_str()), Some("run_completed"), "{live:?}");
    assert!(live.iter().any(|e| e.1 == "tool_result" && e.2["id"] == "call_refund"), "{live:?}");
    let next = before.len() as u64;
    assert_eq!(
        live.iter().map(|e| e.0).collect::<Vec<_>>(),
        (next..next + live.len() as u64).map(Some).collect::<Vec<_>>()
    );
    assert_eq!(second.rest().await, live, "then the live events, each once");
    assert_eq!(third.rest().await, live);
}

/// A call that fails once and is retried, over real HTTP and SSE: its
/// `tool_attempt_failed` event (attempt, error, pause) comes between its
/// `tool_call` and its `tool_result`, at least the pause before the result,
/// and the call counts once in the tenant's metrics.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_retried_call_streams_its_failed_attempt_then_its_result() {
    let dir = tempfile::tempdir().expect("tempdir");
    let replies = j!([
        {"tool_calls": [{"id": "call_flaky", "name": "fail_first", "arguments": r#"{"failures": 2, "work_ms": 20}"#}]},
        {"content": "done"}
    ]);
    let path = dir.path().join("flaky.json");
    std::fs::write(&path, replies.to_string()).expect("script");
    let mut acme = tenant("acme", "acme-key", &[]);
    let mut flaky = plugin(fixtures::FLAKY);
    flaky.instance = InstanceMode::Session;
    acme.plugins.push(flaky);
    let addr = start_with(ServeConfig::new(vec![scripted(acme, path)])).await;

    let mut sse = Sse::post(addr, "/api/chat", "acme-key", r#"{"session_id": "retry-1", "input": "look it up"}"#).await;
    let events = sse.rest().await;
    assert_eq!(events.last().map(|(n, _)| n.as_str()), Some("run_completed"), "{events:?}");
    let of_call: Vec<&(String, Value)> = events.iter().filter(|(_, d)| d["id"] == "call_flaky").collect();
    let names: Vec<&str> = of_call.iter().map(|(n, _)| n.as_str()).collect();
    assert_eq!(names, ["tool_call", "tool_attempt_failed", "tool_attempt_failed", "tool_result"], "{events:?}");
    for (k, (_, failed)) in of_call[1..3].iter().enumerate() {
        let attempt = k as u64 + 1;
        assert_eq!(failed["attempt"], attempt, "{failed}");
        assert_eq!(failed["name"], "fail_first");
        // The backoff: 100 ms after the first failure, 200 ms after the second.
        assert_eq!(failed["retry_in_ms"], 100 << k, "{failed}");
        assert_eq!(
            failed["error"].as_str(),
            Some(format!("upstream unavailable (503), attempt {attempt}").as_str()),
            "{failed}"
        );
    }
    let result = &of_call[3].1;
    assert_eq!((&result["result"], &result["is_error"]), (&j!("answered on attempt 3"), &j!(false)), "{result}");
    let at = |i: usize| of_call[i].1["at_ms"].as_u64().expect("at_ms");
    assert!(at(0) <= at(1) && at(1) + 100 <= at(2) && at(2) + 200 <= at(3), "{of_call:?}");

    let (_, body) = request(addr, "GET", "/api/metrics", Some("acme-key"), "").await;
    let metrics = json(&body);
    assert_eq!(metrics["tools"][0]["tool"], "fail_first", "{metrics}");
    assert_eq!((&metrics["tools"][0]["calls"], &metrics["tools"][0]["errors"]), (&j!(1), &j!(0)), "{metrics}");
}

/// `GET /api/metrics` gives the tenant's calls per minute as the service
/// counted them: after four calls (one an error) the minute up to now holds
/// four, the series' last point four and one error, and the other tenant
/// none.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn calls_per_minute_are_counted_by_the_service_per_tenant() {
    let addr = start_with(ServeConfig::new(vec![
        tenant("acme", "acme-key", &[fixtures::DIAGNOSTICS]),
        tenant("globex", "globex-key", &[fixtures::DIAGNOSTICS]),
    ]))
    .await;
    let started = std::time::SystemTime::now();
    for text in ["a", "b", "c"] {
        let (status, body) =
            request(addr, "POST", "/api/tools/echo/call", Some("acme-key"), &j!({"text": text}).to_string()).await;
        assert_eq!((status, json(&body)["output"].as_str()), (200, Some(text)), "{body}");
    }
    let (_, body) = request(addr, "POST", "/api/tools/echo/call", Some("acme-key"), "{}").await;
    assert_eq!(json(&body)["is_error"], true, "a call without its text is an error result: {body}");

    let (_, body) = request(addr, "GET", "/api/metrics", Some("acme-key"), "").await;
    let took = started.elapsed().expect("clock");
    let rate = &json(&body)["calls_per_minute"];
    assert_eq!((&rate["window_secs"], &rate["step_secs"]), (&j!(60), &j!(10)), "{rate}");
    assert_eq!(rate["last_minute"], 4, "{rate}");
    let points = rate["points"].as_array().expect("points");
    assert_eq!(points.len(), 60, "ten minutes, a point every 10 s");
    let last = &points[59];
    assert_eq!((&last["calls"], &last["errors"]), (&j!(4), &j!(1)), "{rate}");
    let now_ms = json(&body)["now_ms"].as_u64().expect("now_ms");
    assert!(last["at_ms"].as_u64().is_some_and(|t| t <= now_ms && now_ms - t < 1_000), "{rate}");
    let steps: Vec<u64> =
        points.windows(2).map(|w| w[1]["at_ms"].as_u64().unwrap_or(0) - w[0]["at_ms"].as_u64().unwrap_or(0)).collect();
    assert!(steps.iter().all(|s| *s == 10_000), "{steps:?}");
    if took < std::time::Duration::from_secs(9) {
        // Every earlier point's minute ended before the first call.
        assert!(points[..59].iter().all(|p| p["calls"] == 0), "{rate}");
    }
    let (_, body) = request(addr, "GET", "/api/metrics", Some("globex-key"), "").await;
    let rate = &json(&body)["calls_per_minute"];
    assert_eq!(rate["last_minute"], 0, "{rate}");
    assert!(rate["points"].as_array().expect("points").iter().all(|p| p["calls"] == 0), "{rate}");
}
