//! The file tools' renderings (spec §1.7), errors (§1.6) and soft failures,
//! asserted on the exact strings and on the file system.

use super::{builder, call_one, dirs, executor, is_error, out};
use lovia_workspace::Mode;
use serde_json::json;
use std::fs;

#[tokio::test]
async fn read_file_renders_lines_empty_files_and_past_the_end() {
    let d = dirs();
    fs::write(d.root.join("a.txt"), "alpha\nbeta\ngamma\n").expect("write");
    fs::write(d.root.join("empty.txt"), "").expect("write");
    let exec = executor(&builder(&d.root, Mode::Coding).build().expect("workspace"));
    assert_eq!(
        out(&exec, "read_file", json!({"path": "a.txt", "start": 2, "end": 3})).await,
        "a.txt (lines 2-3 of 3)\nbeta\ngamma"
    );
    assert_eq!(out(&exec, "read_file", json!({"path": "a.txt"})).await, "a.txt (lines 1-3 of 3)\nalpha\nbeta\ngamma");
    assert_eq!(out(&exec, "read_file", json!({"path": "empty.txt"})).await, "empty.txt (empty file)");
    assert_eq!(
        out(&exec, "read_file", json!({"path": "a.txt", "start": 99})).await,
        "a.txt: start line 99 is past the last line (3)."
    );
    assert_eq!(
        out(&exec, "read_file", json!({"path": "a.txt", "start": 3, "end": 2})).await,
        "Tool error: end must be >= start."
    );
}

#[tokio::test]
async fn read_file_refuses_binary_legacy_text_and_directories() {
    let d = dirs();
    fs::write(d.root.join("bin.dat"), b"PK\x03\x04\x00\x00").expect("write");
    fs::write(d.root.join("gbk.txt"), [0xC4u8, 0xE3, 0xBA, 0xC3].repeat(50)).expect("write");
    fs::create_dir(d.root.join("sub")).expect("mkdir");
    let exec = executor(&builder(&d.root, Mode::Coding).build().expect("workspace"));
    assert_eq!(
        out(&exec, "read_file", json!({"path": "bin.dat"})).await,
        "Tool error: Binary file: bin.dat\n  hint: read_file handles UTF-8 text only; inspect binary content via the shell (file, xxd, sqlite3, ...)."
    );
    assert_eq!(
        out(&exec, "read_file", json!({"path": "gbk.txt"})).await,
        "Tool error: Not UTF-8 text: gbk.txt\n  hint: the file likely uses a legacy encoding (e.g. GBK); convert it via the shell, e.g. iconv -f gbk -t utf-8."
    );
    assert_eq!(out(&exec, "read_file", json!({"path": "sub"})).await, "Tool error: Not a file: sub");
    assert_eq!(out(&exec, "read_file", json!({"path": "missing.txt"})).await, "Tool error: Not a file: missing.txt");
}

#[tokio::test]
async fn read_file_clips_at_the_character_limit() {
    let d = dirs();
    fs::write(d.root.join("big.txt"), "x".repeat(60_000)).expect("write");
    let exec = executor(&builder(&d.root, Mode::Coding).build().expect("workspace"));
    let text = out(&exec, "read_file", json!({"path": "big.txt"})).await;
    let expected_tail = "\n[... truncated: showing 50000 of 60000 chars. Use start/end to read the rest in pages.]";
    assert!(text.ends_with(expected_tail), "{}", &text[text.len() - 120..]);
    assert_eq!(text.len(), "big.txt (lines 1-1 of 1)\n".len() + 50_000 + expected_tail.len());
}

#[tokio::test]
async fn write_file_creates_updates_and_refuses() {
    let d = dirs();
    fs::create_dir(d.root.join("sub")).expect("mkdir");
    let exec = executor(&builder(&d.root, Mode::Coding).build().expect("workspace"));
    assert_eq!(
        out(&exec, "write_file", json!({"path": "new.txt", "content": "hi"})).await,
        "created new.txt (2 bytes)"
    );
    assert_eq!(
        out(&exec, "write_file", json!({"path": "new.txt", "content": "ho"})).await,
        "updated new.txt (2 bytes)"
    );
    let soft = call_one(&exec, "write_file", json!({"path": "new.txt", "content": "x", "create_only": true})).await;
    assert_eq!(soft.output("c"), "file already exists; retry without create_only to overwrite");
    assert!(!is_error(&soft), "a soft failure is a successful result");
    assert_eq!(fs::read_to_string(d.root.join("new.txt")).expect("read"), "ho");
    assert_eq!(
        out(&exec, "write_file", json!({"path": "deep/er/n.txt", "content": "é"})).await,
        "created deep/er/n.txt (2 bytes)"
    );
    assert_eq!(fs::read_to_string(d.root.join("deep/er/n.txt")).expect("read"), "é");
    assert_eq!(
        out(&exec, "write_file", json!({"path": ".", "content": "x"})).await,
        "Tool error: Cannot write to the workspace root as a file."
    );
    assert_eq!(
        out(&exec, "write_file", json!({"path": "sub", "content": "x"})).await,
        "Tool error: Is a directory: sub"
    );
    let leftovers: Vec<_> = fs::read_dir(&d.root)
        .expect("list")
        .filter_map(Result::ok)
        .filter(|e| e.file_name().to_string_lossy().contains(".tmp"))
        .collect();
    assert!(leftovers.is_empty(), "no temp files left: {leftovers:?}");
}

