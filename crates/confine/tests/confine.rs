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

    let host = std::process::id();
    let read_secret =
        format!("cat {sec}; cat /proc/self/root{sec}; cat /proc/{host}/environ | tr '\\0' '\\n' | grep -c PATH=");
    let ran = unconfined(&read_secret).await?;
    ensure!(ran.stdout.matches("the-secret-text").count() == 2, "unconfined: {ran:?}");
    ensure!(ran.stdout.lines().last() != Some("0"), "unconfined reads its parent's environment: {ran:?}");

    let confinement = Confinement::new().read_only(shared.path());
    let ran = confined(&confinement, &read_secret).await?;
    ensure!(!ran.stdout.contains("the-secret-text"), "confined: {ran:?}");
    // Not in its view: neither the file, nor /proc's per-process files.
    ensure!(ran.stderr.matches("No such file or directory").count() >= 3, "confined: {ran:?}");
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
    // A signal to a process outside the child's tree (this test; inside
    // its PID namespace the child's $PPID is 0).
    let signal = format!("kill -0 {} && echo signalled", std::process::id());
    ensure!(unconfined(&signal).await?.stdout.contains("signalled"));
    let ran = confined(&Confinement::new(), &signal).await?;
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
    // The cgroup also holds the supervisor, which only waits: the command's
    // own processes are `limit` at most.
    ensure!(most <= limit + 1, "{most} processes (the supervisor among them) under a limit of {limit}");
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
    // Outside the grant is not in its view of the file system at all.
    ensure!(ran.stdout == "inside-text\nENOENT\n", "confined: {ran:?}");
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

