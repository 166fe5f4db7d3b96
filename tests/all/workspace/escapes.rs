//! B1: escape attempts against the directory capability. Whatever the
//! path string says, no operation reaches outside what the policy allowed;
//! each test asserts on the file system outside the root.

use super::{asked, builder, call_deciding, call_one, dirs, executor, out};
use lovia_workspace::Mode;
use serde_json::json;
use std::fs;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

#[tokio::test]
async fn a_symlink_to_a_file_outside_is_judged_as_its_target() {
    let d = dirs();
    fs::write(d.outside.join("secret.txt"), "secret").expect("write");
    std::os::unix::fs::symlink(d.outside.join("secret.txt"), d.root.join("link.txt")).expect("symlink");
    let readonly = executor(&builder(&d.root, Mode::Readonly).build().expect("workspace"));
    let read = out(&readonly, "read_file", json!({"path": "link.txt"})).await;
    assert!(
        read.starts_with(&format!(
            "Tool error: Reading outside the workspace is not permitted: {}",
            d.outside.join("secret.txt").display()
        )),
        "{read}"
    );
    let coding = executor(&builder(&d.root, Mode::Coding).build().expect("workspace"));
    let asked_read = call_deciding(&coding, "read_file", json!({"path": "link.txt"}), false).await;
    assert!(asked(&asked_read), "reading through the link asks as reading outside does");
    let write = out(&coding, "write_file", json!({"path": "link.txt", "content": "pwned"})).await;
    assert!(write.starts_with("Tool error: Writing outside the workspace is not permitted: "), "{write}");
    let edit = out(&coding, "edit_file", json!({"path": "link.txt", "old": "secret", "new": "pwned"})).await;
    assert!(edit.starts_with("Tool error: Writing outside the workspace is not permitted: "), "{edit}");
    assert_eq!(fs::read_to_string(d.outside.join("secret.txt")).expect("read"), "secret");
}

#[tokio::test]
async fn a_symlinked_directory_and_dotdot_chains_stay_outside() {
    let d = dirs();
    std::os::unix::fs::symlink(&d.outside, d.root.join("out")).expect("symlink");
    fs::create_dir(d.root.join("sub")).expect("mkdir");
    let exec = executor(&builder(&d.root, Mode::Coding).build().expect("workspace"));
    for path in
        ["out/x.txt", "sub/../out/x.txt", "../outside/x.txt", "sub/../../outside/x.txt", "./sub/./../../outside/x.txt"]
    {
        let write = call_one(&exec, "write_file", json!({"path": path, "content": "x"})).await;
        assert!(!asked(&write));
        assert_eq!(
            write.output("c").lines().next().expect("a line"),
            format!(
                "Tool error: Writing outside the workspace is not permitted: {}",
                d.outside.join("x.txt").display()
            ),
            "{path}"
        );
    }
    let readonly = executor(&builder(&d.root, Mode::Readonly).build().expect("workspace"));
    let passwd = out(&readonly, "read_file", json!({"path": "../../../../../../../../etc/passwd"})).await;
    assert!(passwd.starts_with("Tool error: Reading outside the workspace is not permitted: /etc/passwd"), "{passwd}");
    let listing = out(&readonly, "list_files", json!({"path": "out"})).await;
    assert!(listing.starts_with("Tool error: Reading outside the workspace is not permitted: "), "{listing}");
    assert_eq!(fs::read_dir(&d.outside).expect("list").count(), 0, "nothing was written outside");
}

#[tokio::test]
async fn proc_self_root_is_the_real_root() {
    let d = dirs();
    std::os::unix::fs::symlink("/proc/self/root", d.root.join("proc-root")).expect("symlink");
    let readonly = executor(&builder(&d.root, Mode::Readonly).build().expect("workspace"));
    for path in ["/proc/self/root/etc/passwd", "proc-root/etc/passwd"] {
        let read = out(&readonly, "read_file", json!({"path": path})).await;
        assert!(
            read.starts_with("Tool error: Reading outside the workspace is not permitted: /etc/passwd"),
            "{path}: {read}"
        );
    }
    let coding = executor(&builder(&d.root, Mode::Coding).build().expect("workspace"));
    let write = out(&coding, "write_file", json!({"path": "proc-root/tmp/lovia-escape.txt", "content": "x"})).await;
    assert!(
        write.starts_with("Tool error: Writing outside the workspace is not permitted: /tmp/lovia-escape.txt"),
        "{write}"
    );
    assert!(!std::path::Path::new("/tmp/lovia-escape.txt").exists());
}