#[tokio::test]
async fn edit_file_replaces_exact_spans_and_soft_fails() {
    let d = dirs();
    fs::write(d.root.join("a.txt"), "alpha\nbeta\ngamma\n").expect("write");
    fs::write(d.root.join("twice.txt"), "x = 1\nx = 1\n").expect("write");
    fs::write(d.root.join("latin1.txt"), b"caf\xe9\n").expect("write");
    let exec = executor(&builder(&d.root, Mode::Coding).build().expect("workspace"));
    assert_eq!(
        out(&exec, "edit_file", json!({"path": "a.txt", "old": "beta", "new": "BETA"})).await,
        "edited a.txt (1 replacement)"
    );
    assert_eq!(fs::read_to_string(d.root.join("a.txt")).expect("read"), "alpha\nBETA\ngamma\n");
    assert_eq!(
        out(&exec, "edit_file", json!({"path": "a.txt", "old": "BETA", "new": "BETA"})).await,
        "a.txt: no change (old text == new text)"
    );
    for (args, expected) in [
        (
            json!({"path": "a.txt", "old": "", "new": "x"}),
            "old must not be empty; read the file and provide an exact span",
        ),
        (
            json!({"path": "a.txt", "old": "delta", "new": "x"}),
            "old text not found; read the file again and retry with the exact text (whitespace matters)",
        ),
        (
            json!({"path": "twice.txt", "old": "x = 1", "new": "x = 2"}),
            "old text matched 2 times; include more surrounding context to make it unique, or pass replace_all=true to replace every occurrence",
        ),
        (
            json!({"path": "latin1.txt", "old": "caf", "new": "x"}),
            "file is not valid UTF-8; cannot edit safely (use the shell for binary/encoded files)",
        ),
    ] {
        let turn = call_one(&exec, "edit_file", args).await;
        assert_eq!(turn.output("c"), expected);
        assert!(!is_error(&turn), "soft: {expected}");
    }
    assert_eq!(
        out(&exec, "edit_file", json!({"path": "twice.txt", "old": "x = 1", "new": "x = 2", "replace_all": true}))
            .await,
        "edited twice.txt (2 replacements)"
    );
    assert_eq!(fs::read_to_string(d.root.join("twice.txt")).expect("read"), "x = 2\nx = 2\n");
}

#[tokio::test]
async fn list_files_renders_entries_symlinks_and_truncation() {
    let d = dirs();
    fs::create_dir(d.root.join("dir")).expect("mkdir");
    fs::write(d.root.join("f"), "twelve bytes").expect("write");
    fs::write(d.root.join(".hidden"), "").expect("write");
    fs::write(d.root.join("dir/inner.rs"), "fn main() {}").expect("write");
    std::os::unix::fs::symlink("/target", d.root.join("link")).expect("symlink");
    fs::create_dir(d.root.join("empty")).expect("mkdir");
    let name = d.root.file_name().expect("name").to_string_lossy().into_owned();
    let exec = executor(&builder(&d.root, Mode::Coding).build().expect("workspace"));
    assert_eq!(out(&exec, "list_files", json!({})).await, "dir/\nempty/\nf  (12 bytes)\nlink  -> /target");
    assert_eq!(
        out(&exec, "list_files", json!({"include_hidden": true})).await,
        ".hidden  (0 bytes)\ndir/\nempty/\nf  (12 bytes)\nlink  -> /target"
    );
    assert_eq!(out(&exec, "list_files", json!({"path": "dir"})).await, "dir/inner.rs  (12 bytes)");
    assert_eq!(out(&exec, "list_files", json!({"pattern": "*.rs"})).await, "dir/inner.rs  (12 bytes)");
    assert_eq!(out(&exec, "list_files", json!({"path": "empty"})).await, "(no entries)");
    assert_eq!(
        out(&exec, "list_files", json!({"max_results": 2})).await,
        "dir/\nempty/\n… (truncated at 2 entries; narrow the path/pattern or raise max_results)"
    );
    assert_eq!(
        out(&exec, "list_files", json!({"pattern": "../*"})).await,
        "Tool error: Invalid glob pattern: '../*' ('..' is not supported; pass the directory as path= instead)"
    );
    assert_eq!(out(&exec, "list_files", json!({"path": "f"})).await, "Tool error: Not a directory: f");
    assert_eq!(
        out(&exec, "list_files", json!({"path": name.clone()})).await,
        format!(
            "Tool error: Not a directory: {name}\n  hint: '{name}' is the workspace's name, not a path inside it — the root itself is '.'; try list_files('.')."
        )
    );
}