/// The pid on the host of the process of `prepared`'s command whose pid in
/// the command's own PID namespace is `inner` (the `NSpid` line of
/// `/proc/PID/status` lists both).
fn host_pid(prepared: &Prepared, inner: u32) -> Result<u32> {
    for pid in prepared.processes()?.context("no pids cgroup")? {
        let Ok(status) = std::fs::read_to_string(format!("/proc/{pid}/status")) else { continue };
        let ids: Vec<u32> = status
            .lines()
            .find_map(|line| line.strip_prefix("NSpid:"))
            .map(|ids| ids.split_whitespace().filter_map(|id| id.parse().ok()).collect())
            .unwrap_or_default();
        if ids.len() > 1 && ids.last() == Some(&inner) {
            return Ok(pid);
        }
    }
    bail!("no process of the command has the pid {inner} in its namespace")
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
    require_pids_cgroup();
    let mut cmd = shell("trap '' TERM; sleep 100 & echo $!; wait");
    let prepared = Confinement::new().apply(&mut cmd)?;
    let mut child = cmd.spawn()?;
    let pid = child.id().context("no pid")?;
    let stdout = child.stdout.take().context("no stdout")?;
    let mut line = String::new();
    BufReader::new(stdout).read_line(&mut line).await?;
    let sleeper = host_pid(&prepared, line.trim().parse()?)?;
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

/// A process that left the command's group with `setsid` is still ended:
/// by `Prepared::kill_all` (its cgroup), and by `kill_group` alone, since
/// the command's first process is the init of its PID namespace.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_process_that_left_the_group_is_still_reached() -> Result<()> {
    require_support();
    require_pids_cgroup();
    for by_group in [false, true] {
        let mut cmd = shell("setsid sleep 100 & echo $!; wait");
        let prepared = Confinement::new().apply(&mut cmd)?;
        let mut child = cmd.spawn()?;
        let pid = child.id().context("no pid")?;
        let mut line = String::new();
        BufReader::new(child.stdout.take().context("no stdout")?).read_line(&mut line).await?;
        tokio::time::sleep(Duration::from_millis(200)).await;
        let escaped = host_pid(&prepared, line.trim().parse()?)?;
        ensure!(alive(escaped));
        if by_group {
            kill_group(pid)?;
        } else {
            prepared.kill_all()?;
        }
        tokio::time::timeout(Duration::from_secs(10), child.wait()).await??;
        let deadline = Instant::now() + Duration::from_secs(5);
        while alive(escaped) {
            ensure!(Instant::now() < deadline, "{escaped} outlived the kill (by group: {by_group})");
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        wait_until_empty(&prepared).await?;
    }
    Ok(())
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
    // Not even what the test process itself inherited: 0, 1 and 2 only.
    ensure!(ran.status.success() && ran.stdout == "[]\n", "confined: {ran:?}, unconfined: {plain:?}");
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

// The escapes an audit made as root against round one of the confinement,
// one test each (docs/confinement.md, "What a root command cannot do").
// Each shows the attempt working unconfined, then failing confined.

/// Runs a Python probe that prints `name:ok` or `name:refused` per attempt.
fn python_probe(body: &str) -> String {
    format!(
        r#"{PYTHON} - <<'EOF'
import ctypes, errno, fcntl, os, socket, struct, sys
libc = ctypes.CDLL(None, use_errno=True)
def attempt(name, f):
    try:
        r = f()
        if isinstance(r, int) and r < 0:
            raise OSError(ctypes.get_errno(), name)
        print(name + ":ok")
    except (OSError, ValueError, PermissionError):
        print(name + ":refused")
def in_child(f):
    # For calls that would change the probe's own process (its namespaces).
    pid = os.fork()
    if pid == 0:
        try:
            r = f()
            os._exit(1 if isinstance(r, int) and r < 0 else 0)
        except Exception:
            os._exit(1)
    if os.waitpid(pid, 0)[1] != 0:
        raise OSError("refused in the child")
{body}
EOF"#
    )
}

/// The probe's words for each attempt, as `name -> ok/refused`.
fn outcomes(ran: &Ran) -> std::collections::BTreeMap<String, String> {
    ran.stdout
        .lines()
        .filter_map(|line| line.split_once(':'))
        .map(|(name, outcome)| (name.to_owned(), outcome.to_owned()))
        .collect()
}

fn all_are(ran: &Ran, names: &[&str], outcome: &str) -> Result<()> {
    let seen = outcomes(ran);
    for name in names {
        ensure!(seen.get(*name).map(String::as_str) == Some(outcome), "{name} is not {outcome}: {ran:?}");
    }
    Ok(())
}

/// C1: mode, owner, times, extended attributes and inode flags of files
/// outside the read-write grants cannot change. The system files in the
/// view are tried with changes that would change nothing (their own mode,
/// owner and times), so a failing test harms nothing.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn root_changes_no_metadata_outside_its_grants() -> Result<()> {
    require_support();
    let outside = tempfile::tempdir()?;
    let file = outside.path().join("victim");
    std::fs::write(&file, "x")?;
    let probe = |path: &str| {
        python_probe(&format!(
            r#"p = "{path}"
st = os.stat(p)
attempt("chmod", lambda: os.chmod(p, st.st_mode & 0o7777))
attempt("chown", lambda: os.chown(p, st.st_uid, st.st_gid))
attempt("utime", lambda: os.utime(p, ns=(st.st_atime_ns, st.st_mtime_ns)))
attempt("setxattr", lambda: os.setxattr(p, "user.lovia", b"x"))
def flags():
    fd = os.open(p, os.O_RDONLY)
    try:
        buf = struct.pack("i", 0)
        cur = struct.unpack("i", fcntl.ioctl(fd, 0x80086601, buf))[0]
        fcntl.ioctl(fd, 0x40086602, struct.pack("i", cur | 0x10))
        fcntl.ioctl(fd, 0x40086602, struct.pack("i", cur))
    finally:
        os.close(fd)
attempt("chattr", flags)
"#
        ))
    };
    let names = ["chmod", "chown", "utime"];
    let plain = unconfined(&probe(s(&file))).await?;
    all_are(&plain, &names, "ok")?;
    let _ = std::fs::remove_file(&file);
    std::fs::write(&file, "x")?;
    let confinement = Confinement::new();
    // Outside every grant: not even there to name.
    let ran = confined(&confinement, &probe(s(&file))).await?;
    ensure!(!ran.status.success() && ran.stderr.contains("No such file or directory"), "{ran:?}");
    // A system file in the view: read-only, and no capability to override.
    for path in ["/etc/passwd", "/usr/bin/env"] {
        let ran = confined(&confinement, &probe(path)).await?;
        all_are(&ran, &["chmod", "chown", "utime", "setxattr", "chattr"], "refused")?;
    }
    Ok(())
}

/// C1: no set-user-ID or set-group-ID bit, and no file capability, on a
/// file root makes in its read-write grant: outside, whoever can run it
/// would run it as root. No immutable flag either (M5: the host could not
/// remove it). Ordinary modes still work.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn root_makes_no_set_id_program_in_its_grant() -> Result<()> {
    require_support();
    let grant = tempfile::tempdir()?;
    let g = s(grant.path());
    let probe = python_probe(&format!(
        r#"g = "{g}"
open(g + "/tool", "w").close()
attempt("chmod_x", lambda: os.chmod(g + "/tool", 0o755))
attempt("chmod_suid", lambda: os.chmod(g + "/tool", 0o4755))
attempt("chmod_sgid", lambda: os.chmod(g + "/tool", 0o2755))
attempt("create_suid", lambda: os.close(os.open(g + "/made", os.O_CREAT | os.O_WRONLY, 0o4755)))
attempt("mknod_suid", lambda: os.mknod(g + "/node", 0o104755))
attempt("file_caps", lambda: os.setxattr(g + "/tool", "security.capability", bytes.fromhex("0000000200200000000000000000000000000000")))
def immutable(on):
    fd = os.open(g + "/tool", os.O_RDONLY)
    try:
        cur = struct.unpack("i", fcntl.ioctl(fd, 0x80086601, struct.pack("i", 0)))[0]
        fcntl.ioctl(fd, 0x40086602, struct.pack("i", (cur | 0x10) if on else (cur & ~0x10)))
    finally:
        os.close(fd)
attempt("chattr_i", lambda: immutable(True))
attempt("chattr_i_off", lambda: immutable(False))
"#
    ));
    let plain = unconfined(&probe).await?;
    all_are(
        &plain,
        &["chmod_x", "chmod_suid", "chmod_sgid", "create_suid", "mknod_suid", "file_caps", "chattr_i"],
        "ok",
    )?;
    for name in ["tool", "made", "node"] {
        let _ = std::fs::remove_file(grant.path().join(name));
    }
    let ran = confined(&Confinement::new().read_write(grant.path()), &probe).await?;
    all_are(&ran, &["chmod_x"], "ok")?;
    // And no immutable flag, which would keep the host from removing it.
    all_are(&ran, &["chmod_suid", "chmod_sgid", "create_suid", "mknod_suid", "file_caps", "chattr_i"], "refused")?;
    use std::os::unix::fs::PermissionsExt;
    for entry in std::fs::read_dir(grant.path())? {
        let mode = entry?.metadata()?.permissions().mode();
        ensure!(mode & 0o6000 == 0, "a set-id bit in the grant: {mode:o}");
    }
    Ok(())
}

