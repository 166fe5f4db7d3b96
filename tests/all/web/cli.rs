//! `lovia run --read-page --web-allow … --searxng …`: the web tools reach a
//! scripted agent through the CLI, and a wildcard `--web-allow` is refused.

use super::{Reply, Site};
use serde_json::json;

#[tokio::test]
async fn lovia_run_offers_read_page_and_web_search_to_the_agent() {
    let site = Site::start(|_, path, _| {
        if path.starts_with("/search?") {
            let answer =
                json!({"results": [{"title": "Found", "url": "https://example.org/", "content": "a snippet"}]});
            Reply::Page(200, "application/json", answer.to_string())
        } else {
            Reply::Page(200, "text/html", "<title>Local</title><p>Local page text.</p>".into())
        }
    })
    .await;
    let dir = tempfile::tempdir().expect("tempdir");
    let script = dir.path().join("script.json");
    let page_args = json!({"url": format!("{}/page", site.origin())}).to_string();
    std::fs::write(
        &script,
        json!({"turns": [
            {"tool_calls": [
                {"id": "p", "name": "read_page", "arguments": page_args},
                {"id": "s", "name": "web_search", "arguments": r#"{"query": "local"}"#}
            ]},
            {"text": "Done."}
        ]})
        .to_string(),
    )
    .expect("script");
    let o = tokio::process::Command::new(env!("CARGO_BIN_EXE_lovia"))
        .args(["run", "--read-page", "--web-allow", &site.origin(), "--searxng", &site.origin(), "--script"])
        .arg(&script)
        .output()
        .await
        .expect("run lovia");
    let stdout = String::from_utf8_lossy(&o.stdout);
    assert_eq!(o.status.code(), Some(0), "stderr: {}\nstdout: {stdout}", String::from_utf8_lossy(&o.stderr));
    let output = |id: &str| {
        stdout
            .lines()
            .map(|l| serde_json::from_str::<serde_json::Value>(l).expect("json line"))
            .find(|e| e["event"] == "tool_result" && e["id"] == id)
            .unwrap_or_else(|| panic!("no result for {id}: {stdout}"))["result"]
            .as_str()
            .expect("text")
            .to_owned()
    };
    assert!(output("p").contains("Title: Local\n") && output("p").contains("Local page text."), "{}", output("p"));
    assert!(output("s").contains("1. Found\nhttps://example.org/\na snippet"), "{}", output("s"));
}

#[test]
fn a_wildcard_web_allow_is_refused_with_a_hint() {
    let dir = tempfile::tempdir().expect("tempdir");
    let script = dir.path().join("script.json");
    std::fs::write(&script, r#"{"turns": [{"text": "Done."}]}"#).expect("script");
    let o = std::process::Command::new(env!("CARGO_BIN_EXE_lovia"))
        .args(["run", "--read-page", "--web-allow", "http://*:*", "--script"])
        .arg(&script)
        .output()
        .expect("run lovia");
    let stderr = String::from_utf8_lossy(&o.stderr);
    assert!(!o.status.success(), "{stderr}");
    assert_eq!(stderr.lines().count(), 2, "one line and its hint: {stderr}");
    assert!(stderr.contains("--web-allow http://*:* has a wildcard"), "{stderr}");
    assert!(stderr.contains("hint: public hosts are reachable already"), "{stderr}");
}