#[tokio::test]
async fn grep_files_renders_matches_and_truncation() {
    let d = dirs();
    fs::write(d.root.join("a.txt"), "alpha\n   beta  \ngamma\n").expect("write");
    fs::create_dir(d.root.join("src")).expect("mkdir");
    fs::write(d.root.join("src/b.py"), "BETA = 1\n").expect("write");
    fs::write(d.root.join("src/bin.dat"), b"beta\x00").expect("write");
    fs::write(d.root.join("long.txt"), format!("beta{}", "y".repeat(500))).expect("write");
    let exec = executor(&builder(&d.root, Mode::Coding).build().expect("workspace"));
    let long_line = format!("long.txt:1: beta{}", "y".repeat(396));
    assert_eq!(out(&exec, "grep_files", json!({"pattern": "beta"})).await, format!("a.txt:2: beta\n{long_line}"));
    assert_eq!(
        out(&exec, "grep_files", json!({"pattern": "beta", "ignore_case": true, "glob": "*.py"})).await,
        "src/b.py:1: BETA = 1"
    );
    assert_eq!(out(&exec, "grep_files", json!({"pattern": "beta", "path": "a.txt"})).await, "a.txt:2: beta");
    assert_eq!(out(&exec, "grep_files", json!({"pattern": "delta"})).await, "(no matches)");
    assert_eq!(
        out(&exec, "grep_files", json!({"pattern": "beta", "max_matches": 1})).await,
        "a.txt:2: beta\n… (truncated at 1 matches; narrow the search or raise max_matches)"
    );
    let bad = out(&exec, "grep_files", json!({"pattern": "(unclosed"})).await;
    assert!(bad.starts_with("Tool error: Invalid regular expression: regex parse error:"), "{bad}");
    assert_eq!(
        out(&exec, "grep_files", json!({"pattern": "x", "path": "nope"})).await,
        "Tool error: Not a file or directory: nope"
    );
}

#[tokio::test]
async fn view_image_returns_the_image_and_refuses_others() {
    let d = dirs();
    let png = [b"\x89PNG\r\n\x1a\n".as_slice(), &[0u8; 24]].concat();
    fs::write(d.root.join("pic.png"), &png).expect("write");
    fs::write(d.root.join("fake.png"), "<svg/>").expect("write");
    fs::write(d.root.join("doc.svg"), "<svg/>").expect("write");
    fs::write(d.root.join("huge.png"), [png.as_slice(), &vec![0u8; 5_242_881]].concat()).expect("write");
    let exec = executor(&builder(&d.root, Mode::Coding).build().expect("workspace"));
    let turn = call_one(&exec, "view_image", json!({"path": "pic.png"})).await;
    assert!(!is_error(&turn));
    assert_eq!(turn.output("c"), "pic.png\n[image: image/png, 32 B]");
    assert_eq!(
        out(&exec, "view_image", json!({"path": "doc.svg"})).await,
        "Tool error: Not a supported image type: 'doc.svg'\n  hint: view_image reads jpg, jpeg, png, gif, or webp files."
    );
    assert!(
        out(&exec, "view_image", json!({"path": "huge.png"}))
            .await
            .starts_with("Tool error: huge.png is 5,242,913 bytes (limit 5,242,880 bytes).\n  hint: ")
    );
    assert_eq!(
        out(&exec, "view_image", json!({"path": "fake.png"})).await,
        "Tool error: fake.png is not a valid image/png file."
    );
}