/// C2: no device but the four every process has, and none can be made.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn root_reaches_no_device_and_makes_none() -> Result<()> {
    require_support();
    let grant = tempfile::tempdir()?;
    let g = s(grant.path());
    let script = format!(
        "mknod {g}/kmsg c 1 11 && echo made; head -c1 /dev/kmsg >/dev/null 2>&1 && echo kmsg; \
         for d in kmsg kvm net/tun mem full tty console loop0 sda vda; do [ -e /dev/$d ] && echo has-$d; done; \
         echo x > /dev/null && head -c 4 /dev/urandom | wc -c && head -c 4 /dev/zero | wc -c"
    );
    let plain = unconfined(&script).await?;
    ensure!(plain.stdout.contains("made") && plain.stdout.contains("kmsg"), "unconfined: {plain:?}");
    let _ = std::fs::remove_file(grant.path().join("kmsg"));
    let ran = confined(&Confinement::new().read_write(grant.path()), &script).await?;
    ensure!(!ran.stdout.contains("made") && !ran.stdout.contains("kmsg"), "{ran:?}");
    ensure!(plain.stdout.contains("has-kmsg"), "unconfined: {plain:?}");
    ensure!(ran.stdout == "4\n4\n", "only null, zero, random and urandom: {ran:?}");
    Ok(())
}

