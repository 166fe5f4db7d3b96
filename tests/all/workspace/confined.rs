//! The shell under kernel confinement (`ShellSandbox::Required`, the
//! default; docs/workspace.md, "The shell"): a command the policy allows
//! (each ask approved) still cannot write or read outside the root, reach
//! the network, outlive `kill_process`, or fork without bound. The tests
//! run as root, so nothing here holds by file permissions: each refusal is
//! the kernel's, and the same command run unconfined shows it would work.

use super::shell::started;
use super::{dirs, executor, out};
use lovia_workspace::{Mode, ShellGrants, ShellSandbox, Workspace};
use serde_json::json;
use std::time::{Duration, Instant};

/// A trusted workspace (the shell allowed, writes outside asked and
/// approved by these tests' consumer) with the shell confined or not.
fn workspace(root: &std::path::Path, sandbox: ShellSandbox) -> Workspace {
    Workspace::builder(root).mode(Mode::Trusted).shell_sandbox(sandbox).build().expect("workspace")
}

#[tokio::test]
async fn the_shell_is_offered_confined_by_default() {
    let d = dirs();
    let workspace = Workspace::builder(&d.root).mode(Mode::Trusted).build().expect("workspace");
    assert_eq!(workspace.unavailable_reason(), None, "this kernel confines");
    let names: Vec<String> = workspace.tools().iter().map(|t| t.name().to_owned()).collect();
    assert!(names.iter().any(|n| n == "shell"), "{names:?}");
    let exec = executor(&workspace);
    assert_eq!(
        out(&exec, "shell", json!({"command": "echo ok > inside.txt && cat inside.txt"})).await,
        "exit code: 0\nok"
    );
    assert_eq!(std::fs::read_to_string(d.root.join("inside.txt")).expect("written"), "ok\n");
}

#[tokio::test]
async fn a_confined_command_writes_and_reads_nothing_outside_its_root() {
    let d = dirs();
    let secret = d.outside.join("secret.txt");
    std::fs::write(&secret, "the outside secret").expect("secret");
    let etc = format!("/etc/lovia-ws-{}", std::process::id());
    let ssh = format!("/root/.ssh/lovia-ws-{}", std::process::id());
    let escape = format!(
        "echo x > {etc}; echo x > {ssh}; echo x > {out}/written.txt; ln -s /etc {root}/etc-link; \
         echo x > {root}/etc-link/lovia-ws-link; cat {secret}; cat /proc/self/root{secret}",
        out = d.outside.display(),
        root = d.root.display(),
        secret = secret.display(),
    );
    // Unconfined, the same line writes outside and reads the secret: the
    // confined run below is refused by the kernel, not by permissions.
    let free = executor(&workspace(&d.root, ShellSandbox::Off));
    let unconfined = out(&free, "shell", json!({"command": escape})).await;
    assert!(unconfined.contains("the outside secret"), "{unconfined}");
    assert!(d.outside.join("written.txt").exists());
    for p in [etc.clone(), ssh.clone()] {
        let _ = std::fs::remove_file(&p);
    }
    let _ = std::fs::remove_file("/etc/lovia-ws-link");
    std::fs::remove_file(d.outside.join("written.txt")).expect("cleanup");
    std::fs::remove_file(d.root.join("etc-link")).expect("cleanup");

    let confined = executor(&workspace(&d.root, ShellSandbox::Required));
    let text = out(&confined, "shell", json!({"command": escape})).await;
    assert!(!text.contains("the outside secret"), "{text}");
    assert!(text.starts_with("exit code: 1\n"), "{text}");
    for p in [etc.as_str(), ssh.as_str(), "/etc/lovia-ws-link"] {
        assert!(!std::path::Path::new(p).exists(), "{p} was written: {text}");
    }
    assert!(!d.outside.join("written.txt").exists(), "{text}");
    assert_eq!(std::fs::read_to_string(&secret).expect("secret"), "the outside secret");
}

/// A loopback TCP listener and UDP socket of the test, and a command line
/// that connects to the one and sends a datagram to the other.
struct Listeners {
    tcp: std::net::TcpListener,
    udp: std::net::UdpSocket,
    line: String,
}

