//! What plugins of the same bytes share: the compiled component, its link
//! (`GuestPre`), its checked description and its tools' validators. None of
//! it depends on a plugin's config (grants, limits, instance mode, store
//! namespace), so a host that loads one component for a thousand tenants
//! compiles, links and describes it once and holds one copy; each load adds
//! only its config. An entry lives as long as a plugin made from it.

use super::{LoadedTool, PluginInfo};
use crate::engine::Runtime;
use crate::sandbox::GuestPre;
use std::collections::HashMap;
use std::sync::{Arc, Mutex, Weak};

/// One component, compiled, linked and described.
pub(super) struct Assembly {
    pub(super) runtime: Arc<Runtime>,
    pub(super) digest: String,
    pub(super) pre: GuestPre,
    pub(super) info: PluginInfo,
    pub(super) tools: Vec<LoadedTool>,
    pub(super) imports: Vec<String>,
}

/// The live assemblies of one host, by digest. Cheap to clone: clones share it.
#[derive(Clone, Default)]
pub(crate) struct SharedAssemblies(Arc<Mutex<HashMap<String, Weak<Assembly>>>>);

impl SharedAssemblies {
    /// The assembly of `digest`, while a plugin made from it lives.
    pub(super) fn get(&self, digest: &str) -> Option<Arc<Assembly>> {
        self.0.lock().unwrap_or_else(|p| p.into_inner()).get(digest).and_then(Weak::upgrade)
    }

    /// Remembers `assembly` for the next load of its bytes, and forgets
    /// those no plugin holds any more (so the map is as large as the
    /// distinct components alive, not as the loads ever made).
    pub(super) fn keep(&self, assembly: &Arc<Assembly>) {
        let mut map = self.0.lock().unwrap_or_else(|p| p.into_inner());
        map.retain(|_, weak| weak.strong_count() > 0);
        map.insert(assembly.digest.clone(), Arc::downgrade(assembly));
    }
}