#[tokio::test]
async fn a_hard_link_is_replaced_by_a_write_not_written_through() {
    let d = dirs();
    fs::write(d.outside.join("target.txt"), "original").expect("write");
    // A hard link made inside the root is the same file: reading it reads
    // that file (B1 confines names, not the inodes a name already shares).
    fs::hard_link(d.outside.join("target.txt"), d.root.join("hl.txt")).expect("hard link");
    let exec = executor(&builder(&d.root, Mode::Coding).build().expect("workspace"));
    assert_eq!(out(&exec, "read_file", json!({"path": "hl.txt"})).await, "hl.txt (lines 1-1 of 1)\noriginal");
    assert_eq!(
        out(&exec, "write_file", json!({"path": "hl.txt", "content": "changed"})).await,
        "updated hl.txt (7 bytes)"
    );
    assert_eq!(
        fs::read_to_string(d.outside.join("target.txt")).expect("read"),
        "original",
        "the outside file is unchanged"
    );
    assert_eq!(fs::read_to_string(d.root.join("hl.txt")).expect("read"), "changed");
    fs::remove_file(d.root.join("hl.txt")).expect("remove");
    fs::hard_link(d.outside.join("target.txt"), d.root.join("hl.txt")).expect("hard link");
    assert_eq!(
        out(&exec, "edit_file", json!({"path": "hl.txt", "old": "original", "new": "edited"})).await,
        "edited hl.txt (1 replacement)"
    );
    assert_eq!(fs::read_to_string(d.outside.join("target.txt")).expect("read"), "original");
}

#[tokio::test]
async fn a_symlink_swapped_in_between_check_and_use_reaches_nothing() {
    let d = dirs();
    let sub = d.root.join("sub");
    let stop = Arc::new(AtomicBool::new(false));
    let flipper = {
        let (sub, outside, stop) = (sub.clone(), d.outside.clone(), stop.clone());
        std::thread::spawn(move || {
            while !stop.load(Ordering::Relaxed) {
                let _ = fs::remove_dir_all(&sub).or_else(|_| fs::remove_file(&sub));
                let _ = fs::create_dir(&sub);
                std::thread::yield_now();
                let _ = fs::remove_dir_all(&sub);
                let _ = std::os::unix::fs::symlink(&outside, &sub);
                std::thread::yield_now();
            }
        })
    };
    let exec = executor(&builder(&d.root, Mode::Coding).build().expect("workspace"));
    for i in 0..300 {
        let text = out(&exec, "write_file", json!({"path": "sub/f.txt", "content": format!("{i}")})).await;
        assert!(fs::read_dir(&d.outside).expect("list").next().is_none(), "call {i} wrote outside: {text}");
    }
    stop.store(true, Ordering::Relaxed);
    flipper.join().expect("flipper");
    assert!(fs::read_dir(&d.outside).expect("list").next().is_none());
}

#[tokio::test]
async fn a_path_longer_than_path_max_is_refused_and_creates_nothing() {
    let d = dirs();
    let exec = executor(&builder(&d.root, Mode::Coding).build().expect("workspace"));
    let long = format!("{}x.txt", "a/".repeat(2100));
    assert_eq!(
        out(&exec, "write_file", json!({"path": long, "content": "x"})).await,
        "Tool error: Path is too long: 4,205 bytes (limit 4,096 bytes)."
    );
    assert_eq!(
        out(&exec, "read_file", json!({"path": long})).await,
        "Tool error: Path is too long: 4,205 bytes (limit 4,096 bytes)."
    );
    // Just under the limit, a name over NAME_MAX fails in the kernel, as data.
    let name = "n".repeat(300);
    let text = out(&exec, "write_file", json!({"path": name, "content": "x"})).await;
    assert!(text.starts_with("Tool error: "), "{text}");
    assert_eq!(fs::read_dir(&d.root).expect("list").count(), 0, "nothing was created");
}
