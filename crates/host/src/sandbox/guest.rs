//! A plugin's component, whichever contract version it was built against:
//! one face over the generated bindings of each (`crate::bindings`), every
//! answer in the current version's types.

use super::SandboxState;
use crate::bindings::{ContractVersion, guest, legacy, v0_1, v0_2, v0_2_async, wit};
use wasmtime::Store;
use wasmtime::component::{HasSelf, InstancePre, Linker};

/// Adds the imports of every contract version to `linker`; a component
/// links against the ones it names.
pub(crate) fn add_to_linker(linker: &mut Linker<SandboxState>) -> wasmtime::Result<()> {
    v0_1::ToolPlugin::add_to_linker::<SandboxState, HasSelf<SandboxState>>(linker, |s| s)?;
    v0_2::ToolPlugin::add_to_linker::<SandboxState, HasSelf<SandboxState>>(linker, |s| s)?;
    Ok(())
}

/// A component linked and checked against the contract version it exports.
#[derive(Clone)]
pub(crate) enum GuestPre {
    V0_1(v0_1::ToolPluginPre<SandboxState>),
    V0_2(v0_2::ToolPluginPre<SandboxState>),
    /// 0.2.0's `async-plugin` export (`call` and `needs-approval` are async functions).
    V0_2Async(v0_2_async::AsyncToolPluginPre<SandboxState>),
}

impl GuestPre {
    /// Picks the version by the component's exports: the one whose `plugin`
    /// (or `async-plugin`) interface it exports; the newest `plugin` when it
    /// exports none (so the error names the current contract).
    pub(crate) fn new(pre: InstancePre<SandboxState>) -> wasmtime::Result<Self> {
        let engine = pre.engine().clone();
        let exports = |wanted: &str| pre.component().component_type().exports(&engine).any(|(name, _)| name == wanted);
        if exports(ContractVersion::V0_1.plugin_export()) {
            Ok(GuestPre::V0_1(v0_1::ToolPluginPre::new(pre)?))
        } else if exports(ContractVersion::ASYNC_PLUGIN_EXPORT) {
            Ok(GuestPre::V0_2Async(v0_2_async::AsyncToolPluginPre::new(pre)?))
        } else {
            Ok(GuestPre::V0_2(v0_2::ToolPluginPre::new(pre)?))
        }
    }

    /// The compiled component.
    pub(crate) fn component(&self) -> &wasmtime::component::Component {
        match self {
            GuestPre::V0_1(pre) => pre.instance_pre().component(),
            GuestPre::V0_2(pre) => pre.instance_pre().component(),
            GuestPre::V0_2Async(pre) => pre.instance_pre().component(),
        }
    }

    pub(crate) fn version(&self) -> ContractVersion {
        match self {
            GuestPre::V0_1(_) => ContractVersion::V0_1,
            GuestPre::V0_2(_) | GuestPre::V0_2Async(_) => ContractVersion::V0_2,
        }
    }

    pub(crate) async fn instantiate_async(&self, store: &mut Store<SandboxState>) -> wasmtime::Result<GuestInstance> {
        Ok(match self {
            GuestPre::V0_1(pre) => GuestInstance::V0_1(pre.instantiate_async(store).await?),
            GuestPre::V0_2(pre) => GuestInstance::V0_2(pre.instantiate_async(store).await?),
            GuestPre::V0_2Async(pre) => GuestInstance::V0_2Async(pre.instantiate_async(store).await?),
        })
    }
}

/// An instance of either version; every answer in the current version's types.
pub(crate) enum GuestInstance {
    V0_1(v0_1::ToolPlugin),
    V0_2(v0_2::ToolPlugin),
    V0_2Async(v0_2_async::AsyncToolPlugin),
}

impl GuestInstance {
    pub(crate) async fn info(&self, store: &mut Store<SandboxState>) -> wasmtime::Result<guest::PluginInfo> {
        Ok(match self {
            GuestInstance::V0_1(i) => legacy::info(i.lovia_tools_plugin().call_info(store).await?),
            GuestInstance::V0_2(i) => i.lovia_tools_plugin().call_info(store).await?,
            GuestInstance::V0_2Async(i) => {
                let info = i.lovia_tools_async_plugin().call_info(store).await?;
                guest::PluginInfo { name: info.name, version: info.version, instructions: info.instructions }
            }
        })
    }

    pub(crate) async fn tools(&self, store: &mut Store<SandboxState>) -> wasmtime::Result<Vec<wit::ToolSpec>> {
        Ok(match self {
            GuestInstance::V0_1(i) => {
                i.lovia_tools_plugin().call_tools(store).await?.into_iter().map(legacy::tool_spec).collect()
            }
            GuestInstance::V0_2(i) => i.lovia_tools_plugin().call_tools(store).await?,
            GuestInstance::V0_2Async(i) => i.lovia_tools_async_plugin().call_tools(store).await?,
        })
    }

    pub(crate) async fn call(
        &self,
        store: &mut Store<SandboxState>,
        tool: &str,
        arguments: &str,
    ) -> wasmtime::Result<Result<wit::Output, wit::CallError>> {
        Ok(match self {
            GuestInstance::V0_1(i) => match i.lovia_tools_plugin().call_call(store, tool, arguments).await? {
                Ok(output) => Ok(legacy::output(output)),
                Err(error) => Err(legacy::call_error(error)),
            },
            GuestInstance::V0_2(i) => i.lovia_tools_plugin().call_call(store, tool, arguments).await?,
            // Bindgen's wrapper of an async function takes an `Accessor`
            // (the concurrent API); the typed function's `call_async` runs
            // the call's task to its end on this store, as for the others.
            GuestInstance::V0_2Async(i) => {
                let call = i.lovia_tools_async_plugin().func_call();
                call.call_async(&mut *store, (tool.to_owned(), arguments.to_owned())).await?.0
            }
        })
    }

    pub(crate) async fn needs_approval(
        &self,
        store: &mut Store<SandboxState>,
        tool: &str,
        arguments: &str,
    ) -> wasmtime::Result<Result<bool, String>> {
        match self {
            GuestInstance::V0_1(i) => i.lovia_tools_plugin().call_needs_approval(store, tool, arguments).await,
            GuestInstance::V0_2(i) => i.lovia_tools_plugin().call_needs_approval(store, tool, arguments).await,
            GuestInstance::V0_2Async(i) => {
                let needs = i.lovia_tools_async_plugin().func_needs_approval();
                Ok(needs.call_async(&mut *store, (tool.to_owned(), arguments.to_owned())).await?.0)
            }
        }
    }
}
