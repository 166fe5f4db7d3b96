//! [`LiveByDigest`]: what the host keeps of its live plugins by digest, so
//! that another load of the same bytes shares it (`plugin::shared`). The
//! values are type-erased: the engine owns the map without knowing what a
//! plugin is made of, which keeps `engine` below `plugin` in the layering.

use std::any::Any;
use std::collections::HashMap;
use std::sync::{Arc, Mutex, Weak};

/// Values by digest, each held only as long as something else holds it.
/// Cheap to clone: clones share the map.
#[derive(Clone, Default)]
pub(crate) struct LiveByDigest(Arc<Mutex<HashMap<String, Weak<dyn Any + Send + Sync>>>>);

impl LiveByDigest {
    /// The value kept for `digest`, while it lives and if it is a `T`.
    pub(crate) fn get<T: Any + Send + Sync>(&self, digest: &str) -> Option<Arc<T>> {
        let live = self.0.lock().unwrap_or_else(|p| p.into_inner()).get(digest).and_then(Weak::upgrade)?;
        live.downcast::<T>().ok()
    }

    /// Keeps `value` for `digest`, and forgets what nothing holds any more
    /// (so the map is as large as the distinct values alive, not as the
    /// loads ever made).
    pub(crate) fn keep<T: Any + Send + Sync>(&self, digest: &str, value: &Arc<T>) {
        let erased: Arc<dyn Any + Send + Sync> = value.clone();
        let mut map = self.0.lock().unwrap_or_else(|p| p.into_inner());
        map.retain(|_, weak| weak.strong_count() > 0);
        map.insert(digest.to_owned(), Arc::downgrade(&erased));
    }
}
