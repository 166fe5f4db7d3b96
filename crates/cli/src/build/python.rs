//! `lovia build app.py`: a Python tool file → a packed component (docs/python.md).
//!
//! The binary carries the Python SDK and the WIT contract, so a machine with
//! `lovia` and componentize-py needs nothing else. The build itself is the
//! SDK's own `python -m lovia build` (its `build.py`), run from a private
//! temporary copy of the embedded SDK: one implementation of the import
//! check and the componentize-py call, so the two commands cannot drift.
//! Only the last step differs: this binary packs the manifest itself, with
//! the code of `lovia pack`.

use super::{Args, on_path, pack_and_write};
use crate::CliError;
use std::path::{Path, PathBuf};
use std::process::{Command, ExitCode};

/// The componentize-py release the SDK is built and tested with.
pub(crate) const COMPONENTIZE_PY: &str = "componentize-py==0.25.1";

/// Every module of the Python SDK (`sdk/python/lovia/`), embedded. A unit
/// test fails when a module is added there and not here.
const SDK: &[(&str, &str)] = &[
    ("__init__.py", include_str!("../../../../sdk/python/lovia/__init__.py")),
    ("__main__.py", include_str!("../../../../sdk/python/lovia/__main__.py")),
    ("_content.py", include_str!("../../../../sdk/python/lovia/_content.py")),
    ("_context.py", include_str!("../../../../sdk/python/lovia/_context.py")),
    ("_errors.py", include_str!("../../../../sdk/python/lovia/_errors.py")),
    ("_fields.py", include_str!("../../../../sdk/python/lovia/_fields.py")),
    ("_info.py", include_str!("../../../../sdk/python/lovia/_info.py")),
    ("_plugin.py", include_str!("../../../../sdk/python/lovia/_plugin.py")),
    ("_schema.py", include_str!("../../../../sdk/python/lovia/_schema.py")),
    ("_tool.py", include_str!("../../../../sdk/python/lovia/_tool.py")),
    ("build.py", include_str!("../../../../sdk/python/lovia/build.py")),
];

/// The contract the components are built against: the host's copy, which
/// `.ci/run` checks is byte-identical to `wit/lovia.wit`.
const WIT: &str = include_str!("../../../host/wit/lovia.wit");

pub(super) async fn run(args: Args, host: &lovia_host::Host) -> Result<ExitCode, CliError> {
    if let Some(dir) = &args.node_modules {
        return Err(CliError::new(format!(
            "--node-modules {}: it is for TypeScript and JavaScript tool files",
            dir.display()
        )));
    }
    for dir in &args.paths {
        if !dir.is_dir() {
            return Err(CliError::new(format!("--path {}: not a directory", dir.display())));
        }
    }
    let componentize = find_componentize(args.componentize_py.as_deref())?;
    let python = find_python(args.python.as_deref(), &componentize)?;

    let work = super::work_dir()?;
    let sdk = work.path().join("sdk");
    write_sdk(&sdk, &work.path().join("wit"))?;
    let unpacked = work.path().join("component.wasm");

    let absolute = |p: &Path| std::path::absolute(p).map_err(|e| CliError::new(format!("{}: {e}", p.display())));
    let tool_file = absolute(&args.tool_file)?;
    // The SDK's build runs in the private directory, where a relative
    // `--componentize-py target/venv/bin/componentize-py` names nothing.
    let componentize = absolute(&componentize)?;
    // Likewise `--python venv/bin/python`; a bare name stays a PATH lookup.
    let python = if python.components().count() > 1 { absolute(&python)? } else { python };
    let paths = args.paths.iter().map(|p| absolute(p)).collect::<Result<Vec<_>, _>>()?;
    if let Some(failed) = check_confined(&python, &tool_file, &paths, &sdk)? {
        return Ok(failed);
    }
    let mut cmd = Command::new(&python);
    cmd.args(["-m", "lovia", "build"])
        .arg(&tool_file)
        .arg("-o")
        .arg(&unpacked)
        .arg("--wit")
        .arg(work.path().join("wit"))
        .arg("--componentize-py")
        .arg(&componentize)
        .arg("--no-pack")
        .arg("--no-check");
    for dir in &paths {
        cmd.arg("--path").arg(dir);
    }
    // The embedded SDK comes first on the module path, before any installed `lovia`; the working
    // directory (first on the path for `-m`) is the private one, so nothing of the caller's is shadowing it.
    let mut python_path = vec![sdk.clone()];
    python_path.extend(std::env::var_os("PYTHONPATH").iter().flat_map(std::env::split_paths));
    let python_path =
        std::env::join_paths(python_path).map_err(|e| CliError::new(format!("cannot set PYTHONPATH: {e}")))?;
    cmd.current_dir(work.path()).env("PYTHONPATH", python_path).env("PYTHONDONTWRITEBYTECODE", "1");

    eprintln!("building {} with {} (about 20 s)", args.tool_file.display(), componentize.display());
    let done = cmd.output().map_err(|e| CliError::new(format!("cannot run {}: {e}", python.display())))?;
    if !done.status.success() {
        // build.py reports its own errors as `error: ...` lines: a declaration error names the
        // function and the parameter, a componentize-py failure carries componentize-py's output.
        let stderr = String::from_utf8_lossy(&done.stderr);
        eprint!("{stderr}");
        if stderr.trim().is_empty() {
            eprintln!("error: {} -m lovia build failed ({})", python.display(), done.status);
        }
        return Ok(ExitCode::from(1));
    }

    pack_and_write(&args, &unpacked, host).await
}