/// C3: the host's SysV IPC is out of sight, what the command makes dies
/// with it, and its shared memory is bounded.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn root_shares_no_ipc_with_the_host() -> Result<()> {
    require_support();
    let made = unconfined("ipcmk -M 4096 | grep -o '[0-9]*$'").await?;
    let host_segment = made.stdout.trim().to_owned();
    ensure!(!host_segment.is_empty(), "unconfined: {made:?}");
    // A size no other segment has, to find the command's own on the host.
    let own_size = 40_001 + u64::from(std::process::id() % 20_000) * 2;
    let ran = confined(
        &Confinement::new(),
        &format!(
            "ipcs -m | awk '{{print $2}}' | grep -qx {host_segment} && echo seen; ipcmk -M {own_size} >/dev/null && echo own; \
             ipcmk -M 134217728 >/dev/null 2>&1 && echo large"
        ),
    )
    .await?;
    let host_segments = unconfined("ipcs -m").await?;
    let _ = unconfined(&format!("ipcrm -m {host_segment}")).await;
    ensure!(host_segments.stdout.lines().any(|l| l.split_whitespace().nth(1) == Some(host_segment.as_str())));
    ensure!(!ran.stdout.contains("seen"), "the host's segment is visible: {ran:?}");
    ensure!(ran.stdout.contains("own") && !ran.stdout.contains("large"), "{ran:?}");
    // Its own segment went with it.
    let own = own_size.to_string();
    ensure!(
        !host_segments.stdout.lines().any(|l| l.split_whitespace().nth(4) == Some(own.as_str())),
        "the command's segment outlived it: {host_segments:?}"
    );
    // POSIX shared memory lives in the command's private temporary
    // directory, which is also its /dev/shm, and nowhere else.
    let tmp = tempfile::tempdir()?;
    let ran = confined(
        &Confinement::new().private_tmp(tmp.path()),
        &format!(
            "{PYTHON} -c 'import multiprocessing; multiprocessing.Lock(); print(\"lock\")' && echo x > /dev/shm/a"
        ),
    )
    .await?;
    ensure!(ran.status.success() && ran.stdout == "lock\n", "{ran:?}");
    ensure!(tmp.path().join("a").exists(), "{ran:?}");
    Ok(())
}

/// C4: a pathname unix socket outside the grants cannot be reached; one in
/// a granted directory can.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn root_reaches_only_the_unix_sockets_it_was_granted() -> Result<()> {
    require_support();
    let outside = tempfile::tempdir()?;
    let granted = tempfile::tempdir()?;
    let outside_socket = outside.path().join("daemon.sock");
    let granted_socket = granted.path().join("daemon.sock");
    let _outside_listener = std::os::unix::net::UnixListener::bind(&outside_socket)?;
    let _granted_listener = std::os::unix::net::UnixListener::bind(&granted_socket)?;
    let probe = python_probe(&format!(
        r#"def connect(p):
    s = socket.socket(socket.AF_UNIX)
    s.connect(p)
    s.close()
attempt("outside", lambda: connect("{}"))
attempt("granted", lambda: connect("{}"))
"#,
        s(&outside_socket),
        s(&granted_socket)
    ));
    all_are(&unconfined(&probe).await?, &["outside", "granted"], "ok")?;
    let ran = confined(&Confinement::new().read_only(granted.path()), &probe).await?;
    all_are(&ran, &["granted"], "ok")?;
    all_are(&ran, &["outside"], "refused")?;
    Ok(())
}

/// M1: no namespace of any kind, by `unshare`, `clone` or `clone3`.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn root_makes_no_namespace() -> Result<()> {
    require_support();
    let probe = python_probe(
        r#"SIGCHLD = 17
def clone(flag):
    pid = libc.syscall(56, flag | SIGCHLD, 0, 0, 0, 0)
    if pid == 0:
        os._exit(0)
    if pid > 0:
        os.waitpid(pid, 0)
    return pid
for name, flag in [("newns", 0x20000), ("newcgroup", 0x2000000), ("newuts", 0x4000000), ("newipc", 0x8000000), ("newuser", 0x10000000), ("newpid", 0x20000000), ("newnet", 0x40000000)]:
    attempt("clone_" + name, lambda: in_child(lambda: clone(flag)))
    attempt("unshare_" + name, lambda: in_child(lambda: libc.unshare(flag)))
args = struct.pack("QQQQQQQQ", 0x10000000, 0, 0, 0, SIGCHLD, 0, 0, 0)
def clone3():
    pid = libc.syscall(435, ctypes.c_char_p(args), len(args))
    if pid == 0:
        os._exit(0)
    if pid > 0:
        os.waitpid(pid, 0)
    return pid
attempt("clone3", lambda: in_child(clone3))
attempt("fork", lambda: in_child(lambda: clone(0)))
"#,
    );
    let names: Vec<String> = ["newns", "newcgroup", "newuts", "newipc", "newuser", "newpid", "newnet"]
        .iter()
        .flat_map(|n| [format!("clone_{n}"), format!("unshare_{n}")])
        .chain(["clone3".to_owned()])
        .collect();
    let names: Vec<&str> = names.iter().map(String::as_str).collect();
    all_are(&unconfined(&probe).await?, &names, "ok")?;
    let ran = confined(&Confinement::new(), &probe).await?;
    all_are(&ran, &names, "refused")?;
    all_are(&ran, &["fork"], "ok")?;
    Ok(())
}

