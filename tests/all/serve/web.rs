//! `[tenants.web]`: a tenant's chats get `read_page` and `web_search`
//! (docs/web.md), reaching a real loopback server only through the origin
//! the table grants exactly; a wildcard grant is refused at start.

use super::{Sse, start_with, tenant};
use crate::web::{Reply, Site};
use lovia_serve::{ProviderConfig, ServeConfig, TenantWeb};
use serde_json::json as j;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_tenants_chats_read_pages_and_search_through_its_web_table() {
    let site = Site::start(|_, path, _| {
        if path.starts_with("/search?") {
            let answer = j!({"results": [{"title": "Found", "url": "https://example.org/", "content": "a snippet"}]});
            Reply::Page(200, "application/json", answer.to_string())
        } else {
            Reply::Page(200, "text/html", "<title>Intranet</title><p>Quarterly numbers.</p>".into())
        }
    })
    .await;
    let dir = tempfile::tempdir().expect("tempdir");
    let script = dir.path().join("script.json");
    let page = j!({"url": format!("{}/report", site.origin())}).to_string();
    let replies = j!([
        {"tool_calls": [
            {"id": "p", "name": "read_page", "arguments": page},
            {"id": "s", "name": "web_search", "arguments": r#"{"query": "numbers"}"#}
        ]},
        {"content": "Read."}
    ]);
    std::fs::write(&script, replies.to_string()).expect("script");
    let mut acme = tenant("acme", "acme-key", &[]);
    acme.provider = ProviderConfig::scripted(script);
    acme.agent.ask_human = true;
    let mut web = TenantWeb::default();
    web.read_page = true;
    web.allow = vec![site.origin().parse().expect("origin")];
    web.max_concurrent_reads = 2;
    web.searxng_url = Some(site.origin());
    acme.web = Some(web);
    let addr = start_with(ServeConfig::new(vec![acme])).await;
    let mut sse = Sse::post(addr, "/api/chat", "acme-key", r#"{"session_id": "w1", "input": "numbers?"}"#).await;
    let events = sse.rest().await;
    let result = |id: &str| super::tool_result(&events, id);
    assert!(result("p").contains("Title: Intranet\n") && result("p").contains("Quarterly numbers."), "{}", result("p"));
    assert!(result("s").contains("1. Found\nhttps://example.org/\na snippet"), "{}", result("s"));
    assert_eq!(events.last().expect("end").0, "run_completed");

    // The same tools at the tenant's other doors: listed, called directly,
    // in the console's list; `ask_human` listed, and its 404 says why.
    let (status, listed) = super::request(addr, "GET", "/api/tools", Some("acme-key"), "").await;
    assert_eq!(status, 200);
    let names: Vec<String> = serde_json::from_str::<Vec<serde_json::Value>>(&listed)
        .expect("json")
        .iter()
        .map(|t| t["function"]["name"].as_str().unwrap_or_default().to_owned())
        .collect();
    assert_eq!(names, ["read_page", "web_search", "ask_human"], "{listed}");
    let (status, body) = super::request(addr, "POST", "/api/tools/read_page/call", Some("acme-key"), &page).await;
    assert_eq!(status, 200, "{body}");
    assert!(super::json(&body)["output"].as_str().unwrap_or_default().contains("Quarterly numbers."), "{body}");
    let (status, detailed) = super::request(addr, "GET", "/api/tools/detailed", Some("acme-key"), "").await;
    assert_eq!(status, 200);
    let detailed: Vec<serde_json::Value> = serde_json::from_str(&detailed).expect("json");
    let direct: Vec<(&str, bool)> =
        detailed.iter().map(|t| (t["name"].as_str().unwrap_or_default(), t["direct"] == true)).collect();
    assert_eq!(direct, [("read_page", true), ("web_search", true), ("ask_human", false)]);
    let (status, body) = super::request(addr, "POST", "/api/tools/ask_human/call", Some("acme-key"), "{}").await;
    assert_eq!(status, 404);
    assert!(body.contains("ask_human has no direct call: it asks the person in a chat"), "{body}");
}

#[test]
fn a_wildcard_web_grant_is_refused_at_start() {
    let mut acme = tenant("acme", "acme-key", &[]);
    let mut web = TenantWeb::default();
    web.read_page = true;
    web.allow = vec!["http://*:*".parse().expect("origin")];
    acme.web = Some(web);
    let mut config = ServeConfig::new(vec![acme]);
    let err = config.resolve(std::path::Path::new(".")).expect_err("refused");
    assert_eq!((err.setting, err.tenant.as_deref()), ("web.allow", Some("acme")), "which setting, whose");
    let err = err.to_string();
    assert!(err.contains("web.allow: http://*:* has a wildcard"), "{err}");
}

/// A key variable that is not set stops the start with a typed error that
/// names the key, as `--brave-search` does at the CLI.
#[tokio::test]
async fn a_web_key_variable_that_is_not_set_stops_the_start_naming_the_key() {
    let dir = tempfile::tempdir().expect("tempdir");
    let mut acme = tenant("acme", "acme-key", &[]);
    let mut web = TenantWeb::default();
    web.brave_key_env = Some("LOVIA_TEST_NO_SUCH_BRAVE_KEY".into());
    acme.web = Some(web);
    let mut config = ServeConfig::new(vec![acme]);
    config.store = Some(dir.path().join("sessions.db").into());
    config.resolve(std::path::Path::new(".")).expect("valid config");
    let err = lovia_serve::Service::new(&lovia_tests::host(), &config).await.err().expect("refused");
    let lovia_serve::ServeError::Web { tenant, source } = &err else { panic!("not a web error: {err}") };
    assert_eq!((tenant.as_str(), source.key()), ("acme", "brave_key_env"));
    let text = err.to_string();
    assert!(text.starts_with("tenant acme: [tenants.web]: web.brave_key_env: "), "{text}");
    assert!(text.contains("LOVIA_TEST_NO_SUCH_BRAVE_KEY"), "{text}");
}
