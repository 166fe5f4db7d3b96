//! Several `lovia serve` processes on one store (docs/replicas.md): real
//! binaries on loopback ports, sharing the throwaway PostgreSQL server that
//! `scripts/test` starts (`LOVIA_TEST_POSTGRES_URL`), each test in a database
//! of its own.

use crate::cli::spawn_serve;
use crate::serve::{json, request};
use crate::threat::serve::post_bytes;
use lovia_tests::fixtures;
use std::net::SocketAddr;
use std::path::Path;
use std::time::{Duration, Instant};
use tokio::process::Child;

/// A fresh database on the test server, as a URL; `None` when the
/// `postgres` part is opted out (`LOVIA_SKIP`), a failed test without a server.
pub(super) fn fresh_database(test: &str) -> Option<String> {
    let url = lovia_tests::parts::postgres_url()?;
    let name = format!("lovia_{test}_{}", std::process::id());
    // The `postgres` client runs its own runtime, which must not start
    // inside the test's: it gets a thread.
    let admin = url.clone();
    let created = name.clone();
    std::thread::spawn(move || {
        let mut client = postgres::Client::connect(&admin, postgres::NoTls).expect("connect to the test server");
        client.batch_execute(&format!("DROP DATABASE IF EXISTS {created}")).expect("drop");
        client.batch_execute(&format!("CREATE DATABASE {created}")).expect("create database");
    })
    .join()
    .expect("create the database");
    let (base, query) = match url.split_once('?') {
        Some((base, query)) => (base, format!("?{query}")),
        None => (url.as_str(), String::new()),
    };
    let (server, _) = base.rsplit_once('/').expect("a database in the URL");
    Some(format!("{server}/{name}{query}"))
}

/// A config with `top` at its top level and one tenant `acme` (key
/// `acme-key`) with `extra` and no plugins.
fn config(dir: &Path, top: &str, extra: &str) -> std::path::PathBuf {
    let path = dir.join("serve.toml");
    std::fs::write(
        &path,
        format!("{top}[[tenants]]\nname = \"acme\"\napi_keys = [\"{}\"]\n{extra}", lovia_serve::hash_key("acme-key")),
    )
    .expect("config");
    path
}