/// M2: no real-time or raised scheduling or I/O priority.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn root_raises_no_priority() -> Result<()> {
    require_support();
    let probe = python_probe(
        r#"attempt("fifo", lambda: os.sched_setscheduler(0, os.SCHED_FIFO, os.sched_param(99)))
attempt("rr", lambda: os.sched_setscheduler(0, os.SCHED_RR, os.sched_param(1)))
attempt("nice", lambda: os.setpriority(os.PRIO_PROCESS, 0, -20))
attempt("ioprio_rt", lambda: libc.syscall(251, 1, 0, (1 << 13) | 0))
attempt("nicer", lambda: os.setpriority(os.PRIO_PROCESS, 0, 10))
"#,
    );
    all_are(&unconfined(&probe).await?, &["fifo", "rr", "nice", "ioprio_rt"], "ok")?;
    let ran = confined(&Confinement::new(), &probe).await?;
    all_are(&ran, &["fifo", "rr", "nice", "ioprio_rt"], "refused")?;
    all_are(&ran, &["nicer"], "ok")?;
    Ok(())
}

/// L2: nothing outside the grants can be `stat`ed or watched.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn root_learns_nothing_of_paths_outside_its_grants() -> Result<()> {
    require_support();
    let outside = tempfile::tempdir()?;
    std::fs::write(outside.path().join("session-of-another-tenant"), "x")?;
    let o = s(outside.path());
    let probe = python_probe(&format!(
        r#"attempt("stat", lambda: os.stat("{o}/session-of-another-tenant"))
attempt("stat_root", lambda: os.stat("/root"))
def watch():
    fd = libc.inotify_init1(0)
    if fd < 0:
        return fd
    try:
        return libc.inotify_add_watch(fd, b"{o}", 0x100)
    finally:
        os.close(fd)
attempt("inotify", watch)
"#
    ));
    all_are(&unconfined(&probe).await?, &["stat", "stat_root", "inotify"], "ok")?;
    let ran = confined(&Confinement::new(), &probe).await?;
    all_are(&ran, &["stat", "stat_root", "inotify"], "refused")?;
    Ok(())
}

/// The environment variable that makes [`a_command_runs_while_its_host_lives`]
/// the host a test kills: it then waits to be killed instead of ending.
const HOST_ROLE: &str = "LOVIA_CONFINE_TEST_HOST";

