//! Golden schemas: every example tool's spec, exactly as the model sees it.
//! Set `LOVIA_BLESS=1` to rewrite the golden files after an intended change.

use lovia_tests::{fixtures, load};
use std::path::PathBuf;

async fn check(name: &str, path: &str) {
    let plugin = load(path).await;
    let tools: Vec<_> = plugin.tools().cloned().collect();
    let actual = serde_json::to_string_pretty(&tools).expect("serialise") + "\n";
    let golden = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../tests/golden").join(format!("{name}.json"));
    if std::env::var_os("LOVIA_BLESS").is_some() {
        std::fs::write(&golden, &actual).expect("write golden");
    }
    let expected = std::fs::read_to_string(&golden)
        .unwrap_or_else(|e| panic!("{}: {e} (run with LOVIA_BLESS=1)", golden.display()));
    assert_eq!(actual, expected, "{name}: the specs differ from {}", golden.display());
}

#[tokio::test]
async fn orders() {
    check("orders", fixtures::ORDERS).await;
}

#[tokio::test]
async fn docs() {
    check("docs", fixtures::DOCS).await;
}

#[tokio::test]
async fn notes() {
    check("notes", fixtures::NOTES).await;
}

#[tokio::test]
async fn ops() {
    check("ops", fixtures::OPS).await;
}

#[tokio::test]
async fn diagnostics() {
    check("diagnostics", fixtures::DIAGNOSTICS).await;
}

#[tokio::test]
async fn schema_text_keeps_the_reference_key_order() {
    let plugin = load(fixtures::DOCS).await;
    let params = serde_json::to_string(&plugin.tool("search_docs").expect("tool").parameters).expect("json");
    let at = |key: &str| params.find(&format!("\"{key}\":")).expect(key);
    assert!(at("$defs") < at("properties"));
    assert!(
        params.rfind("\"required\":").expect("required")
            < params.rfind("\"type\":\"object\",\"additionalProperties\"").expect("tail")
    );
    assert!(params.ends_with(r#""type":"object","additionalProperties":false}"#));
    assert!(!params.contains("\"title\""));
    assert!(!params.contains("\"format\""));
}

#[tokio::test]
async fn no_arguments_give_the_closed_empty_object() {
    let plugin = load(fixtures::NOTES).await;
    let list = plugin.tool("list_notes").expect("tool");
    assert_eq!(list.parameters.to_string(), r#"{"properties":{},"type":"object","additionalProperties":false}"#);
}
