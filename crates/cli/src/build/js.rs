//! `lovia build app.ts`: a TypeScript or JavaScript tool file → a packed
//! component (docs/typescript.md).
//!
//! 1. esbuild bundles the tool file, what it imports (zod) and this binary's
//!    copy of the SDK (`sdk/js/`) into one ES module, types stripped and
//!    nothing type-checked, with the SDK's `plugin.js` as the entry that
//!    exports the contract;
//! 2. componentize-qjs evaluates that module in QuickJS and snapshots it
//!    into a component of world `async-tool-plugin` (contract 0.2.0's
//!    `async-plugin` export), so a bad declaration stops the build here;
//! 3. the manifest is packed, as for every build.
//!
//! Neither step runs the author's code outside a sandbox: esbuild only
//! reads it, and componentize-qjs evaluates it inside WebAssembly (Wizer).

use super::{Args, on_path, pack_and_write, write_files};
use crate::CliError;
use std::path::{Path, PathBuf};
use std::process::{Command, ExitCode};

/// The esbuild and componentize-qjs releases the SDK is built and tested with.
pub(crate) const TOOLCHAIN: &str = "esbuild@0.28.2 componentize-qjs@0.4.5";

/// The zod release the SDK is tested with (what `lovia new --lang ts` pins).
pub(crate) const ZOD_VERSION: &str = "4.6.7";

/// The SDK's type declarations, which `lovia new --lang ts` writes for editors.
pub(crate) const SDK_TYPES: &str = include_str!("../../../../sdk/js/index.d.ts");

/// Every module of the JavaScript SDK (`sdk/js/`), embedded. A unit test
/// fails when a module is added there and not here.
pub(crate) const SDK: &[(&str, &str)] = &[
    ("content.js", include_str!("../../../../sdk/js/content.js")),
    ("context.js", include_str!("../../../../sdk/js/context.js")),
    ("errors.js", include_str!("../../../../sdk/js/errors.js")),
    ("grammar.js", include_str!("../../../../sdk/js/grammar.js")),
    ("index.d.ts", include_str!("../../../../sdk/js/index.d.ts")),
    ("index.js", include_str!("../../../../sdk/js/index.js")),
    ("info.js", include_str!("../../../../sdk/js/info.js")),
    ("plugin.js", include_str!("../../../../sdk/js/plugin.js")),
    ("schema.js", include_str!("../../../../sdk/js/schema.js")),
    ("tool.js", include_str!("../../../../sdk/js/tool.js")),
    ("utf8.js", include_str!("../../../../sdk/js/utf8.js")),
];

/// The package.json that makes the embedded copy the module `lovia`.
const SDK_PACKAGE: &str = r#"{"name": "lovia", "type": "module", "main": "index.js", "types": "index.d.ts"}"#;

/// The contract the components are built against (the host's copy, byte-identical to `wit/lovia.wit`).
const WIT: &str = include_str!("../../../host/wit/lovia.wit");

/// The world a JavaScript plugin is built as.
const WORLD: &str = "async-tool-plugin";

pub(super) async fn run(args: Args, host: &lovia_host::Host) -> Result<ExitCode, CliError> {
    for (flag, set) in [
        ("--path", !args.paths.is_empty()),
        ("--componentize-py", args.componentize_py.is_some()),
        ("--python", args.python.is_some()),
    ] {
        if set {
            return Err(CliError::new(format!(
                "{flag} is for Python tool files; this is a TypeScript or JavaScript one"
            )));
        }
    }
    let absolute = |p: &Path| std::path::absolute(p).map_err(|e| CliError::new(format!("{}: {e}", p.display())));
    let tool_file = absolute(&args.tool_file)?;
    let node_modules = find_node_modules(args.node_modules.as_deref(), &tool_file)?;
    if on_path("node".as_ref()).is_none() {
        return Err(CliError::new("node is not on PATH; componentize-qjs runs on Node.js 20 or later")
            .hint("install Node.js (as root: apt-get install nodejs)"));
    }

    let work = super::work_dir()?;
    let sdk = work.path().join("lovia");
    let mut files: Vec<(&str, &str)> = SDK.to_vec();
    files.push(("package.json", SDK_PACKAGE));
    write_files(&sdk, &files)?;
    let wit = work.path().join("lovia.wit");
    write_files(work.path(), &[("lovia.wit", WIT)])?;
    // The entry: the tool file first (its tool() calls fill the registry), then the contract's export.
    let quoted = serde_json::to_string(&tool_file.display().to_string())
        .map_err(|e| CliError::new(format!("{}: {e}", tool_file.display())))?;
    let entry = format!("import {quoted};\nexport {{ asyncPlugin }} from \"lovia/plugin.js\";\n");
    write_files(work.path(), &[("entry.mjs", &entry)])?;
    let bundle = work.path().join("bundle.mjs");
    let unpacked = work.path().join("component.wasm");

    eprintln!("building {} with esbuild and componentize-qjs (a few seconds)", args.tool_file.display());
    let mut esbuild = Command::new(node_modules.join(".bin/esbuild"));
    esbuild
        .arg(work.path().join("entry.mjs"))
        .args(["--bundle", "--format=esm", "--platform=neutral", "--target=es2023", "--main-fields=module,main"])
        // Whitespace and syntax only: identifiers keep their names, so a
        // ToolError subclass's name is still the error's kind.
        .args(["--minify-whitespace", "--minify-syntax", "--log-level=warning", "--external:lovia:tools/*"])
        .arg(format!("--alias:lovia={}", sdk.display()))
        .arg(format!("--define:__LOVIA_PLUGIN_NAME__={}", plugin_name_literal(&args.tool_file)))
        .arg(format!("--outfile={}", bundle.display()))
        // A tool file outside the project (a shared examples directory)
        // still finds its packages in the toolchain's node_modules.
        .env("NODE_PATH", &node_modules);
    if let Some(failed) = step(esbuild, "esbuild")? {
        return Ok(failed);
    }
    let mut componentize = Command::new(node_modules.join(".bin/componentize-qjs"));
    componentize.arg("--wit").arg(&wit).args(["--world", WORLD, "--js"]).arg(&bundle).arg("-o").arg(&unpacked);
    if let Some(failed) = step(componentize, "componentize-qjs")? {
        return Ok(failed);
    }
    pack_and_write(&args, &unpacked, host).await
}

