//! Spec §15: names are unique across all sources, checked before anything runs.

use lovia_host::{Tool, ToolSource, Toolset};
use lovia_tests::native::sleeper;
use lovia_tests::{fixtures, load};

#[tokio::test]
async fn a_clash_names_the_second_source() {
    let docs = load(fixtures::DOCS).await;
    let err = Toolset::new()
        .with(ToolSource::AgentTools, vec![sleeper("search_docs")])
        .and_then(|t| t.with(ToolSource::Plugin, Tool::from_plugin(&docs)))
        .expect_err("clash");
    assert_eq!(
        err.to_string(),
        "Tool name conflict for 'search_docs' from plugin.\n  hint: Rename one tool or remove the duplicate. For MCP, set MCPServer.name to prefix a server's tools (e.g. name='fs' -> fs__read_file)."
    );
    let err = Toolset::new()
        .with(ToolSource::AgentTools, vec![sleeper("x")])
        .and_then(|t| t.with(ToolSource::Handoff, vec![sleeper("x")]))
        .expect_err("clash");
    assert!(err.to_string().starts_with("Tool name conflict for 'x' from handoff."));
}

#[test]
fn native_tool_names_are_checked() {
    let err = Tool::builder("has space")
        .invoke(|_, _| async { Ok(lovia_host::ToolOutput::Text(String::new())) })
        .expect_err("invalid");
    assert!(err.to_string().contains("^[a-zA-Z0-9_-]{1,64}$"), "{err}");
}