impl Listeners {
    fn new() -> Self {
        let tcp = std::net::TcpListener::bind("127.0.0.1:0").expect("tcp");
        tcp.set_nonblocking(true).expect("nonblocking");
        let udp = std::net::UdpSocket::bind("127.0.0.1:0").expect("udp");
        udp.set_nonblocking(true).expect("nonblocking");
        let line = format!(
            "python3 -c \"import socket; u = socket.socket(socket.AF_INET, socket.SOCK_DGRAM); \
             u.sendto(b'x', ('127.0.0.1', {udp})); socket.create_connection(('127.0.0.1', {tcp}), 2)\"",
            tcp = tcp.local_addr().expect("addr").port(),
            udp = udp.local_addr().expect("addr").port(),
        );
        Listeners { tcp, udp, line }
    }

    /// Whether a connection and a datagram arrived since the last look.
    fn arrived(&self) -> (bool, bool) {
        let mut buf = [0u8; 8];
        (self.tcp.accept().is_ok(), self.udp.recv(&mut buf).is_ok())
    }
}

/// A loopback TCP listener and UDP socket; a confined command can reach
/// neither, an unconfined one reaches both.
#[tokio::test]
async fn a_confined_command_opens_no_network_socket() {
    let d = dirs();
    let net = Listeners::new();
    let line = net.line.clone();
    let free = executor(&workspace(&d.root, ShellSandbox::Off));
    let unconfined = out(&free, "shell", json!({"command": line})).await;
    assert_eq!(net.arrived(), (true, true), "unconfined, both arrive: {unconfined}");

    let confined = executor(&workspace(&d.root, ShellSandbox::Required));
    let text = out(&confined, "shell", json!({"command": line})).await;
    assert!(text.contains("PermissionError") || text.contains("Operation not permitted"), "{text}");
    tokio::time::sleep(Duration::from_millis(200)).await;
    assert_eq!(net.arrived(), (false, false), "nothing arrives from the confined command: {text}");
}

/// Granted the network, the same confined command reaches both listeners;
/// granted a directory read-only, it reads there and still writes nothing.
#[tokio::test]
async fn a_confined_command_reaches_what_its_grants_name_and_no_more() {
    let d = dirs();
    let net = Listeners::new();
    let line = net.line.clone();
    let secret = d.outside.join("toolchain.txt");
    std::fs::write(&secret, "the granted file").expect("write");
    let granted = Workspace::builder(&d.root)
        .mode(Mode::Trusted)
        .shell_grants(ShellGrants::default().network(true).read_only(&d.outside))
        .build()
        .expect("workspace");
    let exec = executor(&granted);
    let text = out(&exec, "shell", json!({"command": line})).await;
    assert!(text.starts_with("exit code: 0"), "{text}");
    tokio::time::sleep(Duration::from_millis(200)).await;
    assert_eq!(net.arrived(), (true, true), "the TCP connect and the datagram arrive: {text}");

    let line = format!("cat {s}; echo changed > {s}", s = secret.display());
    let text = out(&exec, "shell", json!({"command": line})).await;
    assert!(text.contains("the granted file"), "read through the grant: {text}");
    assert!(text.starts_with("exit code: 1\n") || text.starts_with("exit code: 2\n"), "{text}");
    assert_eq!(std::fs::read_to_string(&secret).expect("secret"), "the granted file", "{text}");
}

