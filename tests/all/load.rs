//! Loading: every kind of bad input is a typed error that names the cause.

use lovia_host::LoadError;
use lovia_tests::{fixtures, host};

async fn load_bytes(bytes: &[u8]) -> LoadError {
    host().load_bytes(bytes, "input.wasm").await.expect_err("must not load")
}

#[tokio::test]
async fn random_bytes_are_not_wasm() {
    let err = load_bytes(b"this is not a component at all").await;
    assert!(matches!(err, LoadError::NotWasm { .. }), "{err}");
    assert_eq!(err.to_string(), "input.wasm is not a WebAssembly file (it does not start with \\0asm)");
}

#[tokio::test]
async fn a_core_module_is_named_as_such() {
    let err = load_bytes(b"\0asm\x01\0\0\0").await;
    assert!(matches!(err, LoadError::CoreModule { .. }), "{err}");
    assert!(err.hint().is_some_and(|h| h.contains("wasm32-wasip2")));
}

#[tokio::test]
async fn a_truncated_component_is_invalid() {
    let bytes = std::fs::read(fixtures::DIAGNOSTICS).expect("fixture");
    let err = load_bytes(&bytes[..bytes.len() / 2]).await;
    assert!(matches!(err, LoadError::Invalid { .. }), "{err}");
}

#[tokio::test]
async fn a_component_without_the_plugin_export_says_what_is_missing() {
    // The smallest valid component: a header and nothing else.
    let err = load_bytes(b"\0asm\x0d\0\x01\0").await;
    assert!(matches!(err, LoadError::WrongExports { .. }), "{err}");
    assert!(err.to_string().contains("lovia:tools/plugin"), "{err}");
}

#[tokio::test]
async fn a_missing_file_is_a_read_error() {
    let err = host().load_file("/no/such/plugin.wasm").await.expect_err("missing");
    assert!(matches!(err, LoadError::Read { .. }), "{err}");
}

