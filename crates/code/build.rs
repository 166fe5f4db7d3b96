//! Chooses the engine component lovia-code embeds: the one `LOVIA_CODE_ENGINE`
//! names (scripts/code-engine builds it from the npm lockfile), or the
//! committed engine/engine.wasm (built the same way, from the inputs named in
//! engine/engine.inputs), so that a build needs no node.

use std::path::PathBuf;

fn main() {
    println!("cargo:rerun-if-env-changed=LOVIA_CODE_ENGINE");
    let committed = PathBuf::from("engine/engine.wasm");
    let chosen = match std::env::var_os("LOVIA_CODE_ENGINE").filter(|v| !v.is_empty()) {
        Some(path) => PathBuf::from(path),
        None => committed,
    };
    println!("cargo:rerun-if-changed={}", chosen.display());
    let out = PathBuf::from(std::env::var_os("OUT_DIR").expect("cargo sets OUT_DIR")).join("engine.wasm");
    if let Err(e) = std::fs::copy(&chosen, &out) {
        panic!(
            "lovia-code: cannot read the engine component {}: {e} (LOVIA_CODE_ENGINE, or run scripts/code-engine)",
            chosen.display()
        );
    }
}
