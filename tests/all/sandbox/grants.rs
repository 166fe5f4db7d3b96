//! Grants: nothing by default; exactly what was granted otherwise, and no
//! way out of a granted directory.

use lovia_host::plugin::config::PluginConfig;
use lovia_host::sandbox::{DirGrant, DirMode, Grants};
use lovia_host::{CallOutcome, CallRequest, Plugin};
use lovia_tests::{fixtures, host, load};
use std::path::Path;

/// A granted directory with one file inside, and a secret file beside it
/// that a symlink inside points to.
fn layout(root: &Path) {
    std::fs::create_dir_all(root.join("data")).expect("mkdir");
    std::fs::create_dir_all(root.join("outside")).expect("mkdir");
    std::fs::write(root.join("data/in.txt"), "inside").expect("write");
    std::fs::write(root.join("outside/secret.txt"), "top secret").expect("write");
    std::os::unix::fs::symlink(root.join("outside/secret.txt"), root.join("data/link.txt")).expect("symlink");
    std::os::unix::fs::symlink(root.join("outside"), root.join("data/outdir")).expect("symlink");
}

async fn with_grants(grants: Grants) -> Plugin {
    host().load_file_with(fixtures::HOSTILE, PluginConfig::default().with_grants(grants)).await.expect("load")
}

async fn call(plugin: &Plugin, tool: &str, args: serde_json::Value) -> CallOutcome {
    plugin.invoke(&CallRequest::new(tool, args.to_string())).await
}

#[tokio::test]
async fn nothing_is_granted_by_default() {
    let hostile = load(fixtures::HOSTILE).await;
    let read = call(&hostile, "read_file", serde_json::json!({"path": "/etc/passwd"})).await;
    assert!(read.model_output().contains("No such file or directory"), "{read:?}");
    let list = call(&hostile, "list_dir", serde_json::json!({"path": "/"})).await;
    assert!(list.is_error(), "{list:?}");
    // This process has HOME and PATH; the plugin sees neither.
    for name in ["HOME", "PATH"] {
        let env = call(&hostile, "read_env", serde_json::json!({"name": name})).await;
        assert_eq!(env.model_output(), format!("Tool error: {name}: environment variable not found"));
    }
}

#[tokio::test]
async fn a_read_only_directory_cannot_be_left_or_written() {
    let dir = tempfile::tempdir().expect("tempdir");
    layout(dir.path());
    let grants = Grants {
        dirs: vec![DirGrant { host: dir.path().join("data"), guest: "/data".into(), mode: DirMode::Ro }],
        ..Default::default()
    };
    let plugin = with_grants(grants).await;
    let read = |path: &str| {
        let plugin = plugin.clone();
        let path = path.to_owned();
        async move { call(&plugin, "read_file", serde_json::json!({"path": path})).await }
    };
    assert_eq!(read("/data/in.txt").await, CallOutcome::Text("inside".into()));
    for escape in [
        "/data/../outside/secret.txt",
        "/data/link.txt",
        "/data/outdir/secret.txt",
        &dir.path().join("outside/secret.txt").display().to_string(),
    ] {
        let out = read(escape).await;
        assert!(out.is_error(), "{escape} was readable: {out:?}");
        assert!(!out.model_output().contains("top secret"));
    }
    let write = call(&plugin, "write_file", serde_json::json!({"path": "/data/new.txt", "text": "x"})).await;
    assert!(write.is_error(), "{write:?}");
    assert!(!dir.path().join("data/new.txt").exists(), "nothing was written");
    assert_eq!(std::fs::read_to_string(dir.path().join("outside/secret.txt")).expect("read"), "top secret");
}

#[tokio::test]
async fn a_read_write_directory_writes_only_inside() {
    let dir = tempfile::tempdir().expect("tempdir");
    layout(dir.path());
    let grants = Grants {
        dirs: vec![DirGrant { host: dir.path().join("data"), guest: "/data".into(), mode: DirMode::Rw }],
        ..Default::default()
    };
    let plugin = with_grants(grants).await;
    let ok = call(&plugin, "write_file", serde_json::json!({"path": "/data/new.txt", "text": "hello"})).await;
    assert_eq!(ok, CallOutcome::Text("wrote /data/new.txt".into()));
    assert_eq!(std::fs::read_to_string(dir.path().join("data/new.txt")).expect("read"), "hello");
    for escape in ["/data/../outside/evil.txt", "/data/outdir/evil.txt", "/data/link.txt"] {
        let out = call(&plugin, "write_file", serde_json::json!({"path": escape, "text": "pwned"})).await;
        assert!(out.is_error(), "{escape}: {out:?}");
    }
    assert!(!dir.path().join("outside/evil.txt").exists());
    assert_eq!(
        std::fs::read_to_string(dir.path().join("outside/secret.txt")).expect("read"),
        "top secret",
        "the symlink target is intact"
    );
}