/// `echo` through `addr`: its output, or the error status and body.
async fn echo(addr: SocketAddr, text: &str) -> Result<String, (u16, String)> {
    let (status, body) =
        request(addr, "POST", "/api/tools/echo/call", Some("acme-key"), &format!(r#"{{"text": "{text}"}}"#)).await;
    if status != 200 {
        return Err((status, body));
    }
    let body = json(&body);
    assert_eq!(body["is_error"], false, "{body}");
    Ok(body["output"].as_str().expect("output").to_owned())
}

async fn replicas(config: &Path, url: &str, n: usize, env: &[(&str, &str)]) -> Vec<(Child, SocketAddr)> {
    let mut out = Vec::new();
    for _ in 0..n {
        out.push(spawn_serve(config, Path::new(url), env).await);
    }
    out
}

pub(super) async fn kill_all(replicas: Vec<(Child, SocketAddr)>) {
    for (mut child, _) in replicas {
        child.start_kill().expect("SIGKILL");
        child.wait().await.expect("reaped");
    }
}

/// A plugin uploaded through replica A is called through B and C as soon as
/// the `NOTIFY` arrives (the poll is set to a minute here, so the poll
/// cannot be what brought it), the tenant's upload bound holds across
/// replicas, and after all three are killed the restarted three load it
/// from PostgreSQL before they listen.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_upload_reaches_every_replica_and_survives_their_restart() {
    let Some(url) = fresh_database("uploads") else { return };
    let dir = tempfile::tempdir().expect("tempdir");
    // Slow polls: only the notification can bring the upload quickly.
    let config = config(dir.path(), "poll_interval_ms = 60000\n", "max_plugins = 1\n");
    let env = [("RUST_LOG", "warn")];
    let first = replicas(&config, &url, 3, &env).await;
    let addrs: Vec<SocketAddr> = first.iter().map(|(_, a)| *a).collect();
    for addr in &addrs {
        let (status, body) = request(*addr, "GET", "/readyz", None, "").await;
        assert_eq!((status, body.as_str()), (200, "ready\n"));
        assert_eq!(echo(*addr, "x").await.map_err(|e| e.0), Err(404), "no echo before the upload");
    }

    let diagnostics = std::fs::read(fixtures::DIAGNOSTICS).expect("diagnostics.wasm");
    let uploaded = Instant::now();
    let (status, body) = post_bytes(addrs[0], "/api/plugins", "acme-key", &diagnostics).await;
    assert_eq!(status, 201, "{body}");
    println!("upload (with its compile) on A: {} ms", uploaded.elapsed().as_millis());
    let uploaded = Instant::now();
    assert_eq!(echo(addrs[0], "on A").await.expect("A calls it"), "on A");
    for (name, addr) in ["B", "C"].iter().zip(&addrs[1..]) {
        let deadline = Instant::now() + Duration::from_secs(20);
        let output = loop {
            match echo(*addr, name).await {
                Ok(output) => break output,
                Err((404, _)) if Instant::now() < deadline => tokio::time::sleep(Duration::from_millis(20)).await,
                Err(e) => panic!("replica {name}: {e:?}"),
            }
        };
        assert_eq!(&output, name);
    }
    let seen = uploaded.elapsed();
    println!("then callable on B and C (a notification, then their compiles): {} ms", seen.as_millis());
    assert!(seen < Duration::from_secs(20), "the poll is 60 s; only NOTIFY brings it sooner: {seen:?}");

    // The bound is the store's: replica B refuses a second upload of the tenant.
    let notes = std::fs::read(fixtures::NOTES).expect("notes.wasm");
    let (status, body) = post_bytes(addrs[1], "/api/plugins", "acme-key", &notes).await;
    assert_eq!(
        (status, body["error"].as_str()),
        (403, Some("this tenant has uploaded 1 plugins; the limit is 1 (max_plugins)"))
    );

    kill_all(first).await;
    let second = replicas(&config, &url, 3, &env).await;
    for (i, (_, addr)) in second.iter().enumerate() {
        assert_eq!(echo(*addr, "after").await.unwrap_or_else(|e| panic!("replica {i}: {e:?}")), "after");
    }
    kill_all(second).await;
}

/// Two replicas uploading for one tenant at once: the store's transaction
/// lets exactly one of two clashing plugins in, and both replicas end with it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn racing_uploads_of_one_tool_name_store_one() {
    let Some(url) = fresh_database("race") else { return };
    let dir = tempfile::tempdir().expect("tempdir");
    let config = config(dir.path(), "", "");
    let running = replicas(&config, &url, 2, &[("RUST_LOG", "warn")]).await;
    let diagnostics = std::fs::read(fixtures::DIAGNOSTICS).expect("diagnostics.wasm");
    let (a, b) = tokio::join!(
        post_bytes(running[0].1, "/api/plugins", "acme-key", &diagnostics),
        post_bytes(running[1].1, "/api/plugins", "acme-key", &diagnostics)
    );
    let mut statuses = [a.0, b.0];
    statuses.sort();
    assert_eq!(statuses, [201, 409], "{a:?} {b:?}");
    let refused = if a.0 == 409 { &a.1 } else { &b.1 };
    assert!(refused["error"].as_str().expect("error").contains("Tool name conflict for '"), "{refused}");
    for (_, addr) in &running {
        let deadline = Instant::now() + Duration::from_secs(20);
        while echo(*addr, "x").await.is_err() {
            assert!(Instant::now() < deadline, "the stored upload never reached {addr}");
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    }
    kill_all(running).await;
}

/// With the default SQLite store a single node keeps its uploads too.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_upload_survives_a_restart_on_sqlite() {
    let dir = tempfile::tempdir().expect("tempdir");
    let config = config(dir.path(), "", "");
    let store = dir.path().join("lovia.db");
    let (mut first, addr) = spawn_serve(&config, &store, &[]).await;
    let diagnostics = std::fs::read(fixtures::DIAGNOSTICS).expect("diagnostics.wasm");
    assert_eq!(post_bytes(addr, "/api/plugins", "acme-key", &diagnostics).await.0, 201);
    first.start_kill().expect("SIGKILL");
    first.wait().await.expect("reaped");
    let (_second, addr) = spawn_serve(&config, &store, &[]).await;
    assert_eq!(echo(addr, "kept").await.expect("loaded from SQLite"), "kept");
    let (status, body) = request(addr, "GET", "/readyz", None, "").await;
    assert_eq!((status, body.as_str()), (200, "ready\n"));
}