#[tokio::test]
async fn a_closed_session_refuses_every_call() {
    let d = dirs();
    fs::write(d.root.join("a.txt"), "a").expect("write");
    let workspace = builder(&d.root, Mode::Coding).build().expect("workspace");
    let exec = executor(&workspace);
    workspace.close();
    let closed = format!("Tool error: Workspace session {} is closed.", workspace.id());
    assert_eq!(out(&exec, "read_file", json!({"path": "a.txt"})).await, closed);
    assert_eq!(out(&exec, "write_file", json!({"path": "a.txt", "content": "b"})).await, closed);
    assert_eq!(fs::read_to_string(d.root.join("a.txt")).expect("read"), "a");
}

#[tokio::test]
async fn a_write_keeps_a_files_permissions() {
    use std::os::unix::fs::PermissionsExt;
    let d = dirs();
    let script = d.root.join("run.sh");
    fs::write(&script, "echo a\n").expect("write");
    fs::set_permissions(&script, fs::Permissions::from_mode(0o750)).expect("chmod");
    let exec = executor(&builder(&d.root, Mode::Coding).build().expect("workspace"));
    assert_eq!(
        out(&exec, "edit_file", json!({"path": "run.sh", "old": "a", "new": "b"})).await,
        "edited run.sh (1 replacement)"
    );
    assert_eq!(fs::metadata(&script).expect("meta").permissions().mode() & 0o777, 0o750);
    assert_eq!(
        out(&exec, "write_file", json!({"path": "run.sh", "content": "echo c\n"})).await,
        "updated run.sh (7 bytes)"
    );
    assert_eq!(fs::metadata(&script).expect("meta").permissions().mode() & 0o777, 0o750);
}

#[tokio::test]
async fn read_file_reads_a_prefix_of_a_large_file_and_says_so() {
    let d = dirs();
    fs::write(d.root.join("log.txt"), "line one\nline two\nline three\n").expect("write");
    let mut limits = lovia_workspace::Limits::default();
    limits.read_bytes = 12;
    let exec = executor(&builder(&d.root, Mode::Coding).limits(limits).build().expect("workspace"));
    assert_eq!(
        out(&exec, "read_file", json!({"path": "log.txt"})).await,
        "log.txt (lines 1-2 of 2)\nline one\nlin\n[... file cut: only its first 12 of 29 bytes were read.]"
    );
}

/// Round two of the confinement, item 7: a file name cannot forge a line
/// of a listing or a match, binary files are skipped after their first
/// kilobyte (a sparse file of zeros is read no further), and one search
/// reads no more than its byte budget, saying where it stopped.
#[tokio::test]
async fn names_cannot_forge_lines_and_a_search_is_bounded() {
    let d = dirs();
    let forged = "a\nb.txt:1: forged";
    fs::write(d.root.join(forged), "needle\n").expect("write");
    let exec = executor(&builder(&d.root, Mode::Coding).build().expect("workspace"));
    let listed = out(&exec, "list_files", json!({})).await;
    assert_eq!(listed, "a\\nb.txt:1: forged  (7 bytes)", "{listed}");
    let found = out(&exec, "grep_files", json!({"pattern": "needle"})).await;
    assert_eq!(found, "a\\nb.txt:1: forged:1: needle", "{found}");
    fs::remove_file(d.root.join(forged)).expect("remove");

    // A sparse file of 4 MB whose match lies past its first kilobyte of zeros.
    let sparse = fs::File::create(d.root.join("sparse.bin")).expect("sparse");
    sparse.set_len(4_000_000).expect("set_len");
    use std::os::unix::fs::FileExt;
    sparse.write_at(b"\nneedle\n", 3_000_000).expect("write_at");
    assert_eq!(out(&exec, "grep_files", json!({"pattern": "needle"})).await, "(no matches)");
    fs::remove_file(d.root.join("sparse.bin")).expect("remove");

    // Ten text files of 1,000 bytes against a budget of 2,500 bytes.
    for i in 0..10 {
        fs::write(d.root.join(format!("f{i}.txt")), format!("needle {i}\n{}\n", "x".repeat(990))).expect("write");
    }
    let mut limits = lovia_workspace::Limits::default();
    limits.grep_total_bytes = 2_500;
    let bounded = executor(&builder(&d.root, Mode::Coding).limits(limits).build().expect("workspace"));
    let found = out(&bounded, "grep_files", json!({"pattern": "needle"})).await;
    let lines: Vec<&str> = found.lines().collect();
    assert_eq!(lines.len(), 4, "{found}");
    assert!(lines[..3].iter().all(|l| l.starts_with('f') && l.contains(": needle ")), "{found}");
    assert_eq!(
        lines[3], "… (stopped after reading 2,500 bytes or 10 s, this search's budget; narrow the path or glob)",
        "{found}"
    );
}
