//! `lovia build`: a tool file → a packed component, chosen by the file's
//! type: Python (`.py`, [`python`]: componentize-py) or TypeScript and
//! JavaScript (`.ts`, `.mts`, `.js`, `.mjs`, [`js`]: esbuild and
//! componentize-qjs). The binary carries each SDK and the WIT contract; the
//! last step, packing the manifest, is shared and uses the code of `lovia pack`.

mod js;
mod python;

pub(crate) use js::{SDK_TYPES, TOOLCHAIN, ZOD_VERSION};
pub(crate) use python::COMPONENTIZE_PY;

use crate::CliError;
use lovia_host::Host;
use std::path::{Path, PathBuf};
use std::process::ExitCode;

#[derive(clap::Args)]
#[command(after_help = "\
Python (.py) needs componentize-py, the compiler from Python to a component (pip install 'componentize-py==0.25.1'), \
and the Python it is installed in.
TypeScript and JavaScript (.ts, .mts, .js, .mjs) need Node.js 20 or later and, in the project's node_modules, \
esbuild and componentize-qjs (npm install --save-dev esbuild@0.28.2 componentize-qjs@0.4.5).
Nothing else: this binary carries both SDKs and the WIT contract.

Exit status: 0 when the component was written, 1 when the tool file cannot be built (a declaration \
error names the tool), 2 for usage errors and a missing compiler.

Examples:
  lovia new --lang python weather && lovia build weather/app.py -o weather.wasm
  lovia new --lang ts weather && (cd weather && npm install) && lovia build weather/app.ts -o weather.wasm
  lovia call weather.wasm hello '{\"name\": \"Ada\"}'")]
pub(crate) struct Args {
    /// The tool file: Python with @tool functions (app.py), or TypeScript or
    /// JavaScript with tool() declarations (app.ts). A Python file's
    /// directory is bundled into the component; a TypeScript file is bundled
    /// with what it imports.
    tool_file: PathBuf,
    /// The component to write [default: the tool file's name, with .wasm].
    #[arg(short, long, value_name = "OUT")]
    output: Option<PathBuf>,
    /// Python: another directory of pure-Python modules to bundle (repeatable).
    #[arg(short = 'p', long = "path", value_name = "DIR")]
    paths: Vec<PathBuf>,
    /// Python: the componentize-py executable [default: `componentize-py` on PATH].
    #[arg(long, value_name = "PATH")]
    componentize_py: Option<PathBuf>,
    /// Python: the Python (3.10 or later) that imports the tool file to check
    /// its declarations before the slow build [default: the interpreter named
    /// on componentize-py's `#!` line, which is the one pip installed it
    /// into, else `python3` on PATH].
    #[arg(long, value_name = "PATH")]
    python: Option<PathBuf>,
    /// TypeScript and JavaScript: the node_modules directory with esbuild and
    /// componentize-qjs, where the tool's own imports (zod) are also looked
    /// up [default: the nearest node_modules above the tool file that has both].
    #[arg(long, value_name = "DIR")]
    node_modules: Option<PathBuf>,
    /// Do not embed the manifest (`lovia inspect` then loads the plugin in a
    /// sandbox to read its tools).
    #[arg(long)]
    no_pack: bool,
}

/// The languages `lovia build` takes, by file extension.
const PYTHON: &[&str] = &["py"];
const JS: &[&str] = &["ts", "mts", "js", "mjs"];

/// `host`: the one that packs the built component and keeps its compiled
/// form in the cache for the first load of the result.
pub(crate) async fn run(args: Args, host: Host) -> Result<ExitCode, CliError> {
    let path = &args.tool_file;
    let rust = "a Rust tool builds with `cargo build --release --target wasm32-wasip2`, then `lovia pack`";
    if path.is_dir() {
        return Err(CliError::new(format!("{} is a directory; lovia build takes a tool file", path.display()))
            .hint(format!("pass the .py or .ts file with the tools (for example {}/app.py); {rust}", path.display())));
    }
    let extension = path.extension().and_then(|e| e.to_str()).unwrap_or("");
    let python = PYTHON.contains(&extension);
    if !python && !JS.contains(&extension) {
        return Err(CliError::new(format!(
            "{}: lovia build takes a Python (.py), TypeScript (.ts, .mts) or JavaScript (.js, .mjs) tool file",
            path.display()
        ))
        .hint(rust));
    }
    if !path.is_file() {
        return Err(CliError::new(format!("{}: no such file", path.display())));
    }
    if python { python::run(args, &host).await } else { js::run(args, &host).await }
}