fn yaml(path: &str) -> serde_yaml::Value {
    let full = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../deploy").join(path);
    let text = std::fs::read_to_string(&full).unwrap_or_else(|e| panic!("{}: {e}", full.display()));
    serde_yaml::from_str(&text).unwrap_or_else(|e| panic!("{path}: {e}"))
}

fn text(value: &serde_yaml::Value) -> String {
    match value {
        serde_yaml::Value::String(s) => s.clone(),
        serde_yaml::Value::Number(n) => n.to_string(),
        other => panic!("not a scalar: {other:?}"),
    }
}

/// The value after `flag` in `args`.
fn flag<'a>(args: &'a [String], flag: &str) -> &'a str {
    let at = args.iter().position(|a| a == flag).unwrap_or_else(|| panic!("{flag} not in {args:?}"));
    args.get(at + 1).unwrap_or_else(|| panic!("{flag} has no value"))
}

/// Every `--flag` in `args` is one `lovia serve --help` lists, and each
/// numeric flag's value is accepted by the binary's own parser.
fn check_flags(args: &[String], help: &str, whose: &str) {
    for arg in args.iter().filter(|a| a.starts_with("--")) {
        assert!(help.contains(&format!("{arg} ")), "{whose}: {arg} is not a flag of `lovia serve --help`:\n{help}");
    }
    for numeric in ["--poll-interval-ms", "--run-lease-ms", "--lease-renew-ms", "--drain-secs"] {
        if args.iter().any(|a| a == numeric) {
            flag(args, numeric).parse::<u64>().unwrap_or_else(|e| panic!("{whose}: {numeric}: {e}"));
        }
    }
}