/// A confined command, and a grandchild it moved to a session of its own,
/// run while their host lives. Run by [`nothing_outlives_its_host`] as a
/// separate host process (with [`HOST_ROLE`] set), it prints both pids and
/// waits to be killed; run alone, it ends them itself.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_command_runs_while_its_host_lives() -> Result<()> {
    require_support();
    require_pids_cgroup();
    let mut cmd = shell("setsid sleep 1000 & sleep 1000");
    let prepared = Confinement::new().apply(&mut cmd)?;
    let mut child = cmd.spawn()?;
    let deadline = Instant::now() + Duration::from_secs(10);
    let pids = loop {
        let pids = prepared.processes()?.context("no pids cgroup")?;
        // The supervisor, the shell and its two sleeps.
        if pids.len() >= 4 {
            break pids;
        }
        ensure!(Instant::now() < deadline, "the command did not start: {pids:?}");
        tokio::time::sleep(Duration::from_millis(20)).await;
    };
    ensure!(pids.iter().all(|&pid| alive(pid)));
    if std::env::var_os(HOST_ROLE).is_some() {
        // A shell that starts a job in the background (`cmd &`) leaves it
        // SIGINT ignored, and this host inherits that from whoever ran the
        // tests so: the SIGINT of the test must be able to end it.
        #[allow(unsafe_code, reason = "resetting one signal's disposition, before any thread handles it")]
        // SAFETY: SIG_DFL is a valid disposition, and no handler of SIGINT is installed here.
        unsafe {
            libc::signal(libc::SIGINT, libc::SIG_DFL);
        }
        let listed: Vec<String> = pids.iter().map(u32::to_string).collect();
        println!("pids {}", listed.join(" "));
        if std::env::var(HOST_ROLE).as_deref() == Ok("panic") {
            panic!("the host panics with its command running");
        }
        std::future::pending::<()>().await;
    }
    kill_group(child.id().context("no pid")?)?;
    child.wait().await?;
    wait_until_empty(&prepared).await
}

/// M3: however the host dies (SIGKILL, SIGTERM, SIGINT, a panic), every
/// process of its confined commands dies with it, also one that left the
/// command's process group.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn nothing_outlives_its_host() -> Result<()> {
    require_support();
    require_pids_cgroup();
    for how in ["KILL", "TERM", "INT", "panic"] {
        let mut host = std::process::Command::new(std::env::current_exe()?)
            .args(["--exact", "a_command_runs_while_its_host_lives", "--nocapture", "--test-threads=1"])
            .env(HOST_ROLE, if how == "panic" { "panic" } else { "wait" })
            .env("RUST_BACKTRACE", "0")
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()?;
        let stdout = host.stdout.take().context("no stdout")?;
        let line = tokio::task::spawn_blocking(move || {
            std::io::BufRead::lines(std::io::BufReader::new(stdout))
                .map_while(std::result::Result::ok)
                // The harness prints the test's name on the same line.
                .find_map(|line| line.split_once("pids ").map(|(_, pids)| pids.to_owned()))
        })
        .await?
        .context("the host printed no pids")?;
        let pids: Vec<u32> = line.split_whitespace().filter_map(|p| p.parse().ok()).collect();
        ensure!(pids.len() >= 4, "{line}");
        let signal = match how {
            "KILL" => Some(rustix::process::Signal::KILL),
            "TERM" => Some(rustix::process::Signal::TERM),
            "INT" => Some(rustix::process::Signal::INT),
            _ => None,
        };
        if let Some(signal) = signal {
            let pid = rustix::process::Pid::from_raw(host.id() as i32).context("host pid")?;
            rustix::process::kill_process(pid, signal)?;
        }
        let status = host.wait()?;
        ensure!(!status.success(), "{how}: the host ended well: {status:?}");
        let deadline = Instant::now() + Duration::from_secs(10);
        while let Some(left) = pids.iter().find(|&&pid| alive(pid)) {
            ensure!(Instant::now() < deadline, "{how}: {left} outlived its host");
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    }
    Ok(())
}

/// A grant through a system path that is a symbolic link (`/bin` on a
/// merged-usr system, as an MCP server's install directory) works.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_grant_through_a_system_link_works() -> Result<()> {
    require_support();
    let ran = confined(&Confinement::new().read_only("/bin").read_only("/usr/bin"), "/bin/sh -c 'echo ok'").await?;
    ensure!(ran.status.success() && ran.stdout == "ok\n", "{ran:?}");
    Ok(())
}

/// Set by [`a_missing_piece_fails_closed`] on the run of
/// [`the_kernel_confines_here`] it makes in a namespace that hides a piece.
const REPORT_ROLE: &str = "LOVIA_CONFINE_TEST_REPORT";

/// This machine gives every piece. With [`REPORT_ROLE`] set, it prints
/// what `check_supported` says instead of asserting it.
#[test]
fn the_kernel_confines_here() {
    let supported = Confinement::check_supported();
    if std::env::var_os(REPORT_ROLE).is_some() {
        match supported {
            Ok(()) => println!("check: supported"),
            Err(e) => println!("check: {e}"),
        }
        return;
    }
    if let Err(e) = supported {
        panic!("this kernel cannot confine a process: {e}");
    }
}