/// Runs one step of the build; prints its output and returns exit status 1 when it failed.
fn step(mut cmd: Command, name: &str) -> Result<Option<ExitCode>, CliError> {
    let done = cmd.output().map_err(|e| CliError::new(format!("cannot run {name}: {e}")))?;
    if done.status.success() {
        return Ok(None);
    }
    let stderr = String::from_utf8_lossy(&done.stderr);
    let stdout = String::from_utf8_lossy(&done.stdout);
    eprint!("{stdout}{stderr}");
    eprintln!("error: {name} failed ({}); nothing was written", done.status);
    Ok(Some(ExitCode::from(1)))
}

/// The default plugin name, as a JavaScript string literal: the tool file's
/// name, with characters outside the name grammar replaced by `-` (as for Python).
fn plugin_name_literal(tool_file: &Path) -> String {
    let stem = tool_file.file_stem().map(|s| s.to_string_lossy().into_owned()).unwrap_or_default();
    let name: String = stem
        .chars()
        .map(|c| if c.is_ascii_alphanumeric() || c == '_' || c == '-' { c } else { '-' })
        .take(64)
        .collect();
    let name = if name.is_empty() { "tools".to_owned() } else { name };
    format!("\"{name}\"")
}

/// `--node-modules`, else the nearest `node_modules` above the tool file
/// with both esbuild and componentize-qjs in its `.bin`.
fn find_node_modules(explicit: Option<&Path>, tool_file: &Path) -> Result<PathBuf, CliError> {
    let has_tools = |dir: &Path| ["esbuild", "componentize-qjs"].iter().all(|t| dir.join(".bin").join(t).is_file());
    let install = format!("in the project: npm install --save-dev {TOOLCHAIN} (or pass --node-modules DIR)");
    if let Some(dir) = explicit {
        if has_tools(dir) {
            return std::path::absolute(dir).map_err(|e| CliError::new(format!("{}: {e}", dir.display())));
        }
        return Err(CliError::new(format!(
            "--node-modules {}: no .bin/esbuild and .bin/componentize-qjs there",
            dir.display()
        ))
        .hint(install));
    }
    for dir in tool_file.ancestors().skip(1) {
        let candidate = dir.join("node_modules");
        if has_tools(&candidate) {
            return Ok(candidate);
        }
    }
    Err(CliError::new(format!(
        "esbuild and componentize-qjs are not installed in a node_modules above {}; lovia build needs them to turn TypeScript into a component",
        tool_file.display()
    ))
    .hint(install))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_sdk_module_is_embedded_as_it_is_in_the_repository() {
        let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../sdk/js");
        let mut on_disk: Vec<String> = std::fs::read_dir(&dir)
            .expect("sdk/js")
            .filter_map(|e| e.ok().map(|e| e.file_name().to_string_lossy().into_owned()))
            .filter(|name| name.ends_with(".js") || name.ends_with(".d.ts"))
            .collect();
        on_disk.sort();
        let embedded: Vec<String> = SDK.iter().map(|(name, _)| (*name).to_owned()).collect();
        assert_eq!(embedded, on_disk, "crates/cli/src/build/js.rs must embed every module of sdk/js");
        for (name, text) in SDK {
            assert_eq!(std::fs::read_to_string(dir.join(name)).expect("read").as_str(), *text, "{name}");
        }
    }

    #[test]
    fn the_default_plugin_name_follows_the_name_grammar() {
        assert_eq!(plugin_name_literal(Path::new("dir/orders.ts")), "\"orders\"");
        assert_eq!(plugin_name_literal(Path::new("my tool.é.ts")), "\"my-tool--\"");
        assert_eq!(plugin_name_literal(Path::new(".ts")), "\"-ts\"");
    }
}
