//! `lovia new NAME [--lang rust|python|ts]`: a small tool project that builds
//! as it is (docs/tool-authors.md, docs/python.md, docs/typescript.md).

mod guest_sdk;

use crate::CliError;
use std::path::{Path, PathBuf};
use std::process::ExitCode;

/// The language of a new project.
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub(crate) enum Lang {
    /// A library crate for wasm32-wasip2 with the `lovia` guest SDK.
    Rust,
    /// One `app.py` for `lovia build` (componentize-py).
    Python,
    /// One `app.ts` and a package.json with the build toolchain, for `lovia build`.
    #[value(alias = "typescript")]
    Ts,
}

#[derive(clap::Args)]
#[command(after_help = "\
NAME becomes the directory (created in the current one, never over an existing one), the plugin's \
name and, in Rust, the package's name: a letter, then letters, digits, `_` or `-`, at most 64 in all.

Examples:
  lovia new weather                  # Rust: weather/Cargo.toml, weather/src/lib.rs
  lovia new --lang python weather    # Python: weather/app.py; lovia build weather/app.py
  lovia new --lang ts weather        # TypeScript: weather/app.ts, weather/package.json;
                                     # cd weather && npm install && lovia build app.ts")]
pub(crate) struct Args {
    /// The project's name.
    name: String,
    /// The language of the tool.
    #[arg(long, value_enum, default_value_t = Lang::Rust)]
    lang: Lang,
    /// Rust only: depend on the guest SDK at this path (the guest-sdk/ directory
    /// of a lovia checkout) [default: the SDK this binary carries, written
    /// into the project's vendor/ directory].
    #[arg(long, value_name = "DIR")]
    sdk: Option<PathBuf>,
}

/// Names Cargo refuses for a package, besides Rust's keywords.
const CARGO_RESERVED: &[&str] =
    &["alloc", "core", "proc_macro", "proc-macro", "std", "test", "build", "deps", "examples"];

/// Rust's keywords (strict and reserved, edition 2024): Cargo refuses them as package names.
const RUST_KEYWORDS: &[&str] = &[
    "as", "async", "await", "break", "const", "continue", "crate", "dyn", "else", "enum", "extern", "false", "fn",
    "for", "gen", "if", "impl", "in", "let", "loop", "match", "mod", "move", "mut", "pub", "ref", "return", "self",
    "Self", "static", "struct", "super", "trait", "true", "type", "unsafe", "use", "where", "while", "abstract",
    "become", "box", "do", "final", "macro", "override", "priv", "typeof", "unsized", "virtual", "yield", "try",
];

