//! The run stores write a checkpoint incrementally: the head and the
//! messages added since the last save, never the whole transcript again.

use lovia_runner::{Checkpoint, Message, RunStatus, RunStore, SqliteRunStore};

fn message(i: usize) -> Message {
    if i.is_multiple_of(2) {
        Message::User { content: format!("question {i:04}: how are order {i:04} and its refund doing?") }
    } else {
        Message::Assistant {
            content: Some(format!("answer {i:04}: order {i:04} shipped, no refund yet.")),
            tool_calls: vec![],
        }
    }
}

/// Saves a transcript growing to `n` messages, one save per message, and
/// returns the bytes each save wrote (when the store counts them).
fn grow(store: &dyn RunStore, session: &str, n: usize, written: impl Fn() -> u64) -> Vec<u64> {
    let mut checkpoint = Checkpoint::new("run_1", "support");
    let mut per_save = Vec::new();
    for i in 0..n {
        checkpoint.messages.push(message(i));
        checkpoint.turn = u32::try_from(i).expect("turn");
        let before = written();
        store.save("acme", session, &checkpoint).expect("save");
        per_save.push(written() - before);
    }
    checkpoint.status = RunStatus::Completed;
    store.save("acme", session, &checkpoint).expect("save");
    assert_eq!(store.load("acme", session).expect("load"), Some(checkpoint), "what was saved loads back whole");
    per_save
}

#[test]
fn a_sqlite_checkpoint_writes_what_changed_not_the_transcript() {
    let dir = tempfile::tempdir().expect("tempdir");
    let store = SqliteRunStore::open(dir.path().join("runs.db")).expect("open");
    let per_save = grow(&store, "s1", 500, || store.bytes_written());
    let (first, last) = (per_save[10], per_save[499]);
    println!("bytes written per checkpoint: save 10 {first}, save 500 {last}; total {}", per_save.iter().sum::<u64>());
    // Every save writes one message and the head, whose size does not depend
    // on the transcript: the 500th costs what the 10th did, within a few bytes
    // of digits.
    assert!(last <= first + 16, "save 500 wrote {last} bytes, save 10 wrote {first}");

    // A shorter transcript replaces the stored tail.
    let mut cut = store.load("acme", "s1").expect("load").expect("session");
    cut.messages.truncate(3);
    store.save("acme", "s1", &cut).expect("save");
    assert_eq!(store.load("acme", "s1").expect("load").expect("session").messages.len(), 3);
    assert!(store.delete("acme", "s1").expect("delete"));
    assert_eq!(store.load("acme", "s1").expect("load"), None);
}

#[test]
fn a_postgres_checkpoint_appends_and_loads_back() {
    let Ok(url) = std::env::var("LOVIA_TEST_POSTGRES_URL") else {
        println!("skipped: LOVIA_TEST_POSTGRES_URL is not set");
        return;
    };
    let store = lovia_runner::PostgresRunStore::open(&url).expect("connect");
    let session = format!("grow_{}", lovia_runner::new_id("s"));
    grow(&store, &session, 120, || 0);
    let mut cut = store.load("acme", &session).expect("load").expect("session");
    cut.messages.truncate(5);
    store.save("acme", &session, &cut).expect("save");
    assert_eq!(store.load("acme", &session).expect("load").expect("session").messages.len(), 5);
    assert!(store.delete("acme", &session).expect("delete"));
}
