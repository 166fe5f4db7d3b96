//! The `component` fuzz target's body, the host side of the component
//! boundary: arbitrary bytes given to the loader (header checks, static
//! manifest reading, compilation, linking, `info()`/`tools()`, spec checks)
//! must give a plugin or a typed error, never a panic; embedding a manifest
//! must round-trip.
//!
//! Shared by the cargo-fuzz target (fuzz_targets/component.rs) and the fuzz
//! smoke in the test build (tests/all/fuzz.rs).

use lovia_host::plugin::manifest;
use lovia_host::{Host, HostConfig};
use std::sync::OnceLock;

fn host() -> &'static (Host, tokio::runtime::Runtime) {
    static H: OnceLock<(Host, tokio::runtime::Runtime)> = OnceLock::new();
    H.get_or_init(|| {
        let rt = tokio::runtime::Builder::new_current_thread().enable_time().build().expect("runtime");
        let host = Host::new(HostConfig::default().with_pool_slots(4)).expect("host");
        (host, rt)
    })
}

/// One input: a plugin or a typed error, never a panic.
pub(crate) fn run(data: &[u8]) {
    let (host, rt) = host();
    let _ = manifest::read_static(data);
    if let Ok(plugin) = rt.block_on(host.load_bytes(data, "fuzz.wasm")) {
        let packed = manifest::embed(data, &plugin.manifest()).expect("a loadable component can be packed");
        let view = manifest::read_static(&packed).expect("packed bytes parse");
        assert_eq!(view.manifest.and_then(Result::ok), Some(plugin.manifest()));
    }
}
