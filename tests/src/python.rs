//! The Python guest fixture: `tests/python/tools.py` (which imports the
//! Python examples of `example-tools/python`) built into a component
//! with `python -m lovia build` (componentize-py), once per change of its
//! inputs. The component is ~19 MiB and takes about a minute to build, so it
//! is cached under `target/python/` by a hash of every input (the SDK, the
//! fixture files, the WIT and the componentize-py version) rather than built
//! on every run.
//!
//! The interpreter is `$LOVIA_PYTHON`, else `target/py-venv/bin/python`,
//! where `scripts/test` installs componentize-py.

use crate::parts::{self, Part};
use lovia_host::{Host, HostConfig, Plugin};
use std::hash::{DefaultHasher, Hasher};
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::OnceLock;

fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).parent().expect("the repository root").to_path_buf()
}

/// The Python that builds the fixture, when it has componentize-py.
fn python() -> Result<PathBuf, String> {
    let python =
        std::env::var_os("LOVIA_PYTHON").map(PathBuf::from).unwrap_or_else(|| root().join("target/py-venv/bin/python"));
    let probe = Command::new(&python).args(["-c", "import componentize_py"]).output();
    match probe {
        Ok(out) if out.status.success() => Ok(python),
        _ => Err(format!("componentize-py is not importable by {}", python.display())),
    }
}

/// The componentize-py executable of the fixture's Python environment, for
/// the tests of `lovia build`.
pub fn componentize_py() -> Result<PathBuf, String> {
    let python = python()?;
    match python.parent().map(|dir| dir.join("componentize-py")) {
        Some(exe) if exe.is_file() => Ok(exe),
        _ => Err(format!("no componentize-py beside {}", python.display())),
    }
}

/// A component built by `build` into `target/python/{name}-{hash}.wasm`,
/// where the hash covers `extra` inputs besides the SDK, the WIT and the
/// componentize-py version; an earlier build with the same inputs is reused
/// (a build takes tens of seconds). `build` writes the file it is given.
pub fn cached(name: &str, extra: &[PathBuf], build: impl FnOnce(&Path)) -> Result<PathBuf, String> {
    let root = root();
    let python = python()?;
    let dir = root.join("target/python");
    std::fs::create_dir_all(&dir).map_err(|e| format!("{}: {e}", dir.display()))?;
    let mut h = DefaultHasher::new();
    h.write_u64(input_hash(&root, &python));
    for file in extra {
        h.write(&std::fs::read(file).unwrap_or_else(|e| panic!("{}: {e}", file.display())));
    }
    let out = dir.join(format!("{name}-{:016x}.wasm", h.finish()));
    if !out.exists() {
        let tmp = dir.join(format!("{name}-{}.building.wasm", std::process::id()));
        build(&tmp);
        std::fs::rename(&tmp, &out).map_err(|e| format!("{}: {e}", out.display()))?;
        for entry in std::fs::read_dir(&dir).into_iter().flatten().flatten() {
            let file = entry.file_name().to_string_lossy().into_owned();
            if entry.path() != out && file.starts_with(&format!("{name}-")) && !file.contains(".building.") {
                let _ = std::fs::remove_file(entry.path());
            }
        }
    }
    Ok(out)
}

/// Every file whose change must rebuild the component, in a stable order.
fn inputs(root: &Path) -> Vec<PathBuf> {
    let mut files = vec![root.join("wit/lovia.wit")];
    for dir in ["sdk/python/lovia", "tests/python", "example-tools/python"] {
        let mut here: Vec<PathBuf> = std::fs::read_dir(root.join(dir))
            .unwrap_or_else(|e| panic!("{dir}: {e}"))
            .filter_map(|e| e.ok().map(|e| e.path()))
            .filter(|p| p.extension().is_some_and(|x| x == "py"))
            .collect();
        here.sort();
        files.extend(here);
    }
    files
}

fn input_hash(root: &Path, python: &Path) -> u64 {
    let mut h = DefaultHasher::new();
    for file in inputs(root) {
        h.write(file.strip_prefix(root).unwrap_or(&file).to_string_lossy().as_bytes());
        h.write(&std::fs::read(&file).unwrap_or_else(|e| panic!("{}: {e}", file.display())));
    }
    let version = Command::new(python).args(["-m", "pip", "show", "componentize-py"]).output();
    if let Ok(out) = version {
        h.write(&out.stdout);
    }
    h.finish()
}

