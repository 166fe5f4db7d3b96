//! Host bindings of `wit/lovia.wit`. Exports are async so that epoch
//! deadlines can yield and a call can be dropped at any instant; the imports
//! are cheap and synchronous.
#![allow(missing_docs, unreachable_pub)]

wasmtime::component::bindgen!({
    path: "wit",
    world: "tool-plugin",
    exports: { default: async },
});

pub(crate) use exports::lovia::tools::plugin as guest;
pub(crate) use lovia::tools::types as wit;