/// deploy/: the compose file and the Kubernetes manifests use only flags
/// `lovia serve --help` lists; their ports are the one `--listen` names;
/// the probes ask the real `/healthz` and `/readyz` (answered 200 by a real
/// service); the config they mount parses as a `ServeConfig`, is the same in
/// the ConfigMap as in deploy/serve.toml, and every secret key the
/// Deployment reads exists in the Secret.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_deploy_manifests_agree_with_the_binary() {
    let help =
        std::process::Command::new(env!("CARGO_BIN_EXE_lovia")).args(["serve", "--help"]).output().expect("help");
    let help = String::from_utf8(help.stdout).expect("utf-8");
    let served_port = |args: &[String]| flag(args, "--listen").rsplit_once(':').expect("host:port").1.to_owned();

    // The config: one text, which loads.
    let deploy = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../deploy");
    let toml = std::fs::read_to_string(deploy.join("serve.toml")).expect("deploy/serve.toml");
    let configmap = yaml("kubernetes/configmap.yaml");
    assert_eq!(text(&configmap["data"]["serve.toml"]), toml, "the ConfigMap and deploy/serve.toml differ");
    let config = lovia_serve::ServeConfig::load(&deploy.join("serve.toml")).expect("deploy/serve.toml loads");

    // Kubernetes.
    let deployment = yaml("kubernetes/deployment.yaml");
    let container = &deployment["spec"]["template"]["spec"]["containers"][0];
    let args: Vec<String> = container["args"].as_sequence().expect("args").iter().map(text).collect();
    assert_eq!(args[0], "serve");
    check_flags(&args, &help, "deployment.yaml");
    let port = &container["ports"][0];
    assert_eq!(text(&port["containerPort"]), served_port(&args), "containerPort and --listen");
    assert_eq!(config.listen.port().to_string(), served_port(&args), "the config's listen and --listen");
    let port_name = text(&port["name"]);
    for (probe, path) in [("livenessProbe", "/healthz"), ("readinessProbe", "/readyz")] {
        assert_eq!(text(&container[probe]["httpGet"]["path"]), path, "{probe}");
        assert_eq!(text(&container[probe]["httpGet"]["port"]), port_name, "{probe}");
    }
    let mount = text(&container["volumeMounts"][0]["mountPath"]);
    assert_eq!(Path::new(flag(&args, "--config")), Path::new(&mount).join("serve.toml"), "--config and the mount");
    let secret = yaml("kubernetes/secret.yaml");
    let env = container["env"].as_sequence().expect("env");
    for var in env {
        let key = &var["valueFrom"]["secretKeyRef"];
        assert_eq!(text(&key["name"]), text(&secret["metadata"]["name"]));
        assert!(!secret["stringData"][text(&key["key"]).as_str()].is_null(), "{key:?} is not in the Secret");
    }
    // `$(NAME)` in args is expanded by Kubernetes from the container's env.
    for arg in args.iter().filter(|a| a.starts_with("$(")) {
        let name = arg.trim_start_matches("$(").trim_end_matches(')');
        assert!(env.iter().any(|v| text(&v["name"]) == name), "{arg} is not in the env");
    }
    let grace = deployment["spec"]["template"]["spec"]["terminationGracePeriodSeconds"].as_u64().expect("grace");
    assert!(grace > flag(&args, "--drain-secs").parse::<u64>().expect("secs"), "the drain must end before the kill");
    let service = yaml("kubernetes/service.yaml");
    assert_eq!(text(&service["spec"]["ports"][0]["targetPort"]), port_name);
    assert_eq!(service["spec"]["selector"], deployment["spec"]["template"]["metadata"]["labels"]);

    // Compose.
    let compose = yaml("compose.yaml");
    let command = text(&compose["x-lovia"]["command"][0]);
    let line = command.strip_prefix("exec lovia ").expect("exec lovia …");
    let args: Vec<String> = line.split_whitespace().map(|a| a.trim_matches('"').to_owned()).collect();
    assert_eq!(args[0], "serve");
    check_flags(&args, &help, "compose.yaml");
    let mounted = text(&compose["x-lovia"]["volumes"][0]);
    assert_eq!(mounted, format!("./serve.toml:{}:ro", flag(&args, "--config")));
    let health =
        compose["x-lovia"]["healthcheck"]["test"].as_sequence().expect("test").iter().map(text).collect::<Vec<_>>();
    assert_eq!(
        health.last().map(String::as_str),
        Some(format!("http://127.0.0.1:{}/readyz", served_port(&args)).as_str())
    );
    let services = compose["services"].as_mapping().expect("services");
    let replicas: Vec<_> = services.iter().filter(|(name, _)| text(name).starts_with("lovia-")).collect();
    assert_eq!(replicas.len(), 3, "three replicas");
    for (name, replica) in replicas {
        let ports = text(&replica["ports"][0]);
        assert_eq!(ports.rsplit_once(':').expect("host:container").1, served_port(&args), "{name:?}");
    }

    // The probe paths are real routes of a real service, with no key.
    let addr = crate::serve::start(vec![crate::serve::tenant("demo", "demo-key", &[])]).await;
    for path in ["/healthz", "/readyz"] {
        assert_eq!(request(addr, "GET", path, None, "").await.0, 200, "{path}");
    }
}

/// SIGTERM with a chat waiting on an approval: the process stops accepting,
/// waits at most `--drain-secs` for the chat's stream, exits cleanly, and
/// the next start resumes the run and asks the approval again.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sigterm_drains_within_drain_secs_and_the_run_resumes() {
    use crate::cli::{SCRIPTED_REFUND, spawn_serve_with};
    use crate::serve::Sse;
    let dir = tempfile::tempdir().expect("tempdir");
    let config = dir.path().join("serve.toml");
    std::fs::write(
        &config,
        format!(
            "[[tenants]]\nname = \"demo\"\napi_keys = [\"{}\"]\nagent = {{ name = \"support\" }}\n\
             [[tenants.plugins]]\npath = \"{}\"\n",
            lovia_serve::hash_key("demo-key"),
            fixtures::ORDERS,
        ),
    )
    .expect("config");
    let store = dir.path().join("lovia.db");
    let (mut first, addr) = spawn_serve_with(&config, &store, &SCRIPTED_REFUND, &["--drain-secs", "1"]).await;
    let body = r#"{"session_id": "s1", "input": "Refund 90 dollars on A-1002"}"#;
    let mut sse = Sse::post(addr, "/api/chat", "demo-key", body).await;
    assert_eq!(sse.until("approval_required").await.last().expect("asked").1["id"], "call_refund");
    let pid = first.id().expect("pid").to_string();
    let signalled = Instant::now();
    assert!(std::process::Command::new("kill").args(["-TERM", &pid]).status().expect("kill").success());
    let status = tokio::time::timeout(Duration::from_secs(15), first.wait()).await.expect("exits").expect("status");
    let took = signalled.elapsed();
    println!("SIGTERM to exit with a chat in flight and --drain-secs 1: {} ms", took.as_millis());
    assert!(status.success(), "{status:?}");
    assert!(took >= Duration::from_millis(900), "it waited for the chat in flight: {took:?}");
    drop(sse);

    let (_second, addr) = spawn_serve_with(&config, &store, &SCRIPTED_REFUND, &[]).await;
    let mut sse = Sse::post(addr, "/api/chat", "demo-key", r#"{"session_id": "s1"}"#).await;
    assert_eq!(sse.until("approval_required").await.last().expect("asked again").1["id"], "call_refund");
}

