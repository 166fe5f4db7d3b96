//! The kernel confinement of MCP servers started as commands (docs/mcp.md,
//! "The sandbox of a command server"): npm's filesystem server told to
//! serve `/` still reads and writes only what its `sandbox` grants; a
//! confined server reaches no loopback listener unless granted the network;
//! a stopped server takes its grandchildren and its working directory with
//! it; `mode = "off"` runs unconfined and says so; bad tables are refused.

use super::{Case, calls, completed, output, stderr};
use crate::mcp::root;
use lovia_tests::parts::{self, Part};
use serde_json::{Value, json};
use std::io::{ErrorKind, Read};
use std::net::TcpListener;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

/// npm's `mcp-server-filesystem` (tests/mcp-fs, pinned by its lockfile);
/// `None` when the `mcp-fs` part is opted out.
fn filesystem_server() -> Option<PathBuf> {
    parts::require(Part::McpFs, || {
        let bin = root().join("tests/mcp-fs/node_modules/.bin/mcp-server-filesystem");
        if !bin.exists() {
            return Err("no tests/mcp-fs/node_modules (cd tests/mcp-fs && npm ci)".into());
        }
        if !Command::new("node").arg("--version").output().is_ok_and(|o| o.status.success()) {
            return Err("no node on PATH".into());
        }
        Ok(bin)
    })
}

/// The address space the filesystem server gets: it starts under 2 GiB,
/// not under the default 1 GiB.
const NODE_MEMORY: u64 = 4 << 30;

/// Two directories side by side: `granted` (holding `inside.txt` and
/// `writable.txt`) and `outside` (holding `outside.txt` and `target.txt`).
struct Tree {
    _dir: tempfile::TempDir,
    granted: PathBuf,
    outside: PathBuf,
}

impl Tree {
    fn new() -> Self {
        let dir = tempfile::tempdir().expect("tempdir");
        let (granted, outside) = (dir.path().join("granted"), dir.path().join("outside"));
        std::fs::create_dir(&granted).expect("granted");
        std::fs::create_dir(&outside).expect("outside");
        std::fs::write(granted.join("inside.txt"), "the inside text").expect("inside");
        std::fs::write(granted.join("writable.txt"), "old").expect("writable");
        std::fs::write(outside.join("outside.txt"), "the outside text").expect("outside");
        std::fs::write(outside.join("target.txt"), "untouched").expect("target");
        Self { _dir: dir, granted, outside }
    }

    /// The filesystem server with `/` as its own allowed directory, and
    /// `sandbox` as its sandbox table.
    fn servers(&self, bin: &Path, sandbox: &str) -> String {
        format!(
            "[[mcp_servers]]\nname = \"fs\"\ncommand = {:?}\nargs = [\"/\"]\nsandbox = {sandbox}\n",
            bin.display().to_string()
        )
    }

    /// Reads and writes inside and outside the grant in one turn. The
    /// writes overwrite existing files: to make a new one, the server reads
    /// every directory from its allowed root (`/`) down, and the kernel
    /// refuses it `/` already (`new_out`).
    fn turns(&self) -> Value {
        let p = |path: PathBuf| path.display().to_string();
        json!([
            calls(&[
                ("read_in", "fs__read_text_file", json!({"path": p(self.granted.join("inside.txt"))})),
                ("list_in", "fs__list_directory", json!({"path": p(self.granted.clone())})),
                ("write_in", "fs__write_file", json!({"path": p(self.granted.join("writable.txt")), "content": "made"})),
                ("read_out", "fs__read_text_file", json!({"path": p(self.outside.join("outside.txt"))})),
                ("write_out", "fs__write_file", json!({"path": p(self.outside.join("target.txt")), "content": "x"})),
                ("new_out", "fs__write_file", json!({"path": p(self.outside.join("escaped.txt")), "content": "x"})),
            ]),
            {"text": "done"}
        ])
    }
}

#[test]
fn server_filesystem_serving_root_reads_and_writes_only_its_grant() {
    let Some(bin) = filesystem_server() else { return };
    let Some(case) = Case::new() else { return };
    let tree = Tree::new();
    // node 20 with this server dies of "JavaScript heap out of memory"
    // under the default 1 GiB of address space (docs/mcp.md).
    let sandbox =
        format!("{{ read_write = [{:?}], memory_bytes = {NODE_MEMORY} }}", tree.granted.display().to_string());
    let (o, events) = case.run(&tree.servers(&bin, &sandbox), tree.turns(), &[]);
    completed(&o, &events);
    assert_eq!(output(&events, "read_in"), "the inside text");
    assert!(output(&events, "list_in").contains("[FILE] inside.txt"), "{}", output(&events, "list_in"));
    let made = std::fs::read_to_string(tree.granted.join("writable.txt"));
    assert_eq!(made.ok().as_deref(), Some("made"), "{}", output(&events, "write_in"));
    // The server itself allows `/`: the kernel refused.
    for id in ["read_out", "write_out", "new_out"] {
        let out = output(&events, id);
        assert!(out.contains("EACCES") || out.contains("permission denied"), "{id}: {out}");
        assert!(!out.contains("the outside text"), "{id}: {out}");
    }
    assert_eq!(std::fs::read_to_string(tree.outside.join("target.txt")).expect("target"), "untouched");
    assert!(!tree.outside.join("escaped.txt").exists(), "nothing was written outside the grant");
    let mut left: Vec<_> =
        std::fs::read_dir(&tree.outside).expect("outside").map(|e| e.expect("entry").file_name()).collect();
    left.sort();
    assert_eq!(left, ["outside.txt", "target.txt"]);
    assert!(!stderr(&o).contains("runs unconfined"), "{}", stderr(&o));
}