/// The path of the built Python fixture component, or why it cannot be
/// built here (the caller fails with it, through `parts::require`). Builds at most once per
/// test binary; a cached build is reused when no input changed.
/// `lovia` is the CLI binary that packs the manifest (the build command's last step).
pub fn component(lovia: &str) -> Result<&'static Path, String> {
    static BUILT: OnceLock<Result<PathBuf, String>> = OnceLock::new();
    BUILT.get_or_init(|| build(lovia)).as_ref().map(PathBuf::as_path).map_err(Clone::clone)
}

fn build(lovia: &str) -> Result<PathBuf, String> {
    let root = root();
    let python = python()?;
    let dir = root.join("target/python");
    std::fs::create_dir_all(&dir).map_err(|e| format!("{}: {e}", dir.display()))?;
    let out = dir.join(format!("pytools-{:016x}.wasm", input_hash(&root, &python)));
    if out.exists() {
        return Ok(out);
    }
    // A per-process name, renamed into place: two test processes building at once never read half a file.
    let tmp = dir.join(format!("pytools-{}.building.wasm", std::process::id()));
    let done = Command::new(&python)
        .args(["-m", "lovia", "build", "--lovia", lovia, "--path"])
        .arg(root.join("example-tools/python"))
        .arg(root.join("tests/python/tools.py"))
        .arg("-o")
        .arg(&tmp)
        .env("PYTHONPATH", root.join("sdk/python"))
        // `lovia pack` compiles the unpacked bytes once; that artifact is never loaded again, so it stays out of ~/.cache.
        .env("LOVIA_CACHE_DIR", dir.join("pack-cache"))
        .output()
        .map_err(|e| format!("running {}: {e}", python.display()))?;
    // A failed build is a failed test, not a skip: the tool is installed, so the SDK or the fixture is wrong.
    assert!(
        done.status.success(),
        "python -m lovia build failed:\n{}{}",
        String::from_utf8_lossy(&done.stdout),
        String::from_utf8_lossy(&done.stderr)
    );
    std::fs::rename(&tmp, &out).map_err(|e| format!("{}: {e}", out.display()))?;
    // Only the current build is ever loaded again: older ones (19 MiB each) and the pack step's artifacts go.
    let _ = std::fs::remove_dir_all(dir.join("pack-cache"));
    for entry in std::fs::read_dir(&dir).into_iter().flatten().flatten() {
        let path = entry.path();
        let name = entry.file_name().to_string_lossy().into_owned();
        if path != out && name.starts_with("pytools-") && name.ends_with(".wasm") && !name.contains(".building.") {
            let _ = std::fs::remove_file(path);
        }
    }
    Ok(out)
}

/// The fixture loaded once per test binary; `None` when the `python` part
/// is opted out (`LOVIA_SKIP`), a failed test when it cannot be built here.
/// Compiling the interpreter takes tens of seconds,
/// so this host keeps compiled artifacts in `target/python/cache` (the
/// shared test host keeps none): a second test run loads it in milliseconds.
pub async fn plugin(lovia: &'static str) -> Option<Plugin> {
    parts::require(Part::Python, || Ok(()))?;
    static PLUGIN: tokio::sync::OnceCell<Result<Plugin, String>> = tokio::sync::OnceCell::const_new();
    let loaded = PLUGIN
        .get_or_init(|| async {
            let path = tokio::task::spawn_blocking(move || component(lovia)).await.expect("the build thread")?;
            let config = HostConfig::default().with_cache_dir(Some(root().join("target/python/cache")));
            let host = Host::new(config).map_err(|e| format!("the Python test host: {e}"))?;
            let plugin = host.load_file(path).await;
            Ok(plugin.unwrap_or_else(|e| panic!("loading {}: {e}", path.display())))
        })
        .await;
    Some(loaded.clone().unwrap_or_else(|why| parts::missing(Part::Python, &why)))
}