pub(crate) fn run(args: Args) -> Result<ExitCode, CliError> {
    check_name(&args.name, args.lang)?;
    let dir = PathBuf::from(&args.name);
    if args.sdk.is_some() && args.lang != Lang::Rust {
        return Err(CliError::new(
            "--sdk is for --lang rust; Python and TypeScript projects get the SDK from `lovia build`",
        ));
    }
    let owned = |files: Vec<(&'static str, String)>| files.into_iter().map(|(p, t)| (p.to_owned(), t)).collect();
    let files: Vec<(String, String)> = match args.lang {
        Lang::Rust => rust(&args.name, args.sdk.as_deref())?,
        Lang::Python => owned(python(&args.name)),
        Lang::Ts => owned(typescript(&args.name)),
    };
    // create_dir (not create_dir_all) fails when the directory exists: an existing project is never overwritten.
    std::fs::create_dir(&dir).map_err(|e| match e.kind() {
        std::io::ErrorKind::AlreadyExists => CliError::new(format!(
            "{} already exists; lovia new never writes into an existing directory",
            dir.display()
        ))
        .hint("choose another name, or remove the directory"),
        _ => CliError::new(format!("cannot create {}: {e}", dir.display())),
    })?;
    for (path, text) in &files {
        let path = dir.join(path);
        if let Some(parent) = path.parent() {
            std::fs::create_dir_all(parent)
                .map_err(|e| CliError::new(format!("cannot create {}: {e}", parent.display())))?;
        }
        std::fs::write(&path, text).map_err(|e| CliError::new(format!("cannot write {}: {e}", path.display())))?;
    }
    let next = match args.lang {
        Lang::Rust => format!(
            "cd {0} && cargo build --release --target wasm32-wasip2 && lovia call target/wasm32-wasip2/release/{1}.wasm hello '{{\"name\": \"Ada\"}}'",
            args.name,
            args.name.replace('-', "_")
        ),
        Lang::Python => format!(
            "lovia build {0}/app.py -o {0}.wasm && lovia call {0}.wasm hello '{{\"name\": \"Ada\"}}'",
            args.name
        ),
        Lang::Ts => format!(
            "cd {0} && npm install && lovia build app.ts -o {0}.wasm && lovia call {0}.wasm hello '{{\"name\": \"Ada\"}}'",
            args.name
        ),
    };
    println!("created {}/ ({} files); next: {next}", dir.display(), files.len());
    Ok(ExitCode::SUCCESS)
}

/// The plugin-name grammar (`^[a-zA-Z0-9_-]{1,64}$`, docs/semantics.md §2
/// rule 10) with a leading letter, which Cargo and a directory name need;
/// for Rust, also none of the names Cargo refuses.
fn check_name(name: &str, lang: Lang) -> Result<(), CliError> {
    let rule = "a letter, then letters, digits, `_` or `-`, at most 64 characters";
    let grammar = (1..=64).contains(&name.len())
        && name.starts_with(|c: char| c.is_ascii_alphabetic())
        && name.chars().all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-');
    if !grammar {
        return Err(CliError::new(format!("invalid project name {name:?}: expected {rule}")));
    }
    if lang == Lang::Rust && (RUST_KEYWORDS.contains(&name) || CARGO_RESERVED.contains(&name)) {
        return Err(CliError::new(format!("invalid project name {name:?}: Cargo refuses it as a package name")));
    }
    // The project depends on the SDK's two crates by these names.
    if lang == Lang::Rust && matches!(name.replace('_', "-").as_str(), "lovia" | "lovia-macros") {
        return Err(CliError::new(format!(
            "invalid project name {name:?}: the project depends on the guest SDK's crate of that name"
        ))
        .hint("choose another name, such as weather"));
    }
    Ok(())
}

fn python(name: &str) -> Vec<(&'static str, String)> {
    let app = format!(
        r#""""{name}: a lovia tool in Python (docs/python.md in the lovia repository)."""

from typing import Annotated

from lovia import Field, plugin, tool

plugin(name="{name}", version="0.1.0")


@tool(read_only=True)
def hello(name: Annotated[str, Field(min_length=1, max_length=100), "Who to greet"]) -> str:
    """Greets someone by name."""
    return f"Hello, {{name}}!"
"#
    );
    let readme = format!(
        "# {name}\n\nA lovia tool in Python. Build it (needs `pip install '{}'`) and call it:\n\n\
         ```sh\nlovia build app.py -o {name}.wasm\nlovia call {name}.wasm hello '{{\"name\": \"Ada\"}}'\n```\n",
        crate::build::COMPONENTIZE_PY
    );
    vec![("app.py", app), ("README.md", readme)]
}

fn typescript(name: &str) -> Vec<(&'static str, String)> {
    let app = format!(
        r#"// {name}: a lovia tool in TypeScript (docs/typescript.md in the lovia repository).
import {{ plugin, tool }} from "lovia";
import {{ z }} from "zod";

plugin({{ name: "{name}", version: "0.1.0" }});

export const hello = tool(
  {{
    name: "hello",
    description: "Greets someone by name.",
    parameters: z.object({{ name: z.string().min(1).max(100).describe("Who to greet") }}),
    hints: {{ readOnly: true }},
  }},
  async ({{ name }}) => `Hello, ${{name}}!`,
);
"#
    );
    let (esbuild, componentize) = crate::build::TOOLCHAIN.split_once(' ').unwrap_or(("esbuild", "componentize-qjs"));
    let version = |spec: &str| spec.rsplit_once('@').map(|(_, v)| v.to_owned()).unwrap_or_default();
    let package = format!(
        r#"{{
  "name": "{npm_name}",
  "version": "0.1.0",
  "private": true,
  "type": "module",
  "scripts": {{
    "build": "lovia build app.ts -o {name}.wasm"
  }},
  "devDependencies": {{
    "componentize-qjs": "{}",
    "esbuild": "{}",
    "zod": "{}"
  }}
}}
"#,
        version(componentize),
        version(esbuild),
        crate::build::ZOD_VERSION,
        // npm refuses capitals in a package's name.
        npm_name = name.to_lowercase(),
    );
    // The SDK's types, for an editor or `tsc --noEmit`; `lovia build` brings the SDK itself.
    let tsconfig = r#"{
  "compilerOptions": {
    "target": "ES2023",
    "module": "ESNext",
    "moduleResolution": "Bundler",
    "strict": true,
    "noEmit": true,
    "paths": { "lovia": ["./types/lovia/index.d.ts"] }
  },
  "include": ["*.ts"]
}
"#
    .to_owned();
    let readme = format!(
        "# {name}\n\nA lovia tool in TypeScript. Install the build toolchain (Node.js 20 or later), build it and call it:\n\n\
         ```sh\nnpm install\nlovia build app.ts -o {name}.wasm\nlovia call {name}.wasm hello '{{\"name\": \"Ada\"}}'\n```\n"
    );
    vec![
        ("app.ts", app),
        ("package.json", package),
        ("tsconfig.json", tsconfig),
        ("types/lovia/index.d.ts", crate::build::SDK_TYPES.to_owned()),
        ("README.md", readme),
        (".gitignore", "/node_modules\n*.wasm\n".to_owned()),
    ]
}