#[tokio::test]
async fn environment_variables_and_secrets_are_passed_by_name_only() {
    let dir = tempfile::tempdir().expect("tempdir");
    let wasm = dir.path().join("hostile.wasm");
    std::fs::copy(lovia_tests::packed(fixtures::HOSTILE).await, &wasm).expect("copy");
    std::fs::write(
        dir.path().join("hostile.toml"),
        "[grants]\nsecrets = { API_TOKEN = { env = \"LOVIA_TEST_SECRET\" } }\n",
    )
    .expect("write");
    let lovia = |args: &[&str]| {
        std::process::Command::new(env!("CARGO_BIN_EXE_lovia"))
            .arg("--no-cache")
            .args(args)
            .env("LOVIA_TEST_GRANTED", "granted-value")
            .env("LOVIA_TEST_SECRET", "s3cr3t-value")
            .output()
            .expect("run lovia")
    };
    let wasm = wasm.to_str().expect("utf8");
    let read = |name: &str, extra: &[&str]| {
        let args = format!(r#"{{"name": "{name}"}}"#);
        let mut all = vec!["call", wasm, "read_env", args.as_str()];
        all.extend_from_slice(extra);
        String::from_utf8_lossy(&lovia(&all).stdout).trim().to_owned()
    };
    assert_eq!(read("LOVIA_TEST_GRANTED", &["--grant-env", "LOVIA_TEST_GRANTED"]), "granted-value");
    assert_eq!(read("LOVIA_TEST_GRANTED", &[]), "Tool error: LOVIA_TEST_GRANTED: environment variable not found");
    assert_eq!(read("API_TOKEN", &[]), "s3cr3t-value", "the secret arrives under its guest name");
    assert_eq!(read("LOVIA_TEST_SECRET", &[]), "Tool error: LOVIA_TEST_SECRET: environment variable not found");
    let inspect = lovia(&["inspect", wasm]);
    let shown = String::from_utf8_lossy(&inspect.stdout);
    assert!(shown.contains("granted: secret API_TOKEN (from $LOVIA_TEST_SECRET)"), "{shown}");
    assert!(!shown.contains("s3cr3t"), "inspect never shows a secret's value");
}

#[tokio::test]
async fn a_config_file_beside_the_plugin_grants_and_unknown_keys_are_refused() {
    let dir = tempfile::tempdir().expect("tempdir");
    layout(dir.path());
    let wasm = dir.path().join("hostile.wasm");
    std::fs::copy(fixtures::HOSTILE, &wasm).expect("copy");
    std::fs::write(
        dir.path().join("hostile.toml"),
        "[grants]\ndirs = [{ host = \"data\", guest = \"/data\" }]\n\n[limits]\nmemory_mib = 8\n",
    )
    .expect("write");
    let plugin = host().load_file(&wasm).await.expect("load");
    assert_eq!(
        call(&plugin, "read_file", serde_json::json!({"path": "/data/in.txt"})).await,
        CallOutcome::Text("inside".into())
    );
    assert_eq!(
        call(&plugin, "memory_bomb", serde_json::json!({})).await.model_output(),
        "Tool error: out of memory (limit 8 MiB)"
    );

    std::fs::write(dir.path().join("hostile.toml"), "[grants]\nnetwork = true\n").expect("write");
    let err = host().load_file(&wasm).await.expect_err("unknown key");
    assert!(err.to_string().contains("unknown field `network`"), "{err}");
    std::fs::write(dir.path().join("hostile.toml"), "[grants]\ndirs = [{ host = \"missing\", guest = \"/data\" }]\n")
        .expect("write");
    let err = host().load_file(&wasm).await.expect_err("missing dir");
    assert!(err.to_string().contains("does not exist"), "{err}");
}
