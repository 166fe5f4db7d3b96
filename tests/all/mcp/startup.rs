//! How `lovia mcp` starts and ends on stdio, with the official Python MCP
//! client: a client that only probes with `server/discover` and leaves (as
//! the Python SDK and fastmcp probe servers) ends the server with status 0
//! and no error, and with `--code-mode` the engine is compiled once and then
//! loaded from the artifact cache, so a later start answers at once.

use super::{client_logged, python};
use lovia_tests::fixtures;

/// The server, behind a shell that writes its exit status to stderr (which
/// the client passes on), so the test can read how it ended.
fn server(cache: &std::path::Path, extra: &[&str]) -> Vec<String> {
    let mut args: Vec<String> = vec![
        "stdio".into(),
        "/bin/sh".into(),
        "-c".into(),
        r#""$0" "$@"; echo "lovia exited with status $?" >&2"#.into(),
        env!("CARGO_BIN_EXE_lovia").into(),
        "--cache-dir".into(),
        cache.display().to_string(),
        "mcp".into(),
        fixtures::DOCS.into(),
    ];
    args.extend(extra.iter().map(|a| a.to_string()));
    args
}

fn probe(mode: &str, server: Vec<String>) -> (serde_json::Value, String) {
    let py = python().expect("the mcp-client part");
    let mut args = vec![mode.to_owned(), "probe".to_owned()];
    args.extend(server);
    client_logged(&py, &args)
}

#[test]
fn a_client_that_only_probes_ends_the_server_quietly() {
    if python().is_none() {
        return;
    }
    let cache = tempfile::tempdir().expect("a temporary directory");
    for mode in ["auto", "legacy"] {
        let (out, log) = probe(mode, server(cache.path(), &[]));
        let expected = if mode == "auto" { "2026-07-28" } else { "2025-11-25" };
        assert_eq!(out["protocol"], expected, "{log}");
        assert!(log.contains("lovia exited with status 0"), "{mode}: {log}");
        assert!(!log.contains("error"), "{mode}: nothing is wrong when a client leaves: {log}");
    }
}

#[test]
fn the_code_mode_engine_is_compiled_once_and_then_loaded_from_the_cache() {
    if python().is_none() {
        return;
    }
    let cache = tempfile::tempdir().expect("a temporary directory");
    let (_, first) = probe("auto", server(cache.path(), &["--code-mode"]));
    assert!(first.contains("lovia mcp: compiling the code-mode engine"), "the first start says why it waits: {first}");
    let (out, second) = probe("auto", server(cache.path(), &["--code-mode"]));
    assert!(!second.contains("compiling"), "the second start compiles nothing: {second}");
    assert!(second.contains("lovia exited with status 0"), "{second}");
    // From the client's spawn of the process to its answered discovery: the
    // engine no longer compiles at every start (it took 1.5 s in a debug
    // build here; 6 to 11 s were reported from a loaded machine).
    let seconds = out["connect_seconds"].as_f64().unwrap_or(f64::MAX);
    assert!(seconds < 1.0, "the first request is answered within a second of the start: {seconds} s");
}
