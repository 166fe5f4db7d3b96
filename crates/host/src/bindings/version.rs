//! The contract versions the host loads.

/// The version of the `lovia:tools` contract a plugin was built against
/// (docs/contract.md).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
#[non_exhaustive]
pub enum ContractVersion {
    /// `lovia:tools@0.1.0`: text and JSON results, errors without a kind, no titles.
    V0_1,
    /// `lovia:tools@0.2.0`: adds error kinds, content parts and tool titles.
    V0_2,
}

impl ContractVersion {
    /// The interface a 0.2.0 plugin exports instead of `plugin` when its calls
    /// are async functions (JavaScript: docs/contract.md, "The async-plugin export").
    pub const ASYNC_PLUGIN_EXPORT: &'static str = "lovia:tools/async-plugin@0.2.0";

    /// Every version the host loads, oldest first.
    pub const ALL: [ContractVersion; 2] = [ContractVersion::V0_1, ContractVersion::V0_2];

    /// The semantic version, such as `0.2.0`.
    pub fn as_str(self) -> &'static str {
        match self {
            ContractVersion::V0_1 => "0.1.0",
            ContractVersion::V0_2 => "0.2.0",
        }
    }

    /// The name of the interface a component of this version exports
    /// (0.2.0's asynchronous plugins export [`ContractVersion::ASYNC_PLUGIN_EXPORT`] instead).
    pub fn plugin_export(self) -> &'static str {
        match self {
            ContractVersion::V0_1 => "lovia:tools/plugin@0.1.0",
            ContractVersion::V0_2 => "lovia:tools/plugin@0.2.0",
        }
    }
}

impl std::fmt::Display for ContractVersion {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// The calling convention of a plugin's exports, which decides the engine
/// it is compiled for and runs on.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub(crate) enum Abi {
    /// Every export synchronous (`plugin`): the engine leaves wasmtime's
    /// concurrent runtime out of every store.
    Sync,
    /// `async-plugin`'s async exports (the component-model async ABI): the
    /// engine has concurrency support, which every store then pays for
    /// (docs/performance.md, "The async ABI"), so only these plugins use it.
    Async,
}
