//! What a component may import, checked on its bytes before it is
//! compiled: a compile takes seconds of CPU for a large component, and one
//! that imports what the host never provides would be refused after it
//! anyway, by the linker.
//!
//! Only what the host certainly lacks is refused here; whether it provides
//! an interface of a package it knows, at the version asked, stays the
//! linker's to say after the compile.

use crate::LoadError;

/// The WASI 0.2 packages whose interfaces the host links
/// (`sandbox::linker`: wasmtime-wasi's `p2::add_to_linker_async` and
/// wasmtime-wasi-http's `add_only_http_to_linker_async`), as the hint of
/// [`LoadError::UnknownImport`] lists them.
const WASI_PACKAGES: &[&str] =
    &["wasi:cli", "wasi:clocks", "wasi:filesystem", "wasi:io", "wasi:random", "wasi:sockets", "wasi:http"];

/// lovia's own package (`context`, `store`), at any version the host loads.
const LOVIA_PACKAGE: &str = "lovia:tools";

/// Refuses the first of `imports` (a component's top-level import names)
/// that the host cannot provide.
pub(crate) fn check(imports: &[String], origin: &str) -> Result<(), LoadError> {
    match imports.iter().find(|name| !may_be_provided(name)) {
        Some(import) => Err(LoadError::UnknownImport { origin: origin.into(), import: import.clone() }),
        None => Ok(()),
    }
}

/// Whether `name` may be provided: an interface of a WASI 0.2 package (any
/// 0.2.x, or no version: wasmtime's linker matches semver-compatible
/// versions), or of `lovia:tools`. A plain name (a function or instance
/// import that is not an interface) never is.
fn may_be_provided(name: &str) -> bool {
    let Some((package, interface)) = name.split_once('/') else { return false };
    let version = interface.split_once('@').map(|(_, version)| version);
    if WASI_PACKAGES.contains(&package) {
        return version.is_none_or(|v| v.starts_with("0.2."));
    }
    package == LOVIA_PACKAGE
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn wasi_0_2_and_lovia_pass_and_everything_else_is_refused() {
        for name in [
            "wasi:io/streams@0.2.0",
            "wasi:cli/environment@0.2.6",
            "wasi:filesystem/types@0.2.9",
            "wasi:random/random",
            "wasi:http/outgoing-handler@0.2.0",
            "lovia:tools/context@0.2.0",
            "lovia:tools/store@0.1.0",
        ] {
            assert!(may_be_provided(name), "{name}");
        }
        for name in [
            "wasi:io/streams@0.3.0",
            "wasi:keyvalue/store@0.2.0-draft",
            "acme:secret/keys@1.0.0",
            "lovia-tools/context",
            "get-secret",
        ] {
            assert!(!may_be_provided(name), "{name}");
        }
        let refused = check(&["wasi:io/streams@0.2.0".into(), "acme:x/y".into()], "up.wasm");
        assert!(
            matches!(&refused, Err(LoadError::UnknownImport { import, .. }) if import == "acme:x/y"),
            "{refused:?}"
        );
    }
}

#[cfg(test)]
mod load_tests {
    use crate::{Host, HostConfig, LoadError};

    /// The import is refused before the compile: the component's core
    /// module does not validate, which only the compile would find, and the
    /// answer is still the unknown import.
    #[tokio::test]
    async fn an_unknown_import_is_refused_before_the_compile() {
        let host = Host::new(HostConfig::default()).expect("host");
        let component = wat::parse_str(
            r#"(component
                 (import "acme:secret/keys@1.0.0" (instance))
                 (core module (func (result i32))))"#,
        )
        .expect("the text parses");
        let refused = host.load_bytes(&component, "upload.wasm").await.expect_err("refused");
        assert!(
            matches!(&refused, LoadError::UnknownImport { import, .. } if import == "acme:secret/keys@1.0.0"),
            "{refused:?}"
        );
        // Without the import, the same bytes reach the compile, which refuses the module.
        let invalid = wat::parse_str(r#"(component (core module (func (result i32))))"#).expect("the text parses");
        let refused = host.load_bytes(&invalid, "upload.wasm").await.expect_err("refused");
        assert!(matches!(refused, LoadError::Invalid { .. }), "{refused:?}");
    }
}
