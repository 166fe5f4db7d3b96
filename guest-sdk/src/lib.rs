//! Write LLM agent tools as WebAssembly components for the lovia host.
//!
//! A tool is an ordinary function. `#[lovia::tool]` derives its JSON Schema
//! from the signature, and `lovia::export!` turns a list of tools into a
//! component that implements the `lovia:tools/tool-plugin` world:
//!
//! ```
//! /// Search internal documentation.
//! #[lovia::tool(strict)]
//! fn search_docs(
//!     #[arg(description = "Search terms")] query: String,
//!     #[arg(min = 1, max = 10, default = 5)] limit: u32,
//! ) -> Vec<String> {
//!     (0..limit).map(|i| format!("{query} #{i}")).collect()
//! }
//!
//! lovia::export!(search_docs);
//! # fn main() {}
//! ```
//!
//! Build it with `cargo build --target wasm32-wasip2 --release`, then run
//! `lovia pack` on the `.wasm` to embed the manifest that `lovia inspect`
//! reads without running any of the plugin's code.
//!
//! # Return values
//! - `String`: the model sees the text verbatim;
//! - [`Content`]: text, images and links, for clients that show them;
//! - any other `serde::Serialize` value: JSON, rendered by the host;
//! - `Result<T, E>` with `E: Into<lovia::ToolError>`: an `Err` becomes
//!   `Tool error: <message>` (plus `\n  hint: <hint>`);
//! - a panic traps the instance; the host reports `tool panicked: <message>`
//!   (the message reaches it through [`report_panics`]' hook).

pub mod bindings;
mod content;
mod context;
mod error;
pub mod http;
mod panic;
mod schema;

/// The tool authors' pages, whose Rust snippets rustdoc compiles as this
/// crate's doctests. They are guest code, yet they compile for the host too,
/// as the examples above do, so none needs `ignore`. Each snippet ends in a hidden
/// `fn main() {}` so that `export!` expands at the crate root, as in a plugin.
#[cfg(doctest)]
mod author_docs {
    #[doc = include_str!("../../docs/tool-authors.md")]
    mod tool_authors {}
    #[doc = include_str!("../../docs/contract.md")]
    mod contract {}
}

#[doc(hidden)]
#[path = "private.rs"]
pub mod __private;

pub use content::Content;
pub use context::{Context, Level, Store};
pub use error::{ToolError, ToolErrorKind};
pub use lovia_macros::tool;
pub use panic::report_panics;

/// Exports tools as the plugin's implementation of the `lovia:tools` world.
///
/// List the `#[lovia::tool]` functions by path. The plugin's name and version
/// come from the crate's `Cargo.toml`; optional instructions for the model
/// come first:
///
/// ```ignore
/// lovia::export!(search_docs, admin::reindex);
/// lovia::export!(instructions = "Prefer search_docs over guessing."; search_docs);
/// ```
///
/// Call it once per crate, at the crate root.
#[macro_export]
macro_rules! export {
    (instructions = $instructions:expr; $( $($seg:ident)::+ ),+ $(,)?) => {
        $crate::export!(@emit ::core::option::Option::Some($instructions); $( $($seg)::+ ),+);
    };
    ($( $($seg:ident)::+ ),+ $(,)?) => {
        $crate::export!(@emit ::core::option::Option::None; $( $($seg)::+ ),+);
    };
    (@emit $instructions:expr; $( $($seg:ident)::+ ),+) => {
        #[doc(hidden)]
        struct __LoviaPlugin;

        #[doc(hidden)]
        static __LOVIA_TOOLS: &[$crate::__private::ToolDef] = &[ $( $($seg)::+ :: __LOVIA_TOOL ),+ ];

        impl $crate::bindings::exports::lovia::tools::plugin::Guest for __LoviaPlugin {
            fn info() -> $crate::bindings::exports::lovia::tools::plugin::PluginInfo {
                $crate::report_panics();
                $crate::__private::info(
                    ::core::env!("CARGO_PKG_NAME"),
                    ::core::env!("CARGO_PKG_VERSION"),
                    $instructions,
                )
            }
            fn tools() -> ::std::vec::Vec<$crate::bindings::lovia::tools::types::ToolSpec> {
                $crate::report_panics();
                __LOVIA_TOOLS.iter().map(|t| (t.spec)()).collect()
            }
            fn call(
                tool: ::std::string::String,
                arguments: ::std::string::String,
            ) -> ::core::result::Result<
                $crate::bindings::lovia::tools::types::Output,
                $crate::bindings::lovia::tools::types::CallError,
            > {
                $crate::report_panics();
                $crate::__private::call(__LOVIA_TOOLS, &tool, &arguments)
            }
            fn needs_approval(
                tool: ::std::string::String,
                arguments: ::std::string::String,
            ) -> ::core::result::Result<bool, ::std::string::String> {
                $crate::report_panics();
                $crate::__private::needs_approval(__LOVIA_TOOLS, &tool, &arguments)
            }
        }

        $crate::bindings::__export_tool_plugin!(__LoviaPlugin with_types_in $crate::bindings);
    };
}