/// Item 4 of round two: where the kernel cannot give a piece, confinement
/// is refused and says which, never given without it. Each piece is hidden
/// from a run of this test binary by `unshare(1)`: the pids hierarchy
/// unmounted in a mount namespace of its own (so a root host would have no
/// process bound), and mount namespaces forbidden in a user namespace
/// (`user.max_mnt_namespaces = 0`).
#[test]
fn a_missing_piece_fails_closed() -> Result<()> {
    require_support();
    require_pids_cgroup();
    let exe = std::env::current_exe()?;
    let exe = s(&exe);
    let helper = format!("{exe} --exact the_kernel_confines_here --nocapture --test-threads=1");
    let mounted_pids = |mountinfo: &str| {
        mountinfo
            .lines()
            .filter(|line| {
                line.contains(" - cgroup ")
                    && line.split(' ').next_back().is_some_and(|o| o.split(',').any(|o| o == "pids"))
            })
            .filter_map(|line| line.split(' ').nth(4).map(str::to_owned))
            .collect::<Vec<_>>()
    };
    let pids_mounts = mounted_pids(&std::fs::read_to_string("/proc/self/mountinfo")?);
    ensure!(!pids_mounts.is_empty());
    let unmount: String = pids_mounts.iter().map(|m| format!("umount -l {m} && ")).collect();
    for (how, script, says) in [
        ("nothing hidden", helper.clone(), "check: supported"),
        (
            "no pids cgroup",
            format!("unshare --mount --propagation private sh -c '{unmount}exec {helper}'"),
            "check: no bound on the number of processes for a root host",
        ),
        (
            "no mount namespaces",
            format!(
                "unshare --user --map-root-user sh -c 'echo 0 > /proc/sys/user/max_mnt_namespaces && exec {helper}'"
            ),
            "check: the kernel cannot give a confined process its own mount, IPC and PID namespaces",
        ),
    ] {
        let output = std::process::Command::new("/bin/sh").arg("-c").arg(&script).env(REPORT_ROLE, "1").output()?;
        let stdout = String::from_utf8_lossy(&output.stdout);
        let line = stdout.lines().find_map(|l| l.split_once("check: ").map(|(_, c)| format!("check: {c}")));
        ensure!(
            line.as_deref().is_some_and(|l| l.starts_with(says)),
            "{how}: {line:?}; stdout {stdout}; stderr {}",
            String::from_utf8_lossy(&output.stderr)
        );
    }
    Ok(())
}

/// A host that is not root confines too: it makes a user namespace first
/// (mapping only its own uid and gid). Some of this file's tests are run
/// again as uid and gid 65534 (`setpriv(1)`), from a copy of this test
/// binary that user can run; their unconfined halves hold for any user.
#[test]
fn a_host_that_is_not_root_confines_too() -> Result<()> {
    require_support();
    use std::os::unix::fs::PermissionsExt;
    let dir = tempfile::tempdir()?;
    std::fs::set_permissions(dir.path(), std::fs::Permissions::from_mode(0o755))?;
    let copy = dir.path().join("confine-tests");
    std::fs::copy(std::env::current_exe()?, &copy)?;
    std::fs::set_permissions(&copy, std::fs::Permissions::from_mode(0o755))?;
    let tests = [
        "the_kernel_confines_here",
        "writes_land_only_inside_the_read_write_grant",
        "root_reaches_only_the_unix_sockets_it_was_granted",
        "root_learns_nothing_of_paths_outside_its_grants",
        "a_grant_through_a_system_link_works",
        "private_tmp_is_the_only_temporary_directory",
    ];
    let mut cmd = std::process::Command::new("setpriv");
    cmd.args(["--reuid=65534", "--regid=65534", "--clear-groups", "--"]).arg(&copy).arg("--exact").args(tests);
    let output = cmd.args(["--test-threads=1"]).current_dir(dir.path()).env("HOME", dir.path()).output()?;
    let stdout = String::from_utf8_lossy(&output.stdout);
    ensure!(
        output.status.success() && stdout.contains(&format!("test result: ok. {} passed", tests.len())),
        "as uid 65534: {stdout}\n{}",
        String::from_utf8_lossy(&output.stderr)
    );
    Ok(())
}