#[test]
fn with_the_sandbox_off_the_same_server_reaches_outside_and_a_warning_names_it() {
    let Some(bin) = filesystem_server() else { return };
    let Some(case) = Case::new() else { return };
    let tree = Tree::new();
    let sandbox = format!("{{ mode = \"off\", read_write = [{:?}] }}", tree.granted.display().to_string());
    let (o, events) = case.run(&tree.servers(&bin, &sandbox), tree.turns(), &[]);
    completed(&o, &events);
    assert_eq!(output(&events, "read_in"), "the inside text");
    assert_eq!(output(&events, "read_out"), "the outside text");
    assert_eq!(std::fs::read_to_string(tree.granted.join("writable.txt")).expect("inside"), "made");
    assert_eq!(std::fs::read_to_string(tree.outside.join("target.txt")).expect("overwritten outside"), "x");
    assert_eq!(std::fs::read_to_string(tree.outside.join("escaped.txt")).expect("made outside"), "x");
    let err = stderr(&o);
    assert!(err.contains("mcp server 'fs' runs unconfined (sandbox.mode = \"off\")"), "{err}");
}

/// The output of `net__connect` to a fresh loopback listener, and what the
/// listener received.
fn connect(case: &Case, sandbox: &str) -> (String, Option<Vec<u8>>) {
    let listener = TcpListener::bind("127.0.0.1:0").expect("listen");
    let port = listener.local_addr().expect("addr").port();
    let servers = case.server_with("net", "confined_server.py", sandbox, "");
    let (o, events) =
        case.run(&servers, json!([calls(&[("c", "net__connect", json!({"port": port}))]), {"text": "done"}]), &[]);
    completed(&o, &events);
    // The run is over: a connection that was made waits in the backlog.
    listener.set_nonblocking(true).expect("nonblocking");
    let arrived = match listener.accept() {
        Ok((mut stream, _)) => {
            stream.set_nonblocking(false).expect("blocking");
            stream.set_read_timeout(Some(Duration::from_secs(5))).expect("timeout");
            let mut got = Vec::new();
            stream.read_to_end(&mut got).expect("read");
            Some(got)
        }
        Err(e) if e.kind() == ErrorKind::WouldBlock => None,
        Err(e) => panic!("accept: {e}"),
    };
    (output(&events, "c").to_owned(), arrived)
}

#[test]
fn a_confined_server_reaches_no_loopback_listener_unless_granted_the_network() {
    let Some(case) = Case::new() else { return };
    let (out, arrived) = connect(&case, &case.sandbox(""));
    assert!(out.starts_with("refused: "), "{out}");
    assert_eq!(arrived, None, "nothing reached the listener");
    let (out, arrived) = connect(&case, &case.sandbox(", network = true"));
    assert_eq!(out, "sent");
    assert_eq!(arrived.as_deref(), Some(&b"hello"[..]), "with the network granted it arrives");
}

#[test]
fn a_stopped_server_takes_its_grandchildren_and_working_directory_with_it() {
    let Some(case) = Case::new() else { return };
    let elsewhere = tempfile::tempdir().expect("tempdir");
    let escaped = elsewhere.path().join("escaped.txt");
    let turns = json!([
        calls(&[
            ("spawn", "c__spawn", json!({})),
            ("in", "c__write", json!({"path": "in-its-own-directory.txt"})),
            ("out", "c__write", json!({"path": escaped.display().to_string()})),
            ("etc", "c__write", json!({"path": "/etc/lovia-escaped"})),
        ]),
        {"text": "done"}
    ]);
    let (o, events) = case.run(&case.server_with("c", "confined_server.py", &case.sandbox(""), ""), turns, &[]);
    completed(&o, &events);
    let spawned: Value = serde_json::from_str(output(&events, "spawn")).expect("spawn answer");
    let cwd = PathBuf::from(spawned["cwd"].as_str().expect("cwd"));
    assert_eq!(spawned["tmpdir"].as_str(), cwd.to_str(), "its working directory is its TMPDIR");
    let name = cwd.file_name().and_then(|n| n.to_str()).unwrap_or_default();
    assert!(name.starts_with("lovia-") && name.contains("-mcp-c-"), "{cwd:?}");
    assert_eq!(output(&events, "in"), "wrote", "its own directory is writable");
    for id in ["out", "etc"] {
        assert!(output(&events, id).starts_with("refused: "), "{id}: {}", output(&events, id));
    }
    assert!(!escaped.exists() && !Path::new("/etc/lovia-escaped").exists(), "nothing was written outside");
    // The grandchild ignores SIGTERM; the server's process group is killed.
    let duration = spawned["sleep"].as_str().expect("its sleep");
    let deadline = Instant::now() + Duration::from_secs(5);
    while !lovia_tests::processes::running(&["sleep", duration]).is_empty() {
        assert!(Instant::now() < deadline, "the server's grandchild (sleep {duration}) outlived it");
        std::thread::sleep(Duration::from_millis(50));
    }
    assert!(!cwd.exists(), "its working directory {cwd:?} was removed");
}

