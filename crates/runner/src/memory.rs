//! A run store in this process's memory: for embedders and tests that need
//! no persistence. It forgets everything when dropped.

use super::checkpoint::{Checkpoint, RunStore, SessionInfo, SessionPage, StoreError};
use std::collections::HashMap;
use std::sync::Mutex;
use std::time::{SystemTime, UNIX_EPOCH};

/// A [`RunStore`] in memory.
///
/// ```
/// use lovia_runner::{Checkpoint, MemoryRunStore, RunStore, SessionPage};
/// # #[tokio::main(flavor = "current_thread")]
/// # async fn main() {
/// let store = MemoryRunStore::default();
/// store.save("acme", "s1", &Checkpoint::new("run_1", "support")).await.unwrap();
/// assert_eq!(store.list("acme", &SessionPage::default()).await.unwrap()[0].session, "s1");
/// assert!(store.list("globex", &SessionPage::default()).await.unwrap().is_empty());
/// # }
/// ```
#[derive(Debug, Default)]
pub struct MemoryRunStore {
    sessions: Mutex<HashMap<(String, String), Entry>>,
}

#[derive(Debug)]
struct Entry {
    checkpoint: Checkpoint,
    created_ms: i64,
    updated_ms: i64,
}

fn now_ms() -> i64 {
    SystemTime::now().duration_since(UNIX_EPOCH).map_or(0, |d| i64::try_from(d.as_millis()).unwrap_or(i64::MAX))
}

#[async_trait::async_trait]
impl RunStore for MemoryRunStore {
    async fn load(&self, tenant: &str, session: &str) -> Result<Option<Checkpoint>, StoreError> {
        let sessions = self.sessions.lock().unwrap_or_else(|p| p.into_inner());
        Ok(sessions.get(&(tenant.to_owned(), session.to_owned())).map(|e| e.checkpoint.clone()))
    }

    async fn save(&self, tenant: &str, session: &str, checkpoint: &Checkpoint) -> Result<(), StoreError> {
        let now = now_ms();
        let mut sessions = self.sessions.lock().unwrap_or_else(|p| p.into_inner());
        let entry = sessions.entry((tenant.to_owned(), session.to_owned())).or_insert_with(|| Entry {
            checkpoint: checkpoint.clone(),
            created_ms: now,
            updated_ms: now,
        });
        entry.checkpoint = checkpoint.clone();
        entry.updated_ms = now;
        Ok(())
    }

    async fn unfinished(&self) -> Result<Vec<(String, String)>, StoreError> {
        let sessions = self.sessions.lock().unwrap_or_else(|p| p.into_inner());
        let mut found: Vec<_> = sessions.iter().filter(|(_, e)| e.checkpoint.is_unfinished()).collect();
        found.sort_by_key(|((t, s), e)| (e.updated_ms, t.clone(), s.clone()));
        Ok(found.into_iter().map(|(k, _)| k.clone()).collect())
    }

    async fn delete(&self, tenant: &str, session: &str) -> Result<bool, StoreError> {
        let mut sessions = self.sessions.lock().unwrap_or_else(|p| p.into_inner());
        Ok(sessions.remove(&(tenant.to_owned(), session.to_owned())).is_some())
    }

    async fn list(&self, tenant: &str, page: &SessionPage) -> Result<Vec<SessionInfo>, StoreError> {
        let sessions = self.sessions.lock().unwrap_or_else(|p| p.into_inner());
        let mut found: Vec<(i64, &str, &Entry)> = sessions
            .iter()
            .filter(|((t, _), _)| t == tenant)
            .map(|((_, s), e)| (e.created_ms, s.as_str(), e))
            .filter(|(created, s, _)| page.before.as_ref().is_none_or(|c| (*created, *s) < (c.created_ms, &c.session)))
            .collect();
        found.sort_by(|a, b| (b.0, b.1).cmp(&(a.0, a.1)));
        found.truncate(page.bounded_limit());
        Ok(found
            .into_iter()
            .map(|(created_ms, session, e)| SessionInfo {
                session: session.to_owned(),
                status: e.checkpoint.status,
                created_ms,
                updated_ms: e.updated_ms,
                input: match e.checkpoint.messages.first() {
                    Some(super::Message::User { content }) => {
                        Some(content.chars().take(super::checkpoint::SESSION_INPUT_PREVIEW_CHARS).collect())
                    }
                    _ => None,
                },
            })
            .collect())
    }
}
