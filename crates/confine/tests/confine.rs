//! Real processes under real confinement, run as whoever runs the tests
//! (root on the CI machine: every promise here must hold for a root child).
//! Each test first shows that what it forbids works without confinement, or
//! asserts something that could only be false without it.

use anyhow::{Context, Result, bail, ensure};
use lovia_confine::{Confinement, Limits, Prepared, ProcessLimit, kill_group};
use std::io::ErrorKind;
use std::net::{TcpListener, UdpSocket};
use std::os::unix::process::ExitStatusExt;
use std::path::{Path, PathBuf};
use std::process::{ExitStatus, Stdio};
use std::time::{Duration, Instant};
use tokio::io::{AsyncBufReadExt, BufReader};
use tokio::process::Command;

const PYTHON: &str = "/usr/bin/python3";

/// What a shell run printed and how it ended.
struct Ran {
    status: ExitStatus,
    stdout: String,
    stderr: String,
}

impl std::fmt::Debug for Ran {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{:?}, stdout {:?}, stderr {:?}", self.status, self.stdout, self.stderr)
    }
}

fn shell(script: &str) -> Command {
    let mut cmd = Command::new("/bin/sh");
    cmd.arg("-c")
        .arg(script)
        .env_clear()
        .env("PATH", "/usr/bin:/bin:/usr/sbin:/sbin")
        .env("HOME", "/root")
        .current_dir("/")
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .kill_on_drop(true);
    cmd
}

/// Runs `script` under `confinement` (or unconfined, in a process group of
/// its own) and waits for it, at most 60 s.
async fn run(confinement: Option<&Confinement>, script: &str) -> Result<Ran> {
    let mut cmd = shell(script);
    let _prepared = match confinement {
        Some(confinement) => Some(confinement.apply(&mut cmd)?),
        None => {
            cmd.process_group(0);
            None
        }
    };
    let child = cmd.spawn()?;
    let output = tokio::time::timeout(Duration::from_secs(60), child.wait_with_output())
        .await
        .context("the command did not end within 60 s")??;
    Ok(Ran {
        status: output.status,
        stdout: String::from_utf8_lossy(&output.stdout).into_owned(),
        stderr: String::from_utf8_lossy(&output.stderr).into_owned(),
    })
}

async fn confined(confinement: &Confinement, script: &str) -> Result<Ran> {
    run(Some(confinement), script).await
}

async fn unconfined(script: &str) -> Result<Ran> {
    run(None, script).await
}

/// The kernel must confine: a machine that cannot fails these tests, it
/// does not skip them.
fn require_support() {
    if let Err(e) = Confinement::check_supported() {
        panic!("this kernel cannot confine a process: {e}");
    }
}

/// The fork bomb and the cgroup tests need the pids cgroup: without it a
/// root fork bomb would take the machine down.
fn require_pids_cgroup() {
    if let ProcessLimit::Rlimit { reason } = Confinement::process_limit() {
        panic!("no pids cgroup usable by this process, the process limit would not hold for root: {reason}");
    }
}

fn tag() -> String {
    format!("lovia-confine-test-{}-{}", std::process::id(), rand_suffix())
}

fn rand_suffix() -> u128 {
    std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map(|d| d.as_nanos()).unwrap_or(0)
}

