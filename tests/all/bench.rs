//! The floors `lovia bench` prints its figures against: the bare calls and
//! loads they time must do the work they claim, and fail loudly when they
//! cannot (a floor that silently measured an error would flatter lovia).

use lovia_host::plugin::floor::FloorError;
use lovia_tests::{fixtures, load};
use std::process::Command;

#[tokio::test]
async fn the_fresh_and_warm_floors_call_the_tool_and_report_its_failures() {
    let plugin = load(fixtures::DIAGNOSTICS).await;
    plugin.floor_fresh_call("echo", r#"{"text": "hi"}"#).await.expect("a bare fresh call");
    let mut warm = plugin.floor_warm().await.expect("a live instance");
    for _ in 0..3 {
        warm.call("echo", r#"{"text": "hi"}"#).await.expect("a bare warm call");
    }
    // The bare store has no session store, so this tool answers with an error.
    let failed = plugin.floor_fresh_call("fail_times", r#"{"times": 0}"#).await;
    assert!(matches!(failed, Err(FloorError::ToolError { ref tool }) if tool == "fail_times"), "{failed:?}");
    let unknown = plugin.floor_check_tool("no_such_tool");
    assert!(matches!(unknown, Err(FloorError::NoSuchTool { .. })), "{unknown:?}");
}

#[tokio::test]
async fn the_cached_load_floor_needs_the_hosts_own_artifact() {
    let plain = load(fixtures::DIAGNOSTICS).await;
    assert!(matches!(plain.floor_cached_load(), Err(FloorError::NotCached)));

    let dir = tempfile::tempdir().expect("tempdir");
    let config = lovia_host::HostConfig::default().with_cache_dir(Some(dir.path().join("cache"))).with_pool_slots(4);
    let host = lovia_host::Host::new(config).expect("host");
    let plugin = host.load_file(fixtures::DIAGNOSTICS).await.expect("load");
    plugin.floor_cached_load().expect("the artifact just written deserialises");
    // An artifact changed behind the host's back is refused, never mapped.
    let artifact = std::fs::read_dir(dir.path().join("cache"))
        .expect("cache dir")
        .map(|e| e.expect("entry").path())
        .find(|p| p.extension().is_some_and(|e| e == "cwasm"))
        .expect("an artifact");
    let mut bytes = std::fs::read(&artifact).expect("read");
    let last = bytes.len() - 1;
    bytes[last] ^= 0xff;
    std::fs::write(&artifact, bytes).expect("write");
    let refused = plugin.floor_cached_load();
    assert!(matches!(refused, Err(FloorError::Unproven { .. })), "{refused:?}");
}

#[test]
fn bench_only_python_without_a_python_plugin_says_what_to_pass() {
    let out = Command::new(env!("CARGO_BIN_EXE_lovia"))
        .args(["bench", "--only", "python", "--plugin", fixtures::DIAGNOSTICS])
        .output()
        .expect("run lovia");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{stderr}");
    assert!(stderr.contains("--only python measures the plugin of --python"), "{stderr}");
    assert!(stderr.contains("--python PATH"), "{stderr}");
}