/// Imports the tool file to check its declarations (`python -m lovia
/// check`), under the kernel confinement of `lovia-confine`: it reads the
/// system directories, the tool file's and `paths`' directories, the SDK
/// copy and the Python installation, writes nowhere but a private
/// temporary directory, and opens no socket, so an author's file that
/// misbehaves at import reaches nothing. A failed check is printed and
/// ends the build (`Some(1)`). Where the kernel cannot confine, the check
/// is skipped with a note: the build then runs the file only inside
/// componentize-py's WebAssembly sandbox, which reports a bad declaration
/// too (later, and with its traceback).
fn check_confined(
    python: &Path,
    tool_file: &Path,
    paths: &[PathBuf],
    sdk: &Path,
) -> Result<Option<ExitCode>, CliError> {
    if let Err(e) = lovia_confine::Confinement::check_supported() {
        eprintln!(
            "note: the declarations are checked by componentize-py only: the kernel cannot confine the quick check ({e})"
        );
        return Ok(None);
    }
    let tmp = lovia_confine::temp_dir("check")
        .map_err(|e| CliError::new(format!("cannot create a temporary directory: {e}")))?;
    let mut confinement = lovia_confine::Confinement::new().private_tmp(tmp.path()).network(false).read_only(sdk);
    for dir in tool_file.parent().into_iter().chain(paths.iter().map(PathBuf::as_path)) {
        confinement = confinement.read_only(dir);
    }
    // The installation Python starts from: a virtual environment's
    // pyvenv.cfg sits beside its bin/, and the interpreter it links to
    // lives in its own prefix.
    for interpreter in [Some(python.to_path_buf()), python.canonicalize().ok()].into_iter().flatten() {
        if let Some(prefix) = interpreter.parent().and_then(Path::parent).filter(|p| p.is_dir()) {
            confinement = confinement.read_only(prefix);
        }
    }
    let mut cmd = Command::new(python);
    cmd.args(["-m", "lovia", "check"]).arg(tool_file);
    for dir in paths {
        cmd.arg("--path").arg(dir);
    }
    cmd.current_dir(tmp.path())
        .env_clear()
        .env("PYTHONPATH", sdk)
        .env("PYTHONDONTWRITEBYTECODE", "1")
        .env("PYTHONNOUSERSITE", "1")
        .env("PATH", "/usr/bin:/bin")
        .env("HOME", tmp.path());
    let prepared = confinement
        .apply_std(&mut cmd)
        .map_err(|e| CliError::new(format!("cannot confine the declaration check: {e}")))?;
    let done = cmd.output().map_err(|e| CliError::new(format!("cannot run {}: {e}", python.display())))?;
    let _ = prepared.kill_all();
    if done.status.success() {
        return Ok(None);
    }
    let stderr = String::from_utf8_lossy(&done.stderr);
    eprint!("{stderr}");
    if stderr.trim().is_empty() {
        eprintln!("error: the declaration check of {} failed ({})", tool_file.display(), done.status);
    }
    Ok(Some(ExitCode::from(1)))
}

fn find_componentize(explicit: Option<&Path>) -> Result<PathBuf, CliError> {
    // In a virtual environment: Debian's (and Ubuntu's) Python refuses a
    // bare `pip install` into the system (PEP 668).
    let install = format!(
        "install it in a virtual environment: python3 -m venv ~/.venvs/lovia && ~/.venvs/lovia/bin/pip install '{COMPONENTIZE_PY}', then pass --componentize-py ~/.venvs/lovia/bin/componentize-py"
    );
    match explicit {
        Some(path) if path.components().count() > 1 => {
            if path.is_file() {
                Ok(path.to_path_buf())
            } else {
                Err(CliError::new(format!("--componentize-py {}: no such file", path.display())).hint(install))
            }
        }
        Some(name) => on_path(name.as_os_str()).ok_or_else(|| {
            CliError::new(format!("--componentize-py {}: not found on PATH", name.display())).hint(install)
        }),
        None => on_path("componentize-py".as_ref()).ok_or_else(|| {
            CliError::new(
                "componentize-py is not installed (not on PATH); lovia build needs it to turn Python into a component",
            )
            .hint(install)
        }),
    }
}