fn s(path: &Path) -> &str {
    path.to_str().expect("test paths are UTF-8")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn writes_land_only_inside_the_read_write_grant() -> Result<()> {
    require_support();
    let grant = tempfile::tempdir()?;
    let outside = tempfile::tempdir()?;
    let (g, o) = (s(grant.path()), s(outside.path()));
    let existing = outside.path().join("existing");
    std::fs::write(&existing, "original")?;

    // Unconfined, the same writes outside the grant succeed.
    let ran = unconfined(&format!("echo x > {o}/plain && echo x > /proc/self/root{o}/via-proc")).await?;
    ensure!(ran.status.success(), "unconfined: {ran:?}");
    ensure!(outside.path().join("plain").exists() && outside.path().join("via-proc").exists());
    std::fs::remove_file(outside.path().join("plain"))?;
    std::fs::remove_file(outside.path().join("via-proc"))?;

    let confinement = Confinement::new().read_write(grant.path());
    let ran = confined(
        &confinement,
        &format!(
            "echo ok > {g}/inside && mkdir {g}/sub && echo ok > {g}/sub/f && mv {g}/sub/f {g}/moved && rm {g}/moved"
        ),
    )
    .await?;
    ensure!(ran.status.success(), "inside the grant: {ran:?}");
    ensure!(std::fs::read_to_string(grant.path().join("inside"))? == "ok\n");

    // A symlink inside the grant to a path outside it.
    std::os::unix::fs::symlink(outside.path().join("via-link"), grant.path().join("link"))?;
    std::os::unix::fs::symlink(&existing, grant.path().join("link-existing"))?;
    let t = tag();
    let ssh_before = Path::new("/root/.ssh").exists();
    let attempts = [
        format!("echo x > /etc/{t}"),
        format!("mkdir -p \"$HOME/.ssh\" && echo x > \"$HOME/.ssh/{t}\""),
        format!("echo x > /tmp/{t}"),
        format!("echo x > {o}/plain"),
        format!("echo x > /proc/self/root{o}/via-proc"),
        format!("echo x > /proc/self/root/etc/{t}"),
        format!("echo x > {g}/link"),
        format!("echo x >> {g}/link-existing"),
        format!("ln {} {g}/hard", s(&existing)),
        format!("mv {g}/inside {o}/moved-out"),
        format!("cp {g}/inside {o}/copied-out"),
        format!("touch {o}/touched"),
    ];
    for attempt in &attempts {
        let ran = confined(&confinement, attempt).await?;
        ensure!(!ran.status.success(), "`{attempt}` succeeded under confinement: {ran:?}");
    }
    // Nothing was created or changed anywhere outside the grant.
    for path in [
        PathBuf::from(format!("/etc/{t}")),
        PathBuf::from(format!("/root/.ssh/{t}")),
        PathBuf::from(format!("/tmp/{t}")),
        outside.path().join("plain"),
        outside.path().join("via-proc"),
        outside.path().join("via-link"),
        outside.path().join("moved-out"),
        outside.path().join("copied-out"),
        outside.path().join("touched"),
        grant.path().join("hard"),
    ] {
        ensure!(!path.exists(), "{} exists", path.display());
    }
    ensure!(Path::new("/root/.ssh").exists() == ssh_before, "/root/.ssh was created");
    ensure!(std::fs::read_to_string(&existing)? == "original");
    ensure!(grant.path().join("inside").exists(), "the file moved out of the grant");
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn reads_reach_only_system_paths_and_grants() -> Result<()> {
    require_support();
    let outside = tempfile::tempdir()?;
    let shared = tempfile::tempdir()?;
    let secret = outside.path().join("secret");
    std::fs::write(&secret, "the-secret-text")?;
    std::fs::write(shared.path().join("notes"), "shared-notes")?;
    let (sec, sh) = (s(&secret), s(shared.path()));

    let read_secret =
        format!("cat {sec}; cat /proc/self/root{sec}; cat /proc/$PPID/environ | tr '\\0' '\\n' | grep -c PATH=");
    let ran = unconfined(&read_secret).await?;
    ensure!(ran.stdout.matches("the-secret-text").count() == 2, "unconfined: {ran:?}");
    ensure!(ran.stdout.lines().last() != Some("0"), "unconfined reads its parent's environment: {ran:?}");

    let confinement = Confinement::new().read_only(shared.path());
    let ran = confined(&confinement, &read_secret).await?;
    ensure!(!ran.stdout.contains("the-secret-text"), "confined: {ran:?}");
    ensure!(ran.stderr.matches("Permission denied").count() >= 3, "confined: {ran:?}");
    ensure!(ran.stdout.lines().last() == Some("0"), "confined reads its parent's environment: {ran:?}");

    // /etc/shadow is root's to read, but not world-readable: not granted.
    if Path::new("/etc/shadow").exists() {
        ensure!(unconfined("cat /etc/shadow").await?.status.success());
        let ran = confined(&confinement, "cat /etc/shadow").await?;
        ensure!(!ran.status.success() && ran.stdout.is_empty(), "{ran:?}");
    }

    // What is granted works: system tools, world-readable /etc, the
    // read-only grant (but not writing to it).
    let ran = confined(
        &confinement,
        &format!(
            "ls /usr/bin >/dev/null && grep -q root /etc/passwd && grep -q MemTotal /proc/meminfo && cat {sh}/notes \
             && {PYTHON} -c 'print(6*7)'"
        ),
    )
    .await?;
    ensure!(ran.status.success(), "{ran:?}");
    ensure!(ran.stdout == "shared-notes42\n", "{ran:?}");
    let ran = confined(&confinement, &format!("echo x > {sh}/notes")).await?;
    ensure!(!ran.status.success());
    ensure!(std::fs::read_to_string(shared.path().join("notes"))? == "shared-notes");
    Ok(())
}

/// Connects to a TCP port from Python, sends a UDP datagram to another, and
/// tries the other socket families; prints one word per attempt.
fn network_probe(tcp_port: u16, udp_port: u16) -> String {
    format!(
        r#"{PYTHON} - <<'EOF'
import socket
def attempt(name, f):
    try:
        f()
        print(name + ":ok")
    except OSError as e:
        print(name + ":refused:" + type(e).__name__)
def tcp():
    socket.create_connection(("127.0.0.1", {tcp_port}), timeout=5).sendall(b"hello")
def udp():
    socket.socket(socket.AF_INET, socket.SOCK_DGRAM).sendto(b"datagram", ("127.0.0.1", {udp_port}))
def udp6():
    socket.socket(socket.AF_INET6, socket.SOCK_DGRAM).close()
def packet():
    socket.socket(socket.AF_PACKET, socket.SOCK_RAW).close()
attempt("tcp", tcp)
attempt("udp", udp)
attempt("udp6", udp6)
attempt("packet", packet)
EOF"#
    )
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn no_network_unless_granted() -> Result<()> {
    require_support();
    let tcp = TcpListener::bind("127.0.0.1:0")?;
    tcp.set_nonblocking(true)?;
    let udp = UdpSocket::bind("127.0.0.1:0")?;
    udp.set_read_timeout(Some(Duration::from_millis(500)))?;
    let probe = network_probe(tcp.local_addr()?.port(), udp.local_addr()?.port());

    let ran = confined(&Confinement::new(), &probe).await?;
    for line in ["tcp:refused", "udp:refused", "udp6:refused", "packet:refused"] {
        ensure!(ran.stdout.contains(line), "missing {line}: {ran:?}");
    }
    ensure!(matches!(tcp.accept(), Err(e) if e.kind() == ErrorKind::WouldBlock), "a TCP connection arrived");
    let mut buf = [0u8; 64];
    ensure!(udp.recv_from(&mut buf).is_err(), "a UDP datagram arrived");

    // The same probe with the network granted reaches both sockets.
    let ran = confined(&Confinement::new().network(true), &probe).await?;
    ensure!(ran.stdout.contains("tcp:ok") && ran.stdout.contains("udp:ok"), "{ran:?}");
    ensure!(ran.stdout.contains("packet:refused"), "packet sockets stay closed: {ran:?}");
    let deadline = Instant::now() + Duration::from_secs(5);
    loop {
        match tcp.accept() {
            Ok(_) => break,
            Err(e) if e.kind() == ErrorKind::WouldBlock && Instant::now() < deadline => {
                tokio::time::sleep(Duration::from_millis(20)).await
            }
            Err(e) => bail!("no TCP connection with the network granted: {e}"),
        }
    }
    let (n, _) = udp.recv_from(&mut buf)?;
    ensure!(&buf[..n] == b"datagram");
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn abstract_unix_sockets_outside_the_child_are_out_of_reach() -> Result<()> {
    use std::os::linux::net::SocketAddrExt;
    require_support();
    let name = tag();
    let addr = std::os::unix::net::SocketAddr::from_abstract_name(name.as_bytes())?;
    let listener = std::os::unix::net::UnixListener::bind_addr(&addr)?;
    listener.set_nonblocking(true)?;
    let probe = format!(
        "{PYTHON} -c 'import socket; s = socket.socket(socket.AF_UNIX); s.connect(\"\\0{name}\"); print(\"connected\")'"
    );
    let ran = unconfined(&probe).await?;
    ensure!(ran.stdout.contains("connected"), "unconfined: {ran:?}");
    ensure!(listener.accept().is_ok());
    let ran = confined(&Confinement::new(), &probe).await?;
    ensure!(!ran.stdout.contains("connected") && !ran.status.success(), "confined: {ran:?}");
    ensure!(matches!(listener.accept(), Err(e) if e.kind() == ErrorKind::WouldBlock));
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn root_powers_that_reach_past_the_child_are_refused() -> Result<()> {
    require_support();
    // Setting the host name to itself, and raising a limit: root may do both.
    let script = format!(
        r#"{PYTHON} - <<'EOF'
import resource, socket
def attempt(name, f):
    try:
        f()
        print(name + ":ok")
    except (OSError, ValueError):
        # Python reports a refused setrlimit as ValueError.
        print(name + ":refused")
attempt("sethostname", lambda: socket.sethostname(socket.gethostname()))
attempt("setrlimit", lambda: resource.setrlimit(resource.RLIMIT_CPU, (resource.RLIM_INFINITY, resource.RLIM_INFINITY)))
EOF"#
    );
    let ran = unconfined(&script).await?;
    ensure!(ran.stdout.contains("sethostname:ok") && ran.stdout.contains("setrlimit:ok"), "unconfined: {ran:?}");
    // A signal to a process outside the child's tree (its parent, this test).
    let signal = "kill -0 $PPID && echo signalled";
    ensure!(unconfined(signal).await?.stdout.contains("signalled"));
    let ran = confined(&Confinement::new(), signal).await?;
    ensure!(!ran.stdout.contains("signalled") && !ran.status.success(), "confined: {ran:?}");
    let ran = confined(&Confinement::new(), &script).await?;
    ensure!(
        ran.stdout.contains("sethostname:refused") && ran.stdout.contains("setrlimit:refused"),
        "confined: {ran:?}"
    );
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn forks_stop_at_the_process_limit() -> Result<()> {
    require_support();
    require_pids_cgroup();
    // Forks up to 40 children that wait forever, and prints how many it made.
    let script = format!(
        r#"{PYTHON} - <<'EOF'
import os, signal
n = 0
while n < 40:
    try:
        pid = os.fork()
    except OSError:
        break
    if pid == 0:
        signal.pause()
        os._exit(0)
    n += 1
print(n, flush=True)
os.killpg(0, signal.SIGKILL)
EOF"#
    );
    let ran = unconfined(&script).await?;
    ensure!(ran.stdout.trim() == "40", "unconfined: {ran:?}");
    let confinement = Confinement::new().limits(Limits::default().processes(16));
    let ran = confined(&confinement, &script).await?;
    let made: u32 = ran.stdout.trim().parse().with_context(|| format!("{ran:?}"))?;
    // sh and python count too.
    ensure!(made < 16, "made {made} processes under a limit of 16: {ran:?}");
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_fork_bomb_is_bounded_and_the_host_stays_responsive() -> Result<()> {
    require_support();
    require_pids_cgroup();
    let ticks = std::sync::Arc::new(std::sync::atomic::AtomicU64::new(0));
    let ticker = tokio::spawn({
        let ticks = ticks.clone();
        async move {
            let mut interval = tokio::time::interval(Duration::from_millis(10));
            loop {
                interval.tick().await;
                ticks.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
            }
        }
    });
    let limit = 32;
    // Each f starts two more and waits for them, forever: the processes
    // stay, and each one that dies is replaced.
    let mut cmd = shell("f(){ while :; do f & f & wait; done; }; f");
    let prepared = Confinement::new().limits(Limits::default().processes(limit)).apply(&mut cmd)?;
    let mut child = cmd.spawn()?;
    let pid = child.id().context("no pid")?;
    let started = Instant::now();
    let mut most = 0;
    while started.elapsed() < Duration::from_secs(3) {
        let count = prepared.processes()?.context("no cgroup")?.len() as u64;
        most = most.max(count);
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let ticked = ticks.load(std::sync::atomic::Ordering::Relaxed);
    let hits_before_kill = prepared.process_limit_hits()?.context("no cgroup")?;
    kill_group(pid)?;
    prepared.kill_all()?;
    // The shell at the top may have ended on its own (a shell whose fork
    // fails exits with 2); either way it ends now.
    tokio::time::timeout(Duration::from_secs(10), child.wait()).await??;
    ticker.abort();
    ensure!(most <= limit, "{most} processes under a limit of {limit}");
    ensure!(hits_before_kill > 0, "the bomb never reached the limit ({most} processes at most)");
    ensure!(ticked >= 100, "the host's timer ticked only {ticked} times in 3 s");
    wait_until_empty(&prepared).await
}

async fn wait_until_empty(prepared: &Prepared) -> Result<()> {
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        let left = prepared.processes()?.context("no cgroup")?;
        if left.is_empty() {
            return Ok(());
        }
        if Instant::now() > deadline {
            bail!("processes left in the cgroup: {left:?}");
        }
        prepared.kill_all()?;
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// MCP servers are often node programs: node must start under the default
/// confinement (V8 reserves address space and threads), read its grant, and
/// be refused outside it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn node_runs_inside_its_grant_and_not_outside() -> Result<()> {
    require_support();
    let node = Path::new("/usr/bin/node");
    ensure!(node.exists(), "node is missing: apt-get install nodejs");
    let grant = tempfile::tempdir()?;
    let outside = tempfile::tempdir()?;
    std::fs::write(grant.path().join("in.txt"), "inside-text")?;
    std::fs::write(outside.path().join("out.txt"), "outside-text")?;
    let script = format!(
        "/usr/bin/node -e 'const fs = require(\"fs\"); for (const f of process.argv.slice(1)) {{ \
         try {{ console.log(fs.readFileSync(f, \"utf8\")) }} catch (e) {{ console.log(e.code) }} }}' \
         {}/in.txt {}/out.txt",
        s(grant.path()),
        s(outside.path())
    );
    let ran = unconfined(&script).await?;
    ensure!(ran.stdout == "inside-text\noutside-text\n", "unconfined: {ran:?}");
    let ran = confined(&Confinement::new().read_only(grant.path()), &script).await?;
    ensure!(ran.stdout == "inside-text\nEACCES\n", "confined: {ran:?}");
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn cpu_time_ends_at_the_limit() -> Result<()> {
    require_support();
    let confinement = Confinement::new().limits(Limits::default().cpu_seconds(1));
    let started = Instant::now();
    let ran = confined(&confinement, "while :; do :; done").await?;
    ensure!(matches!(ran.status.signal(), Some(libc::SIGKILL | libc::SIGXCPU)), "the loop ended otherwise: {ran:?}");
    ensure!(started.elapsed() < Duration::from_secs(30));
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn files_stop_at_the_size_limit() -> Result<()> {
    require_support();
    let grant = tempfile::tempdir()?;
    let big = grant.path().join("big");
    let script = format!("head -c 2097152 /dev/zero > {}", s(&big));
    let ran = unconfined(&script).await?;
    ensure!(ran.status.success() && std::fs::metadata(&big)?.len() == 2 << 20, "unconfined: {ran:?}");
    std::fs::remove_file(&big)?;
    let confinement = Confinement::new().read_write(grant.path()).limits(Limits::default().file_size_bytes(1 << 20));
    let ran = confined(&confinement, &script).await?;
    ensure!(!ran.status.success(), "{ran:?}");
    ensure!(std::fs::metadata(&big)?.len() <= 1 << 20);
    Ok(())
}

fn alive(pid: u32) -> bool {
    // A zombie waits for a reaper that may not be us; it is no longer running.
    match std::fs::read_to_string(format!("/proc/{pid}/stat")) {
        Ok(stat) => stat.rsplit_once(") ").is_some_and(|(_, rest)| !rest.starts_with('Z') && !rest.starts_with('X')),
        Err(_) => false,
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kill_group_ends_a_grandchild_that_ignores_sigterm() -> Result<()> {
    require_support();
    let mut cmd = shell("trap '' TERM; sleep 100 & echo $!; wait");
    let prepared = Confinement::new().apply(&mut cmd)?;
    let mut child = cmd.spawn()?;
    let pid = child.id().context("no pid")?;
    let stdout = child.stdout.take().context("no stdout")?;
    let mut line = String::new();
    BufReader::new(stdout).read_line(&mut line).await?;
    let sleeper: u32 = line.trim().parse()?;
    // SIGTERM to the group leaves both running.
    rustix::process::kill_process_group(
        rustix::process::Pid::from_raw(pid as i32).context("pid")?,
        rustix::process::Signal::TERM,
    )?;
    tokio::time::sleep(Duration::from_millis(300)).await;
    ensure!(alive(pid) && alive(sleeper), "SIGTERM ended them");
    ensure!(tokio::time::timeout(Duration::from_millis(100), child.wait()).await.is_err());

    kill_group(pid)?;
    let status = tokio::time::timeout(Duration::from_secs(10), child.wait()).await??;
    ensure!(status.signal() == Some(libc::SIGKILL), "{status:?}");
    let deadline = Instant::now() + Duration::from_secs(5);
    while alive(sleeper) {
        ensure!(Instant::now() < deadline, "the grandchild {sleeper} outlived kill_group");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    if matches!(prepared.process_limit(), ProcessLimit::Cgroup { .. }) {
        wait_until_empty(&prepared).await?;
    }
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kill_all_reaches_a_process_that_left_the_group() -> Result<()> {
    require_support();
    require_pids_cgroup();
    let mut cmd = shell("setsid sleep 100 & echo $!; wait");
    let prepared = Confinement::new().apply(&mut cmd)?;
    let mut child = cmd.spawn()?;
    let pid = child.id().context("no pid")?;
    let mut line = String::new();
    BufReader::new(child.stdout.take().context("no stdout")?).read_line(&mut line).await?;
    let escaped: u32 = line.trim().parse()?;
    tokio::time::sleep(Duration::from_millis(200)).await;
    kill_group(pid)?;
    tokio::time::timeout(Duration::from_secs(10), child.wait()).await??;
    // setsid put it in a group of its own: kill_group did not reach it.
    ensure!(alive(escaped), "the escaped sleeper died with the group");
    prepared.kill_all()?;
    let deadline = Instant::now() + Duration::from_secs(5);
    while alive(escaped) {
        ensure!(Instant::now() < deadline, "kill_all did not reach {escaped}");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    wait_until_empty(&prepared).await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn private_tmp_is_the_only_temporary_directory() -> Result<()> {
    require_support();
    let tmp = tempfile::tempdir()?;
    let confinement = Confinement::new().private_tmp(tmp.path());
    let ran = confined(&confinement, "f=$(mktemp) && echo x > \"$f\" && echo \"$f\"").await?;
    ensure!(ran.status.success(), "{ran:?}");
    ensure!(Path::new(ran.stdout.trim()).starts_with(tmp.path()), "{ran:?}");
    Ok(())
}

/// The ruleset and the cgroup's `cgroup.procs` are close-on-exec: the
/// confined program holds no descriptor an unconfined one would not.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_confined_program_inherits_no_descriptor_of_the_confinement() -> Result<()> {
    require_support();
    let script = format!(
        r#"{PYTHON} -c '
import os
opened = []
for fd in range(3, 256):
    try:
        os.fstat(fd)
        opened.append(fd)
    except OSError:
        pass
print(opened)'"#
    );
    // Whatever the test process itself inherited shows up in both.
    let plain = unconfined(&script).await?;
    ensure!(plain.status.success(), "unconfined: {plain:?}");
    let ran = confined(&Confinement::new(), &script).await?;
    ensure!(ran.status.success() && ran.stdout == plain.stdout, "confined: {ran:?}, unconfined: {plain:?}");
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_grant_that_cannot_be_made_refuses_the_command() -> Result<()> {
    require_support();
    let mut cmd = shell("true");
    let missing = Confinement::new().read_write("/nonexistent/lovia-confine").apply(&mut cmd);
    ensure!(matches!(missing, Err(lovia_confine::ConfineError::GrantedPath { .. })), "{missing:?}");
    let relative = Confinement::new().read_only("relative/path").apply(&mut cmd);
    ensure!(matches!(relative, Err(lovia_confine::ConfineError::RelativePath { .. })), "{relative:?}");
    Ok(())
}
