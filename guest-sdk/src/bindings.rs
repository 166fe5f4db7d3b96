//! Bindings generated from `wit/lovia.wit`. Tool authors use the higher-level
//! API of this crate; these are public for the `export!` macro and for authors
//! who want to implement the contract by hand.
#![allow(missing_docs, unsafe_code, unreachable_pub, clippy::all)]

wit_bindgen::generate!({
    world: "tool-plugin",
    path: "wit",
    pub_export_macro: true,
    default_bindings_module: "::lovia::bindings",
    export_macro_name: "__export_tool_plugin",
});