#[tokio::test]
async fn the_compiled_artifact_cache_is_reused_and_a_damaged_artifact_rebuilt() {
    let dir = tempfile::tempdir().expect("tempdir");
    let cached = lovia_host::Host::new(
        lovia_host::HostConfig::default().with_cache_dir(Some(dir.path().to_owned())).with_pool_slots(4),
    )
    .expect("host");
    let first = cached.load_file(fixtures::DOCS).await.expect("load");
    let files: Vec<_> = std::fs::read_dir(dir.path()).expect("dir").map(|e| e.expect("entry").path()).collect();
    let named = |suffix: &str| -> Vec<std::path::PathBuf> {
        files.iter().filter(|p| p.to_string_lossy().ends_with(suffix)).cloned().collect()
    };
    let artifacts = named(".cwasm");
    assert_eq!(artifacts.len(), 1, "one artifact per component and engine: {files:?}");
    assert_eq!(named(".manifest.json").len(), 1, "and its checked description: {files:?}");
    assert_eq!(named("artifact.key").len(), 1, "and the host's key that authenticates them: {files:?}");
    assert_eq!(named(".cwasm.seal").len(), 1, "and the artifact's tag, beside it: {files:?}");
    // And, once the component file has settled (docs/security.md), its
    // remembered digest.
    let sources = files.iter().filter(|p| p.file_name().is_some_and(|n| n.to_string_lossy().starts_with("source-")));
    assert_eq!(files.len() - sources.count(), 4, "{files:?}");
    let artifact = &artifacts[0];
    let described = named(".manifest.json").remove(0);
    assert!(artifact.file_name().and_then(|n| n.to_str()).is_some_and(|n| n.starts_with(first.digest())));

    // A cache hit leaves the artifact untouched.
    let written = std::fs::metadata(artifact).and_then(|m| m.modified()).expect("mtime");
    std::thread::sleep(std::time::Duration::from_millis(20));
    let second = cached.load_file(fixtures::DOCS).await.expect("load from cache");
    assert_eq!(std::fs::metadata(artifact).and_then(|m| m.modified()).expect("mtime"), written, "not recompiled");
    assert_eq!(first.manifest(), second.manifest());

    // While a plugin of those bytes lives, another load shares it and reads
    // nothing from the disk; once none does, the disk is read again.
    let manifest = first.manifest();
    drop((first, second));
    // A damaged artifact or description is never trusted: it is rebuilt and replaced.
    std::fs::write(artifact, b"garbage").expect("damage");
    std::fs::write(&described, b"{not json").expect("damage");
    let third = cached.load_file(fixtures::DOCS).await.expect("load after damage");
    assert_eq!(third.manifest(), manifest);
    assert!(std::fs::metadata(artifact).expect("artifact").len() > 1000, "the artifact was rewritten");
    // The file is a 32-byte HMAC tag, then the JSON.
    let sealed = std::fs::read(&described).expect("read");
    let rewritten: serde_json::Value = serde_json::from_slice(&sealed[32..]).expect("json");
    assert_eq!(rewritten["manifest"]["tools"][0]["name"], "search_docs", "the description was rewritten");
    let out = third.invoke(&lovia_host::CallRequest::new("search_docs", r#"{"query": "limits"}"#)).await;
    assert_eq!(out.model_output(), r#"["Limits"]"#);
}

/// A cache that cannot take a compiled artifact (here its path is a
/// directory; in bench/fault-run it was a full disk) does not fail the
/// load: the plugin is served, and the next load compiles again. Failing
/// it left a replica without a tenant's stored upload for good.
#[tokio::test]
async fn a_cache_that_cannot_be_written_does_not_fail_the_load() {
    let dir = tempfile::tempdir().expect("tempdir");
    let host = |dir: &std::path::Path| {
        lovia_host::Host::new(lovia_host::HostConfig::default().with_cache_dir(Some(dir.to_owned())).with_pool_slots(4))
            .expect("host")
    };
    // Where the artifact goes, learnt from a first load, then blocked.
    let first = host(dir.path()).load_file(fixtures::DOCS).await.expect("load");
    drop(first);
    let artifact = std::fs::read_dir(dir.path())
        .expect("dir")
        .map(|e| e.expect("entry").path())
        .find(|p| p.extension().is_some_and(|x| x == "cwasm"))
        .expect("an artifact");
    for entry in std::fs::read_dir(dir.path()).expect("dir") {
        let path = entry.expect("entry").path();
        if path.file_name().is_some_and(|n| !n.to_string_lossy().ends_with(".key")) {
            std::fs::remove_file(&path).expect("remove");
        }
    }
    std::fs::create_dir(&artifact).expect("a directory where the artifact goes");
    let plugin = host(dir.path()).load_file(fixtures::DOCS).await.expect("loads without its artifact cached");
    let out = plugin.invoke(&lovia_host::CallRequest::new("search_docs", r#"{"query": "limits"}"#)).await;
    assert_eq!(out.model_output(), r#"["Limits"]"#);
    assert!(artifact.is_dir(), "nothing was written over it");
}

/// The artifact cache keeps at most `cache_max_bytes`: past it, the least
/// recently loaded artifacts go (with their seals and descriptions), a
/// cached load counts as a use, and the one just written always stays.
#[tokio::test]
async fn the_artifact_cache_drops_the_least_recently_loaded_past_its_bound() {
    let dir = tempfile::tempdir().expect("tempdir");
    let artifacts = |dir: &std::path::Path| -> std::collections::BTreeMap<String, u64> {
        std::fs::read_dir(dir)
            .expect("ls")
            .flatten()
            .filter(|e| e.path().extension().is_some_and(|x| x == "cwasm"))
            .map(|e| (e.file_name().to_string_lossy().into_owned(), e.metadata().expect("meta").len()))
            .collect()
    };
    let host = |max: u64| {
        lovia_host::Host::new(
            lovia_host::HostConfig::default()
                .with_cache_dir(Some(dir.path().to_owned()))
                .with_cache_max_bytes(max)
                .with_pool_slots(4),
        )
        .expect("host")
    };
    // The sizes, from a cache large enough for all three.
    let big = host(u64::MAX);
    let mut names = Vec::new();
    for fixture in [fixtures::DOCS, fixtures::ORDERS, fixtures::DIAGNOSTICS] {
        let before = artifacts(dir.path());
        big.load_file(fixture).await.expect("load");
        let after = artifacts(dir.path());
        names.push(after.keys().find(|k| !before.contains_key(*k)).expect("a new artifact").clone());
    }
    let sizes = artifacts(dir.path());
    let [docs, orders, diagnostics] = [&names[0], &names[1], &names[2]];
    for entry in std::fs::read_dir(dir.path()).expect("ls").flatten() {
        if entry.file_name() != "artifact.key" {
            std::fs::remove_file(entry.path()).expect("empty the cache");
        }
    }

    // Room for all but one byte of the three: docs, orders, then docs again
    // (a cached load), then diagnostics: orders is the least recently used.
    let bounded = host(sizes.values().sum::<u64>() - 1);
    let pause = || tokio::time::sleep(std::time::Duration::from_millis(50));
    bounded.load_file(fixtures::DOCS).await.expect("load");
    pause().await;
    bounded.load_file(fixtures::ORDERS).await.expect("load");
    pause().await;
    lovia_host::Host::new(
        lovia_host::HostConfig::default().with_cache_dir(Some(dir.path().to_owned())).with_pool_slots(4),
    )
    .expect("host")
    .load_file(fixtures::DOCS)
    .await
    .expect("a cached load");
    pause().await;
    bounded.load_file(fixtures::DIAGNOSTICS).await.expect("load");
    let kept = artifacts(dir.path());
    assert!(kept.contains_key(docs) && kept.contains_key(diagnostics), "{kept:?}");
    assert!(!kept.contains_key(orders), "the least recently used stays: {kept:?}");
    let leftovers: Vec<String> = std::fs::read_dir(dir.path())
        .expect("ls")
        .flatten()
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .filter(|n| n.starts_with(orders.trim_end_matches(".cwasm")))
        .collect();
    assert!(leftovers.is_empty(), "its seal and description go too: {leftovers:?}");

    // A bound smaller than one artifact keeps just the newest.
    let tiny = host(1);
    tiny.load_file(fixtures::ORDERS).await.expect("load");
    assert_eq!(artifacts(dir.path()).keys().collect::<Vec<_>>(), [orders]);
}
