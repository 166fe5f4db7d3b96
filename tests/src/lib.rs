//! The test harness: guest fixtures (built once by `build.rs`), a shared
//! host, and packed copies of the plugins.

use lovia_host::plugin::manifest;
use lovia_host::{Host, HostConfig, Plugin};
use std::path::{Path, PathBuf};
use std::sync::OnceLock;

/// Paths of the guest fixtures.
pub mod fixtures {
    include!(concat!(env!("OUT_DIR"), "/fixtures.rs"));
}

/// One host for the whole test binary: each host reserves address space
/// for its instance pool, so tests share it instead of making their own.
pub fn host() -> Host {
    static HOST: OnceLock<Host> = OnceLock::new();
    HOST.get_or_init(|| Host::new(HostConfig::default()).expect("the test host starts")).clone()
}

/// Loads a fixture with the shared host.
pub async fn load(path: &str) -> Plugin {
    host().load_file(path).await.unwrap_or_else(|e| panic!("loading {path}: {e}"))
}

/// A copy of the fixture with its manifest embedded (what `lovia pack` writes),
/// made once per test binary in a temporary directory.
pub async fn packed(path: &str) -> PathBuf {
    static DIR: OnceLock<PathBuf> = OnceLock::new();
    let dir = DIR.get_or_init(|| {
        let dir = std::env::temp_dir().join(format!("lovia-tests-{}", std::process::id()));
        std::fs::create_dir_all(&dir).expect("temp dir");
        dir
    });
    let name = Path::new(path).file_name().expect("file name");
    let out = dir.join(name);
    if !out.exists() {
        let bytes = std::fs::read(path).expect("fixture bytes");
        let plugin = load(path).await;
        let packed = manifest::embed(&bytes, &plugin.manifest()).expect("embed");
        let tmp = out.with_extension("tmp");
        std::fs::write(&tmp, packed).expect("write packed");
        std::fs::rename(&tmp, &out).expect("rename packed");
    }
    out
}