/// A draining service is not ready: `/readyz` says why, `/healthz` is still `ok`.
#[tokio::test]
async fn a_draining_service_is_live_but_not_ready() {
    use tower::ServiceExt;
    let dir = tempfile::tempdir().expect("tempdir");
    let mut config = lovia_serve::ServeConfig::new(vec![crate::serve::tenant("demo", "demo-key", &[])]);
    config.store = Some(dir.path().join("lovia.db").into());
    let service = lovia_serve::Service::new(&lovia_tests::host(), &config).await.expect("service");
    let get = |path: &'static str| {
        let router = service.router();
        async move {
            let request = axum::http::Request::get(path).body(axum::body::Body::empty()).expect("request");
            let response = router.oneshot(request).await.expect("response");
            let status = response.status().as_u16();
            let body = axum::body::to_bytes(response.into_body(), 1 << 16).await.expect("body");
            (status, String::from_utf8_lossy(&body).into_owned())
        }
    };
    assert_eq!(get("/readyz").await, (200, "ready\n".to_owned()));
    service.drain();
    assert_eq!(get("/readyz").await, (503, "not ready: draining (the process is stopping)\n".to_owned()));
    assert_eq!(get("/healthz").await, (200, "ok\n".to_owned()));
}

/// `calls_per_minute` holds for a tenant whose calls are spread over three
/// replicas: the minute's count is one PostgreSQL row, so 9 of 12 calls
/// answer and the other 3 get 429, whichever replica they reach.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn calls_per_minute_holds_across_three_replicas() {
    let Some(url) = fresh_database("quota") else { return };
    let dir = tempfile::tempdir().expect("tempdir");
    let plugin = format!("calls_per_minute = 9\n[[tenants.plugins]]\npath = \"{}\"\n", fixtures::DIAGNOSTICS);
    let config = config(dir.path(), "", &plugin);
    let running = replicas(&config, &url, 3, &[("RUST_LOG", "warn")]).await;
    // The count is per wall-clock minute: start early in one, so that all
    // twelve calls fall in it.
    let second = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).expect("clock").as_secs() % 60;
    if second > 45 {
        tokio::time::sleep(Duration::from_secs(61 - second)).await;
    }
    let started = Instant::now();
    let mut answered = [0; 3];
    let mut refused = [0; 3];
    for i in 0..12 {
        match echo(running[i % 3].1, "q").await {
            Ok(_) => answered[i % 3] += 1,
            Err((429, body)) => {
                assert!(body.contains("calls per minute quota exceeded"), "{body}");
                refused[i % 3] += 1;
            }
            Err(e) => panic!("{e:?}"),
        }
    }
    let took = started.elapsed();
    println!(
        "12 calls over 3 replicas, 9 per minute: answered {answered:?}, refused {refused:?}, {:.1} ms per call with the shared count",
        took.as_secs_f64() * 1000.0 / 12.0
    );
    assert_eq!(answered.iter().sum::<i32>(), 9, "answered {answered:?}");
    assert_eq!(refused.iter().sum::<i32>(), 3, "refused {refused:?}");
    kill_all(running).await;
}

mod cancelled;
mod events;
mod fencing;
mod load;
mod mcp_tasks;
mod questions;
mod quotas;
mod store_loss;
mod takeover;