/// The Python that checks the declarations: `--python`, else the interpreter
/// pip wrote into componentize-py's `#!` line (so the SDK runs where
/// componentize-py was installed, virtual environments included), else
/// `python3` on PATH. A standalone componentize-py binary has no `#!` line.
fn find_python(explicit: Option<&Path>, componentize: &Path) -> Result<PathBuf, CliError> {
    if let Some(python) = explicit {
        return Ok(python.to_path_buf());
    }
    if let Some(python) = shebang_interpreter(componentize) {
        return Ok(python);
    }
    on_path("python3".as_ref()).ok_or_else(|| {
        CliError::new("no Python found: lovia build imports the tool file with Python 3.10 or later before building it")
            .hint("install python3, or pass --python PATH")
    })
}

/// `/venv/bin/python3` of a `#!/venv/bin/python3` first line, when that file exists.
fn shebang_interpreter(script: &Path) -> Option<PathBuf> {
    use std::io::Read;
    let mut head = [0u8; 512];
    let n = std::fs::File::open(script).and_then(|mut f| f.read(&mut head)).ok()?;
    let first = head[..n].split(|&b| b == b'\n').next()?;
    let line = std::str::from_utf8(first.strip_prefix(b"#!")?).ok()?.trim();
    // `#!/usr/bin/env python3` names no path; pip writes the interpreter's absolute path.
    let interpreter = PathBuf::from(line.split_whitespace().next()?);
    let named_python = interpreter.file_name()?.to_str()?.starts_with("python");
    (named_python && interpreter.is_absolute() && interpreter.is_file()).then_some(interpreter)
}

fn write_sdk(sdk: &Path, wit: &Path) -> Result<(), CliError> {
    let write = |path: &Path, text: &str| {
        std::fs::write(path, text).map_err(|e| CliError::new(format!("cannot write {}: {e}", path.display())))
    };
    let package = sdk.join("lovia");
    for dir in [&package, wit] {
        std::fs::create_dir_all(dir).map_err(|e| CliError::new(format!("cannot create {}: {e}", dir.display())))?;
    }
    for (name, text) in SDK {
        write(&package.join(name), text)?;
    }
    write(&wit.join("lovia.wit"), WIT)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_sdk_module_is_embedded_as_it_is_in_the_repository() {
        let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../sdk/python/lovia");
        let mut on_disk: Vec<String> = std::fs::read_dir(&dir)
            .expect("sdk/python/lovia")
            .filter_map(|e| e.ok().map(|e| e.file_name().to_string_lossy().into_owned()))
            .filter(|name| name.ends_with(".py"))
            .collect();
        on_disk.sort();
        let embedded: Vec<String> = SDK.iter().map(|(name, _)| (*name).to_owned()).collect();
        assert_eq!(embedded, on_disk, "crates/cli/src/build/python.rs must embed every module of sdk/python/lovia");
        for (name, text) in SDK {
            assert_eq!(std::fs::read_to_string(dir.join(name)).expect("read").as_str(), *text, "{name}");
        }
        let wit = std::fs::read_to_string(Path::new(env!("CARGO_MANIFEST_DIR")).join("../../wit/lovia.wit"));
        assert_eq!(wit.expect("wit/lovia.wit"), WIT);
    }

    #[test]
    fn the_interpreter_comes_from_the_shebang_pip_writes() {
        let dir = tempfile::tempdir().expect("tempdir");
        let python = dir.path().join("python3");
        std::fs::write(&python, "").expect("write");
        let script = dir.path().join("componentize-py");
        std::fs::write(&script, format!("#!{}\nimport sys\n", python.display())).expect("write");
        assert_eq!(shebang_interpreter(&script), Some(python));
        std::fs::write(&script, "#!/usr/bin/env python3\n").expect("write");
        assert_eq!(shebang_interpreter(&script), None, "env names no interpreter path");
        std::fs::write(&script, [0x7f, b'E', b'L', b'F', 0, 1]).expect("write");
        assert_eq!(shebang_interpreter(&script), None, "a standalone binary");
    }
}
