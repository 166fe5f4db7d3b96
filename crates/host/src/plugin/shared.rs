//! What plugins of the same bytes share: the compiled component, its link
//! (`GuestPre`), its checked description and its tools' validators. None of
//! it depends on a plugin's config (grants, limits, instance mode, store
//! namespace), so a host that loads one component for a thousand tenants
//! compiles, links and describes it once and holds one copy of its code;
//! each load copies the tool specs (a few KiB) and adds its own config. The host keeps each by digest (`crate::live`) as long
//! as a plugin made from it lives.

use super::{LoadedTool, PluginInfo};
use crate::engine::Runtime;
use crate::sandbox::GuestPre;
use std::sync::Arc;

/// One component, compiled, linked and described.
pub(super) struct Assembly {
    pub(super) runtime: Arc<Runtime>,
    pub(super) digest: String,
    pub(super) pre: GuestPre,
    pub(super) info: PluginInfo,
    pub(super) tools: Vec<LoadedTool>,
    pub(super) imports: Vec<String>,
}
