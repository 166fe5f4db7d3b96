//! The Rust guest SDK this binary carries, so that `lovia new` can give a
//! project the `lovia` crate without a registry that has it: the sources of
//! `guest-sdk/` and `guest-sdk/macros/`, embedded, and a manifest for each
//! that stands alone (the repository's use the workspace's versions). The
//! Python and TypeScript SDKs are embedded the same way (`build/`).

/// Where `lovia new` writes the SDK inside a project.
pub(crate) const DIR: &str = "vendor";

/// The SDK's files, by their path under [`DIR`]. A unit test checks that
/// every source file of the repository's SDK is here.
pub(crate) const FILES: &[(&str, &str)] = &[
    ("lovia/Cargo.toml", SDK_MANIFEST),
    ("lovia/src/bindings.rs", include_str!("../../../../guest-sdk/src/bindings.rs")),
    ("lovia/src/content.rs", include_str!("../../../../guest-sdk/src/content.rs")),
    ("lovia/src/context.rs", include_str!("../../../../guest-sdk/src/context.rs")),
    ("lovia/src/error.rs", include_str!("../../../../guest-sdk/src/error.rs")),
    ("lovia/src/http.rs", include_str!("../../../../guest-sdk/src/http.rs")),
    ("lovia/src/lib.rs", include_str!("../../../../guest-sdk/src/lib.rs")),
    ("lovia/src/panic.rs", include_str!("../../../../guest-sdk/src/panic.rs")),
    ("lovia/src/private.rs", include_str!("../../../../guest-sdk/src/private.rs")),
    ("lovia/src/schema.rs", include_str!("../../../../guest-sdk/src/schema.rs")),
    ("lovia/wit/lovia.wit", include_str!("../../../../guest-sdk/wit/lovia.wit")),
    ("lovia-macros/Cargo.toml", MACROS_MANIFEST),
    ("lovia-macros/src/ast.rs", include_str!("../../../../guest-sdk/macros/src/ast.rs")),
    ("lovia-macros/src/expand.rs", include_str!("../../../../guest-sdk/macros/src/expand.rs")),
    ("lovia-macros/src/lib.rs", include_str!("../../../../guest-sdk/macros/src/lib.rs")),
    ("lovia-macros/src/valid.rs", include_str!("../../../../guest-sdk/macros/src/valid.rs")),
];

/// `guest-sdk/Cargo.toml` with the workspace's versions written out (a
/// unit test compares them with the workspace's).
const SDK_MANIFEST: &str = r#"# The lovia guest SDK, written by `lovia new` (lovia 0.1.0). Keep it with
# your project; `lovia new --sdk DIR` names a checkout's guest-sdk/ instead.
[package]
name = "lovia"
description = "Write LLM agent tools as WebAssembly components for the lovia host."
version = "0.1.0"
edition = "2024"
rust-version = "1.95"
license = "Apache-2.0"

[dependencies]
lovia-macros = { path = "../lovia-macros", version = "0.1.0" }
wit-bindgen = "0.60.0"
wasip2 = { version = "1.0.4", default-features = false, features = ["std"] }
serde = { version = "1", features = ["derive"] }
serde_json = { version = "1", features = ["preserve_order"] }
schemars = { version = "1.0", features = ["preserve_order"] }
"#;

const MACROS_MANIFEST: &str = r#"# The #[lovia::tool] macro of the lovia guest SDK, written by `lovia new`.
[package]
name = "lovia-macros"
description = "The #[lovia::tool] attribute macro."
version = "0.1.0"
edition = "2024"
rust-version = "1.95"
license = "Apache-2.0"

[lib]
proc-macro = true

[dependencies]
syn = { version = "2", features = ["full", "extra-traits"] }
quote = "1"
proc-macro2 = "1"
"#;

#[cfg(test)]
mod tests {
    use super::*;
    use std::path::Path;

    fn repo() -> &'static Path {
        Path::new(concat!(env!("CARGO_MANIFEST_DIR"), "/../.."))
    }

    fn table(text: &str) -> toml::Table {
        text.parse().expect("valid TOML")
    }

    #[test]
    fn every_source_file_of_the_sdk_is_carried() {
        for (dir, under) in [
            ("guest-sdk/src", "lovia/src"),
            ("guest-sdk/wit", "lovia/wit"),
            ("guest-sdk/macros/src", "lovia-macros/src"),
        ] {
            for entry in std::fs::read_dir(repo().join(dir)).expect("the SDK's directory") {
                let name = entry.expect("an entry").file_name().to_string_lossy().into_owned();
                let carried = FILES.iter().find(|(path, _)| *path == format!("{under}/{name}"));
                let on_disk = std::fs::read_to_string(repo().join(dir).join(&name)).expect("read");
                assert_eq!(carried.map(|(_, text)| *text), Some(on_disk.as_str()), "{dir}/{name} is not carried");
            }
        }
    }

    /// Each dependency of the carried manifests is the workspace's, and the
    /// package fields are the workspace's too.
    #[test]
    fn the_carried_manifests_say_what_the_workspace_says() {
        let workspace = table(&std::fs::read_to_string(repo().join("Cargo.toml")).expect("Cargo.toml"));
        let deps = workspace["workspace"]["dependencies"].as_table().expect("workspace dependencies");
        let package = workspace["workspace"]["package"].as_table().expect("workspace package");
        for (carried, original) in
            [(SDK_MANIFEST, "guest-sdk/Cargo.toml"), (MACROS_MANIFEST, "guest-sdk/macros/Cargo.toml")]
        {
            let carried = table(carried);
            let original = table(&std::fs::read_to_string(repo().join(original)).expect("the SDK's manifest"));
            for key in ["version", "edition", "rust-version", "license"] {
                assert_eq!(carried["package"][key], package[key], "{original:?}: package.{key}");
            }
            assert_eq!(carried["package"]["name"], original["package"]["name"]);
            assert_eq!(carried["package"]["description"], original["package"]["description"]);
            let wanted = original["dependencies"].as_table().expect("dependencies");
            let have = carried["dependencies"].as_table().expect("dependencies");
            let mut names: Vec<&String> = wanted.keys().collect();
            names.sort();
            let mut carried_names: Vec<&String> = have.keys().collect();
            carried_names.sort();
            assert_eq!(names, carried_names);
            for name in names {
                let mut expected = deps[name.as_str()].clone();
                if name == "lovia-macros" {
                    // The carried copy sits beside the SDK's.
                    expected.as_table_mut().expect("a table").insert("path".into(), "../lovia-macros".into());
                }
                assert_eq!(have[name.as_str()], expected, "dependency {name}");
            }
        }
    }
}