#[test]
fn a_bad_sandbox_key_or_value_is_refused_naming_the_allowed_ones() {
    let Some(case) = Case::new() else { return };
    for (sandbox, says) in [
        ("{ netwrk = true }", &["unknown field `netwrk`", "read_only", "read_write", "network", "mode"][..]),
        ("{ mode = \"sometimes\" }", &["unknown variant `sometimes`", "`required`", "`off`"][..]),
        ("{ read_only = [\"data\"] }", &["`sandbox.read_only` names the relative path \"data\""][..]),
        ("{ processes = 0 }", &["`sandbox.processes` is 0"][..]),
    ] {
        let (o, _) =
            case.run(&case.server_with("src", "source_server.py", sandbox, ""), json!([{"text": "done"}]), &[]);
        assert_eq!(o.status.code(), Some(2), "{sandbox}: {}", stderr(&o));
        let err = stderr(&o);
        for s in says {
            assert!(err.contains(s), "{sandbox}: {s:?} in {err}");
        }
    }
    assert!(case.calls().is_empty(), "no server started");
}

#[test]
fn a_sandbox_that_cannot_be_installed_stops_the_start_with_the_reason() {
    let Some(case) = Case::new() else { return };
    let sandbox = "{ read_only = [\"/nonexistent-lovia-grant\"] }";
    let (o, _) = case.run(&case.server_with("src", "source_server.py", sandbox, ""), json!([{"text": "done"}]), &[]);
    assert_ne!(o.status.code(), Some(0));
    let err = stderr(&o);
    assert!(
        err.contains(
            "mcp server 'src': not started, because it cannot be confined: cannot grant /nonexistent-lovia-grant"
        ),
        "{err}"
    );
    assert!(case.calls().is_empty(), "the server never ran");
}

/// `lovia mcp` started as a confined MCP server of another lovia works
/// under the default sandbox (its 1 GiB of address space among them): the
/// engine cannot map its instance pool there, and its fallback reserves
/// only what a plugin may use (issue 46: every load failed with `Cannot
/// allocate memory`, and the hint blamed the plugin's info()/tools()).
#[test]
fn lovia_mcp_serves_as_a_confined_server_of_another_lovia() {
    let dir = tempfile::tempdir().expect("tempdir");
    let docs = PathBuf::from(lovia_tests::fixtures::DOCS);
    let fixtures = docs.parent().expect("the fixtures' directory");
    let servers = format!(
        "[[mcp_servers]]\nname = \"inner\"\ncommand = {:?}\nargs = [\"--no-cache\", \"mcp\", {:?}, {:?}]\nsandbox = {{ read_only = [{:?}] }}\n",
        env!("CARGO_BIN_EXE_lovia"),
        docs.display().to_string(),
        lovia_tests::fixtures::HOSTILE,
        fixtures.display().to_string(),
    );
    let servers_path = dir.path().join("servers.toml");
    std::fs::write(&servers_path, servers).expect("servers");
    // One call per turn: the inner server's calls share its 1 GiB of
    // address space, and a search started beside the bomb once failed to
    // map its instance (ENOMEM) in CI; what this test checks is each call
    // on its own (docs/mcp.md, "Not done yet").
    let turns = json!({"turns": [
        calls(&[("s", "inner__search_docs", json!({"query": "timeouts"}))]),
        calls(&[("m", "inner__memory_bomb", json!({}))]),
        {"text": "done"}
    ]});
    let script = dir.path().join("script.json");
    std::fs::write(&script, turns.to_string()).expect("script");
    let o = Command::new(env!("CARGO_BIN_EXE_lovia"))
        .args(["--no-cache", "run", "--mcp-servers"])
        .arg(&servers_path)
        .arg("--script")
        .arg(&script)
        .output()
        .expect("lovia run");
    let events: Vec<Value> = String::from_utf8_lossy(&o.stdout)
        .lines()
        .map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("{l}: {e}")))
        .collect();
    completed(&o, &events);
    assert_eq!(output(&events, "s"), "[\"Timeouts\"]", "{}", stderr(&o));
    // The memory limit still holds in the fallback, at the limit the pool would have had.
    assert_eq!(output(&events, "m"), "[tool error] Tool error: out of memory (limit 64 MiB)", "{}", stderr(&o));
}