/// A Rust project: its manifest names the SDK at `sdk`, or the copy this
/// binary carries, written into the project (a registry has no `lovia`
/// crate; docs/tool-authors.md, "Setting up").
fn rust(name: &str, sdk: Option<&Path>) -> Result<Vec<(String, String)>, CliError> {
    let mut files = Vec::new();
    let dependency = match sdk {
        Some(dir) => {
            if !dir.join("Cargo.toml").is_file() {
                return Err(CliError::new(format!("--sdk {}: no Cargo.toml there", dir.display()))
                    .hint("pass the guest-sdk/ directory of a lovia checkout"));
            }
            let dir = std::path::absolute(dir).map_err(|e| CliError::new(format!("--sdk {}: {e}", dir.display())))?;
            // A TOML basic string: escape the characters it cannot hold as they are.
            let shown = dir.display().to_string().replace('\\', "\\\\").replace('"', "\\\"");
            format!("{{ path = \"{shown}\" }}")
        }
        None => {
            for (path, text) in guest_sdk::FILES {
                files.push((format!("{}/{path}", guest_sdk::DIR), (*text).to_owned()));
            }
            format!("{{ path = \"{}/lovia\" }}", guest_sdk::DIR)
        }
    };
    let cargo = format!(
        r#"[package]
name = "{name}"
version = "0.1.0"
edition = "2024"

[lib]
crate-type = ["cdylib"]

[dependencies]
lovia = {dependency}

[profile.release]
opt-level = "s"
strip = true
"#
    );
    let lib = r#"//! A lovia tool (docs/tool-authors.md in the lovia repository).

/// Greets someone by name.
#[lovia::tool(read_only)]
fn hello(#[arg(description = "Who to greet", min_length = 1, max_length = 100)] name: String) -> String {
    format!("Hello, {name}!")
}

lovia::export!(hello);
"#
    .to_owned();
    let vendored = if sdk.is_none() {
        format!(
            "\n`{}/` holds the lovia guest SDK (the `lovia` crate) of the lovia that made this project; keep it with the project.\n",
            guest_sdk::DIR
        )
    } else {
        String::new()
    };
    let readme = format!(
        "# {name}\n\nA lovia tool in Rust. Build it (needs `rustup target add wasm32-wasip2`) and call it:\n\n\
         ```sh\ncargo build --release --target wasm32-wasip2\n\
         lovia call target/wasm32-wasip2/release/{0}.wasm hello '{{\"name\": \"Ada\"}}'\n\
         lovia pack target/wasm32-wasip2/release/{0}.wasm   # embeds the manifest, for a plugin you ship\n```\n{vendored}",
        name.replace('-', "_")
    );
    for (path, text) in
        [("Cargo.toml", cargo), ("src/lib.rs", lib), ("README.md", readme), (".gitignore", "/target\n".to_owned())]
    {
        files.push((path.to_owned(), text));
    }
    Ok(files)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_follow_the_plugin_name_grammar_with_a_leading_letter() {
        for ok in ["weather", "a", "my-tool_2", &"x".repeat(64)] {
            assert!(check_name(ok, Lang::Rust).is_ok(), "{ok}");
        }
        for bad in ["", "9lives", "-x", "a/b", "../x", "a b", "é", &"x".repeat(65)] {
            assert!(check_name(bad, Lang::Python).is_err(), "{bad:?}");
        }
        assert!(check_name("fn", Lang::Rust).is_err());
        assert!(check_name("test", Lang::Rust).is_err());
        assert!(check_name("test", Lang::Python).is_ok(), "only Cargo refuses it");
        assert!(check_name("lovia", Lang::Rust).is_err(), "it would depend on itself");
        assert!(check_name("lovia_macros", Lang::Rust).is_err());
    }
}