/// The last step of every build: packs the manifest into the component at
/// `unpacked` (unless `--no-pack`) and writes it to the output, printing what it holds.
async fn pack_and_write(args: &Args, unpacked: &Path, host: &Host) -> Result<ExitCode, CliError> {
    let output = args.output.clone().unwrap_or_else(|| args.tool_file.with_extension("wasm"));
    let bytes = std::fs::read(unpacked)
        .map_err(|e| CliError::new(format!("the build wrote no component ({}): {e}", unpacked.display())))?;
    let (bytes, summary) = if args.no_pack {
        (bytes, "not packed".to_owned())
    } else {
        // The unpacked component is compiled once, to run `info` and `tools`;
        // its compiled form is kept for the packed one (the same code), so
        // the first `lovia call` of the result compiles nothing.
        let (packed, manifest) =
            crate::pack::pack_bytes(host, &bytes, &args.tool_file.display().to_string(), false).await?;
        let names: Vec<&str> = manifest.tools.iter().map(|t| t.name.as_str()).collect();
        (
            packed,
            format!("{} {}, {} tool(s): {}", manifest.info.name, manifest.info.version, names.len(), names.join(", ")),
        )
    };
    write_atomically(&output, &bytes)?;
    println!("{}: {summary}", output.display());
    Ok(ExitCode::SUCCESS)
}

/// A private (0700) directory removed on every exit path, for a build's
/// SDK copy, intermediate files and unpacked component.
fn work_dir() -> Result<tempfile::TempDir, CliError> {
    tempfile::Builder::new()
        .prefix("lovia-build-")
        .tempdir()
        .map_err(|e| CliError::new(format!("cannot create a temporary directory: {e}")))
}

/// Writes `files` (relative path, text) under `dir`.
fn write_files(dir: &Path, files: &[(&str, &str)]) -> Result<(), CliError> {
    for (name, text) in files {
        let path = dir.join(name);
        if let Some(parent) = path.parent() {
            std::fs::create_dir_all(parent)
                .map_err(|e| CliError::new(format!("cannot create {}: {e}", parent.display())))?;
        }
        std::fs::write(&path, text).map_err(|e| CliError::new(format!("cannot write {}: {e}", path.display())))?;
    }
    Ok(())
}

/// `name` in a directory of `PATH`, as a shell would find it.
fn on_path(name: &std::ffi::OsStr) -> Option<PathBuf> {
    let path = std::env::var_os("PATH")?;
    std::env::split_paths(&path).map(|dir| dir.join(name)).find(|candidate| is_executable(candidate))
}

fn is_executable(path: &Path) -> bool {
    use std::os::unix::fs::PermissionsExt;
    std::fs::metadata(path).is_ok_and(|m| m.is_file() && m.permissions().mode() & 0o111 != 0)
}

/// Writes `OUT.partial`, then renames it: `OUT` exists only once the whole build succeeded.
fn write_atomically(output: &Path, bytes: &[u8]) -> Result<(), CliError> {
    if let Some(dir) = output.parent().filter(|d| !d.as_os_str().is_empty()) {
        std::fs::create_dir_all(dir).map_err(|e| CliError::new(format!("cannot create {}: {e}", dir.display())))?;
    }
    let mut partial = output.as_os_str().to_owned();
    partial.push(".partial");
    let partial = PathBuf::from(partial);
    std::fs::write(&partial, bytes).map_err(|e| CliError::new(format!("cannot write {}: {e}", partial.display())))?;
    std::fs::rename(&partial, output).map_err(|e| {
        let _ = std::fs::remove_file(&partial);
        CliError::new(format!("cannot write {}: {e}", output.display()))
    })
}
