//! Host bindings of the `lovia:tools` contract, one module per version the
//! host loads (docs/contract.md). Exports are async so that epoch deadlines
//! can yield and a call can be dropped at any instant; the imports are cheap
//! and synchronous.
//!
//! The rest of the host speaks the newest version's types ([`wit`],
//! [`guest`]); `crate::sandbox::GuestPre` hides which version a component
//! was built against, with [`legacy`] converting an older one's values up.
//! A leaf: it depends on no other module of the crate.
#![allow(missing_docs, unreachable_pub)]

pub(crate) mod legacy;
mod version;

/// `lovia:tools@0.1.0`, as it was released (`wit/0.1.0/lovia.wit`).
pub(crate) mod v0_1 {
    wasmtime::component::bindgen!({
        path: "wit/0.1.0",
        world: "tool-plugin",
        exports: { default: async },
    });
}

/// `lovia:tools@0.2.0`, the current contract (`wit/lovia.wit`).
pub(crate) mod v0_2 {
    wasmtime::component::bindgen!({
        path: "wit",
        world: "tool-plugin",
        exports: { default: async },
    });
}

/// `lovia:tools@0.2.0`'s `async-tool-plugin` world: the same imports as
/// `tool-plugin` (its types are [`v0_2`]'s, so the linker entries and host
/// traits are shared), and the `async-plugin` export, whose `call` and
/// `needs-approval` are async functions of the component-model async ABI.
pub(crate) mod v0_2_async {
    wasmtime::component::bindgen!({
        path: "wit",
        world: "async-tool-plugin",
        exports: { default: async },
        with: {
            "lovia:tools/types": super::v0_2::lovia::tools::types,
            "lovia:tools/context": super::v0_2::lovia::tools::context,
            "lovia:tools/store": super::v0_2::lovia::tools::store,
        },
    });
}

pub(crate) use v0_2::exports::lovia::tools::plugin as guest;
pub(crate) use v0_2::lovia::tools::types as wit;
pub(crate) use version::Abi;
pub use version::ContractVersion;
