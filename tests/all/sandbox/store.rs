//! The session store: SQLite in one file, quotas, isolation, persistence.

use lovia_host::{CallContext, CallRequest, SessionStore, SqliteStore, StoreQuota};
use lovia_tests::{fixtures, load};
use std::sync::Arc;

fn session(id: &str, tenant: Option<&str>) -> CallContext {
    CallContext { session_id: Some(id.into()), tenant: tenant.map(Into::into), ..CallContext::default() }
}

#[tokio::test]
async fn notes_survive_a_restart_and_stay_in_their_session_and_tenant() {
    let dir = tempfile::tempdir().expect("tempdir");
    let path = dir.path().join("store.sqlite");
    let notes = load(fixtures::NOTES).await;
    let call = |store: &Arc<dyn SessionStore>, ctx: CallContext, tool: &str, args: &str| CallRequest {
        context: ctx,
        session_store: Some(store.clone()),
        ..CallRequest::new(tool, args)
    };
    {
        let store: Arc<dyn SessionStore> = Arc::new(SqliteStore::open(&path).expect("open"));
        let saved = notes
            .invoke(&call(&store, session("s1", Some("acme")), "save_note", r#"{"title": "plan", "body": "ship it"}"#))
            .await;
        assert_eq!(saved.model_output(), "Saved note 'plan' in session s1");
    }
    // A new store on the same file: what a restarted process sees.
    let store: Arc<dyn SessionStore> = Arc::new(SqliteStore::open(&path).expect("reopen"));
    let read = notes.invoke(&call(&store, session("s1", Some("acme")), "read_note", r#"{"title": "plan"}"#)).await;
    assert_eq!(read.model_output(), "ship it");
    for (other_session, other_tenant) in [("s2", Some("acme")), ("s1", Some("globex")), ("s1", None)] {
        let out = notes.invoke(&call(&store, session(other_session, other_tenant), "list_notes", "")).await;
        assert_eq!(out.model_output(), "[]", "{other_session} / {other_tenant:?} sees nothing");
    }
    let diag = load(fixtures::DIAGNOSTICS).await;
    diag.invoke(&call(&store, session("s1", Some("acme")), "fail_times", r#"{"times": 0}"#)).await;
    let namespace = format!("acme/{}/s1", notes.digest());
    assert_eq!(store.keys(&namespace, ""), ["note/plan"], "another plugin writes its own namespace");
}

#[test]
fn quotas_bound_values_keys_and_totals() {
    let dir = tempfile::tempdir().expect("tempdir");
    let mut quota = StoreQuota::default();
    (quota.value_bytes, quota.key_bytes, quota.keys, quota.total_bytes) = (10, 4, 2, 15);
    let store = SqliteStore::open_with_quota(dir.path().join("q.sqlite"), quota).expect("open");
    // Keys count in the total: "a" and its 10 bytes are 11.
    assert_eq!(store.set("ns", "a", b"0123456789"), Ok(()));
    assert_eq!(
        store.set("ns", "big", b"0123456789x"),
        Err("value of 11 bytes exceeds the store's limit of 10 bytes per value".into())
    );
    assert_eq!(
        store.set("ns", "large", b""),
        Err("key of 5 bytes exceeds the store's limit of 4 bytes per key".into())
    );
    assert_eq!(
        store.set("ns", "b", b"12345"),
        Err("the session's data would reach 17 bytes; the limit is 15 bytes".into())
    );
    assert_eq!(store.set("ns", "b", b"12"), Ok(()));
    assert_eq!(store.set("ns", "c", b"1"), Err("the store holds 2 keys for this session; the limit is 2".into()));
    assert_eq!(store.set("ns", "a", b"0"), Ok(()), "overwriting counts the old value out");
    assert_eq!(store.set("other", "c", b"0123456789"), Ok(()), "quotas are per namespace");
    store.delete("ns", "a");
    assert_eq!(store.keys("ns", ""), ["b"]);
    assert_eq!(store.get("ns", "b"), Some(b"12".to_vec()));
}