#[tokio::test]
async fn kill_process_ends_a_confined_grandchild_that_ignores_sigterm() {
    let d = dirs();
    let exec = executor(&workspace(&d.root, ShellSandbox::Required));
    // Its pid inside its PID namespace means nothing here: it is found by
    // its command line.
    let duration = lovia_tests::processes::unique_sleep();
    let sleeper = ["sleep", duration.as_str()];
    let command = format!("trap '' TERM; sleep {duration} & echo $!; wait");
    let (id, _) = started(&out(&exec, "shell", json!({"command": command, "background": true})).await);
    let deadline = Instant::now() + Duration::from_secs(10);
    while lovia_tests::processes::running(&sleeper).is_empty() {
        assert!(Instant::now() < deadline, "the grandchild did not start");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let killed = out(&exec, "kill_process", json!({"process_id": id})).await;
    assert!(killed.starts_with(&format!("process {id}: killed")), "{killed}");
    assert!(lovia_tests::processes::gone(&sleeper).await, "the grandchild outlived kill_process");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_fork_bomb_ends_at_the_process_limit_and_the_host_keeps_answering() {
    let d = dirs();
    let exec = executor(&workspace(&d.root, ShellSandbox::Required));
    let ticks = std::sync::Arc::new(std::sync::atomic::AtomicU32::new(0));
    let counting = ticks.clone();
    let ticker = tokio::spawn(async move {
        loop {
            tokio::time::sleep(Duration::from_millis(50)).await;
            counting.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
        }
    });
    let started = Instant::now();
    let text =
        out(&exec, "shell", json!({"command": "b() { b | b & }; b; sleep 2; echo survived", "timeout": 8})).await;
    let took = started.elapsed();
    ticker.abort();
    assert!(took < Duration::from_secs(20), "the call took {took:?}: {text}");
    // The host kept answering: the 50 ms timer ticked through the bomb.
    let ticked = ticks.load(std::sync::atomic::Ordering::SeqCst);
    assert!(ticked as f64 >= took.as_secs_f64() * 5.0, "{ticked} ticks in {took:?}");
    // Nothing of the bomb is left: no process works in this test's root.
    tokio::time::sleep(Duration::from_millis(200)).await;
    let leftover = std::fs::read_dir("/proc")
        .expect("proc")
        .flatten()
        .filter(|entry| std::fs::read_link(entry.path().join("cwd")).is_ok_and(|cwd| cwd == d.root))
        .count();
    assert_eq!(leftover, 0, "processes of the bomb are left: {text}");
}

/// What users do in a workspace still works under the confinement that
/// holds root: a Python virtual environment, a git repository with a
/// commit, `chmod +x` and deleting, all in the root; the files belong to
/// the host's own user, as files it made itself would.
#[tokio::test]
async fn a_venv_and_a_git_commit_work_in_a_confined_root() {
    let d = dirs();
    let exec = executor(&workspace(&d.root, ShellSandbox::Required));
    let line = "python3 -m venv --without-pip .venv && .venv/bin/python -c 'import sys; print(sys.prefix != sys.base_prefix)' \
        && git init -q . && echo 'print(1)' > main.py && printf '#!/bin/sh\\necho run\\n' > run.sh && chmod +x run.sh \
        && ./run.sh && git add main.py run.sh && git -c user.name=lovia -c user.email=lovia@example.invalid commit -qm first \
        && git log --oneline | wc -l && touch gone.txt && rm gone.txt";
    let text = out(&exec, "shell", json!({"command": line, "timeout": 120})).await;
    assert_eq!(text, "exit code: 0\nTrue\nrun\n1", "{text}");
    use std::os::unix::fs::{MetadataExt, PermissionsExt};
    // The test process made the root: its owner is the host's user.
    let uid = std::fs::metadata(&d.root).expect("root").uid();
    for made in [".venv/bin/python", ".git/HEAD", "main.py", "run.sh"] {
        let meta = std::fs::symlink_metadata(d.root.join(made)).expect(made);
        assert_eq!(meta.uid(), uid, "{made} belongs to the host's user");
    }
    let mode = std::fs::metadata(d.root.join("run.sh")).expect("run.sh").permissions().mode();
    assert_eq!(mode & 0o111, 0o111, "chmod +x held: {mode:o}");
}

/// Round two of the confinement, item 5: a tenant's byte bound holds while
/// a command runs. The command's temporary directory lives under the
/// bounded directory, and a command that keeps writing (each file under the
/// file-size limit) is stopped soon after the bound is passed.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_storage_bound_holds_while_a_command_runs() {
    let d = dirs();
    let tenant = d.root.parent().expect("the root's parent").to_path_buf();
    let bounds = lovia_workspace::SharedBounds::new(&tenant, 2 << 20, 10_000, 2);
    let workspace = Workspace::builder(&d.root)
        .mode(Mode::Trusted)
        .shell_sandbox(ShellSandbox::Required)
        .shared_bounds(bounds)
        .build()
        .expect("workspace");
    let exec = executor(&workspace);
    let tmp = out(&exec, "shell", json!({"command": "echo \"$TMPDIR\""})).await;
    assert!(tmp.starts_with(&format!("exit code: 0\n{}/.lovia-tmp/lovia-", tenant.display())), "{tmp}");
    let line = "for i in $(seq 40); do head -c 500000 /dev/urandom > \"$TMPDIR/f$i\"; sleep 0.1; done; echo finished";
    let text = out(&exec, "shell", json!({"command": line})).await;
    assert_eq!(
        text,
        "command stopped\n[this account's workspaces passed their storage bound of 2,097,152 bytes while it ran; remove files, then run it again]"
    );
}
