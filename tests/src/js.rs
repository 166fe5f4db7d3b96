//! The TypeScript guest fixture: `tests/js/tools.ts` (which imports the
//! TypeScript examples of `example-tools/js`) built into a component with
//! `lovia build` (esbuild and componentize-qjs from `sdk/js/node_modules`,
//! which `scripts/test` installs from the lockfile), once per change of its
//! inputs: cached under `target/js/` by a hash of every input (the SDK, the
//! fixture and example files, the WIT and the lockfile).

use crate::parts::{self, Part};
use lovia_host::{Host, HostConfig, Plugin};
use std::hash::{DefaultHasher, Hasher};
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::OnceLock;

fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).parent().expect("the repository root").to_path_buf()
}

/// The toolchain's node_modules, when it has what `lovia build` needs.
pub fn node_modules() -> Result<PathBuf, String> {
    let dir = root().join("sdk/js/node_modules");
    for tool in ["esbuild", "componentize-qjs"] {
        if !dir.join(".bin").join(tool).is_file() {
            return Err(format!("no {tool} in {}", dir.display()));
        }
    }
    if Command::new("node").arg("--version").output().is_err() {
        return Err("no node on PATH".into());
    }
    Ok(dir)
}

/// Every file whose change must rebuild the component, in a stable order.
fn inputs(root: &Path) -> Vec<PathBuf> {
    let mut files = vec![root.join("wit/lovia.wit"), root.join("sdk/js/package-lock.json")];
    for dir in ["sdk/js", "tests/js", "example-tools/js"] {
        let mut here: Vec<PathBuf> = std::fs::read_dir(root.join(dir))
            .unwrap_or_else(|e| panic!("{dir}: {e}"))
            .filter_map(|e| e.ok().map(|e| e.path()))
            .filter(|p| p.extension().is_some_and(|x| x == "js" || x == "ts"))
            .collect();
        here.sort();
        files.extend(here);
    }
    files
}

fn input_hash(root: &Path) -> u64 {
    let mut h = DefaultHasher::new();
    for file in inputs(root) {
        h.write(file.strip_prefix(root).unwrap_or(&file).to_string_lossy().as_bytes());
        h.write(&std::fs::read(&file).unwrap_or_else(|e| panic!("{}: {e}", file.display())));
    }
    h.finish()
}

/// `lovia build` of `tool_file` into `out`: the output, whether it succeeded or not.
pub fn build(lovia: &str, tool_file: &Path, out: &Path) -> Result<std::process::Output, String> {
    let node_modules = node_modules()?;
    let cache = out.with_extension("pack-cache");
    let done = Command::new(lovia)
        .arg("build")
        .arg(tool_file)
        .arg("--node-modules")
        .arg(&node_modules)
        .arg("-o")
        .arg(out)
        // `lovia pack` compiles the unpacked bytes once; that artifact is never loaded again.
        .env("LOVIA_CACHE_DIR", &cache)
        .output()
        .map_err(|e| format!("running {lovia}: {e}"))?;
    let _ = std::fs::remove_dir_all(&cache);
    Ok(done)
}

/// The path of the built fixture component, or why it cannot be built here
/// (the caller fails with it, through `parts::require`). Builds at most
/// once per test binary; a cached build is reused when no input changed.
pub fn component(lovia: &str) -> Result<&'static Path, String> {
    static BUILT: OnceLock<Result<PathBuf, String>> = OnceLock::new();
    BUILT.get_or_init(|| build_fixture(lovia)).as_ref().map(PathBuf::as_path).map_err(Clone::clone)
}

fn build_fixture(lovia: &str) -> Result<PathBuf, String> {
    let root = root();
    let dir = root.join("target/js");
    std::fs::create_dir_all(&dir).map_err(|e| format!("{}: {e}", dir.display()))?;
    let out = dir.join(format!("tstools-{:016x}.wasm", input_hash(&root)));
    if out.exists() {
        return Ok(out);
    }
    // A per-process name, renamed into place: two test processes building at once never read half a file.
    let tmp = dir.join(format!("tstools-{}.building.wasm", std::process::id()));
    let done = build(lovia, &root.join("tests/js/tools.ts"), &tmp)?;
    // A failed build is a failed test, not a skip: the toolchain is installed, so the SDK or the fixture is wrong.
    assert!(
        done.status.success(),
        "lovia build tests/js/tools.ts failed:\n{}{}",
        String::from_utf8_lossy(&done.stdout),
        String::from_utf8_lossy(&done.stderr)
    );
    std::fs::rename(&tmp, &out).map_err(|e| format!("{}: {e}", out.display()))?;
    for entry in std::fs::read_dir(&dir).into_iter().flatten().flatten() {
        let name = entry.file_name().to_string_lossy().into_owned();
        if entry.path() != out && name.starts_with("tstools-") && !name.contains(".building.") {
            let _ = std::fs::remove_file(entry.path());
        }
    }
    Ok(out)
}

/// The fixture loaded once per test binary; `None` when the `ts` part is
/// opted out (`LOVIA_SKIP`), a failed test when it cannot be built here.
pub async fn plugin(lovia: &'static str) -> Option<Plugin> {
    parts::require(Part::Ts, || Ok(()))?;
    static PLUGIN: tokio::sync::OnceCell<Result<Plugin, String>> = tokio::sync::OnceCell::const_new();
    let loaded = PLUGIN
        .get_or_init(|| async {
            let path = tokio::task::spawn_blocking(move || component(lovia)).await.expect("the build thread")?;
            let host = Host::new(HostConfig::default()).map_err(|e| format!("the TypeScript test host: {e}"))?;
            let plugin = host.load_file(path).await;
            Ok(plugin.unwrap_or_else(|e| panic!("loading {}: {e}", path.display())))
        })
        .await;
    Some(loaded.clone().unwrap_or_else(|why| parts::missing(Part::Ts, &why)))
}
