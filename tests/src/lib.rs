//! The test harness: guest fixtures (built once by `build.rs`), a shared
//! host, and packed copies of the plugins.

use lovia_host::plugin::manifest;
use lovia_host::{Host, HostConfig, Plugin};
use std::path::{Path, PathBuf};
use std::sync::OnceLock;

pub mod http;
pub mod js;
pub mod model_api;
pub mod parts;
pub mod python;

/// Paths of the guest fixtures.
pub mod fixtures {
    include!(concat!(env!("OUT_DIR"), "/fixtures.rs"));
}

/// One host for the whole test binary: each host reserves address space
/// for its instance pool, so tests share it instead of making their own.
pub fn host() -> Host {
    static HOST: OnceLock<Host> = OnceLock::new();
    HOST.get_or_init(|| Host::new(HostConfig::default()).expect("the test host starts")).clone()
}

/// Loads a fixture with the shared host.
pub async fn load(path: &str) -> Plugin {
    host().load_file(path).await.unwrap_or_else(|e| panic!("loading {path}: {e}"))
}

/// A copy of the fixture with its manifest embedded (what `lovia pack` writes),
/// made once per test binary in a temporary directory.
pub async fn packed(path: &str) -> PathBuf {
    static DIR: OnceLock<PathBuf> = OnceLock::new();
    let dir = DIR.get_or_init(|| {
        let dir = std::env::temp_dir().join(format!("lovia-tests-{}", std::process::id()));
        std::fs::create_dir_all(&dir).expect("temp dir");
        dir
    });
    let name = Path::new(path).file_name().expect("file name");
    let out = dir.join(name);
    if !out.exists() {
        let bytes = std::fs::read(path).expect("fixture bytes");
        let plugin = load(path).await;
        let packed = manifest::embed(&bytes, &plugin.manifest()).expect("embed");
        // Tests pack the same fixture at once: each writes a file of its
        // own and renames it over `out` (the same bytes, so the last rename
        // wins harmlessly); one shared temporary name let a rename find its
        // file already moved.
        static NEXT: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);
        let n = NEXT.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        let tmp = out.with_extension(format!("tmp{n}"));
        std::fs::write(&tmp, packed).expect("write packed");
        std::fs::rename(&tmp, &out).expect("rename packed");
    }
    out
}

/// CPU time (user + system) this process has used, for the probes that
/// check a stopped guest burns nothing afterwards.
pub fn process_cpu() -> std::time::Duration {
    // utime + stime, in clock ticks (100 Hz on Linux), after the command name.
    let stat = std::fs::read_to_string("/proc/self/stat").expect("stat");
    let fields: Vec<&str> = stat.rsplit_once(')').expect("comm").1.split_whitespace().collect();
    let ticks: u64 = fields[11].parse::<u64>().expect("utime") + fields[12].parse::<u64>().expect("stime");
    std::time::Duration::from_millis(ticks * 10)
}

/// Runs the ignored test `name` of the current test binary alone in a child
/// process with `env_flag` set, and panics unless it passed. Process-wide
/// figures (CPU time, resident memory) mean nothing while other tests run
/// in the same process.
pub fn run_probe(name: &str, env_flag: &str) {
    let out = std::process::Command::new(std::env::current_exe().expect("exe"))
        .args(["--exact", name, "--ignored", "--nocapture", "--test-threads=1"])
        .env(env_flag, "1")
        .output()
        .expect("run the probe");
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "probe {name} failed:\n{stdout}\n{}", String::from_utf8_lossy(&out.stderr));
    assert!(stdout.contains("1 passed"), "probe {name} did not run:\n{stdout}");
}

pub mod turn {
    //! Runs one turn and records its events as a consumer would see them.

    use lovia_host::{ApprovalRequest, EventSink, Executor, RunState, ToolCall, ToolEvent, ToolResultEntry, TurnError};
    use std::time::Instant;

    /// One event, flattened for assertions.
    #[derive(Debug, Clone, PartialEq)]
    pub struct Seen {
        /// `approval_required`, `started`, `attempt_failed`, `failed`, `completed` or `progress`.
        pub kind: &'static str,
        /// The call id.
        pub call: String,
        /// Output (completed), error (failed), message (progress), `<attempt>: <error>` (attempt_failed).
        pub text: String,
        /// Whether a completed call is an error result.
        pub is_error: bool,
        /// Milliseconds since the turn started.
        pub t_ms: f64,
    }

    /// Runs `tool` (one that spins until its declared timeout) as a turn
    /// of one call, checks that it read `expected` within 3 s, then that the
    /// process burns under 150 ms of CPU in the next second: a guest still
    /// spinning would burn about 1000 ms, the idle host and its epoch ticker
    /// about nothing. Meaningful only in a process of its own
    /// ([`crate::run_probe`]).
    pub async fn assert_no_cpu_after_timeout(exec: &Executor, tool: &str, expected: &str) {
        let start = Instant::now();
        let turn = run(exec, vec![call("s", tool, "{}")], &RunState::default(), |_| None).await;
        let took = start.elapsed();
        assert_eq!(turn.output("s"), expected, "the timeout {tool} declares");
        assert!(took < std::time::Duration::from_secs(3), "returned after {took:?}");
        let before = crate::process_cpu();
        tokio::time::sleep(std::time::Duration::from_millis(1000)).await;
        let burned = crate::process_cpu().saturating_sub(before);
        println!("returned after {took:?}; CPU in the next 1000 ms: {burned:?}");
        assert!(
            burned < std::time::Duration::from_millis(150),
            "the component kept running: {burned:?} of CPU in 1000 ms"
        );
    }

    /// The outcome of a turn and the events it produced.
    #[derive(Debug)]
    pub struct Turn {
        /// What `run_turn` returned.
        pub result: Result<Vec<ToolResultEntry>, TurnError>,
        /// Every event in the order received.
        pub events: Vec<Seen>,
    }

    impl Turn {
        /// The results (panics on a turn error).
        pub fn results(&self) -> &[ToolResultEntry] {
            self.result.as_ref().expect("the turn succeeded")
        }

        /// Call ids of the results, in completion order.
        pub fn order(&self) -> Vec<&str> {
            self.results().iter().map(|r| r.call_id.as_str()).collect()
        }

        /// The output of `call`.
        pub fn output(&self, call: &str) -> &str {
            self.results().iter().find(|r| r.call_id == call).map(|r| r.output.as_str()).expect("a result")
        }

        /// `kind:call` for every event.
        pub fn trace(&self) -> Vec<String> {
            self.events.iter().map(|e| format!("{}:{}", e.kind, e.call)).collect()
        }

        /// When the first event of `kind` for `call` arrived.
        pub fn at(&self, kind: &str, call: &str) -> f64 {
            self.events.iter().find(|e| e.kind == kind && e.call == call).map(|e| e.t_ms).expect("event")
        }
    }

    /// Runs `calls`; the consumer decides approvals with `decide` (`None`:
    /// moves on undecided, leaving the call to the handler).
    pub async fn run(
        exec: &Executor,
        calls: Vec<ToolCall>,
        run: &RunState,
        decide: impl Fn(&ApprovalRequest) -> Option<bool> + Send + 'static,
    ) -> Turn {
        let (sink, mut rx) = EventSink::channel();
        let start = Instant::now();
        let consumer = tokio::spawn(async move {
            let mut seen = Vec::new();
            while let Some(event) = rx.recv().await {
                let t_ms = start.elapsed().as_secs_f64() * 1000.0;
                let call = event.call().id.clone();
                // A call made by a running tool (code mode) is recorded like
                // any other; its id (`parent/n`) says whose it is.
                let event = match event {
                    ToolEvent::Nested { event, .. } => *event,
                    event => event,
                };
                let (kind, text, is_error) = match event {
                    ToolEvent::ApprovalRequired { ticket, .. } => {
                        match decide(ticket.request()) {
                            Some(true) => {
                                ticket.approve();
                            }
                            Some(false) => {
                                ticket.reject();
                            }
                            None => drop(ticket),
                        }
                        ("approval_required", String::new(), false)
                    }
                    ToolEvent::ToolCallStarted { .. } => ("started", String::new(), false),
                    ToolEvent::ToolCallFailed { error, .. } => ("failed", error, false),
                    ToolEvent::ToolCallCompleted { output, is_error, .. } => ("completed", output, is_error),
                    ToolEvent::ToolProgress { message, .. } => ("progress", message, false),
                    ToolEvent::AttemptFailed { attempt, error, .. } => {
                        ("attempt_failed", format!("{attempt}: {error}"), true)
                    }
                    other => panic!("an event this harness does not know: {other:?}"),
                };
                seen.push(Seen { kind, call, text, is_error, t_ms });
            }
            seen
        });
        let result = exec.run_turn(&calls, run, &sink).await;
        drop(sink);
        Turn { result, events: consumer.await.expect("consumer") }
    }

    /// A call with id `id`.
    pub fn call(id: &str, name: &str, arguments: &str) -> ToolCall {
        ToolCall::new(id, name, arguments)
    }
}

pub mod native {
    //! Host-native tools for executor tests.

    use lovia_host::{Failure, Tool, ToolOutput};
    use serde_json::json;
    use std::sync::Arc;
    use std::sync::atomic::{AtomicU32, Ordering};
    use std::time::Duration;

    fn ms_schema() -> serde_json::Value {
        json!({"properties": {"ms": {"type": "integer", "minimum": 0}}, "required": ["ms"], "type": "object", "additionalProperties": false})
    }

    /// Sleeps `ms`, then returns `"<name> done"`.
    pub fn sleeper(name: &str) -> Tool {
        let label = name.to_owned();
        Tool::builder(name)
            .parameters(ms_schema())
            .invoke(move |args, _| {
                let label = label.clone();
                async move {
                    tokio::time::sleep(Duration::from_millis(args["ms"].as_u64().unwrap_or(0))).await;
                    Ok(ToolOutput::Text(format!("{label} done")))
                }
            })
            .expect("tool")
    }

    /// Fails the first `failures` calls with `"failure N"`, then returns `"ok"`; counts calls in `counter`.
    pub fn flaky(name: &str, failures: u32, counter: Arc<AtomicU32>) -> Tool {
        Tool::builder(name)
            .invoke(move |_, _| {
                let counter = counter.clone();
                async move {
                    let n = counter.fetch_add(1, Ordering::SeqCst) + 1;
                    if n <= failures {
                        Err(Failure::Tool { message: format!("failure {n}"), hint: None, kind: None })
                    } else {
                        Ok(ToolOutput::Text("ok".into()))
                    }
                }
            })
            .expect("tool")
    }

    /// Returns its arguments as JSON.
    pub fn echo_json(name: &str) -> Tool {
        Tool::builder(name)
            .parameters(json!({"properties": {"n": {"type": "integer"}, "m": {"type": "integer", "default": 5}}, "type": "object", "additionalProperties": false}))
            .invoke(|args, _| async move { Ok(ToolOutput::Json(args)) })
            .expect("tool")
    }
}

pub mod processes {
    //! Finding a confined command's processes from the host. A confined
    //! command runs in a PID namespace of its own, so the pids it prints
    //! (`$!`, `$$`) are not the host's: tests give such a process a unique
    //! command line and look it up by that.

    use std::sync::atomic::{AtomicU32, Ordering};

    /// A `sleep` duration no other process has: `300.<this pid><n>`.
    pub fn unique_sleep() -> String {
        static NEXT: AtomicU32 = AtomicU32::new(0);
        format!("300.{}{}", std::process::id(), NEXT.fetch_add(1, Ordering::Relaxed))
    }

    /// The host pids of the running (not zombie) processes whose command
    /// line is exactly `args`.
    pub fn running(args: &[&str]) -> Vec<u32> {
        let Ok(entries) = std::fs::read_dir("/proc") else { return Vec::new() };
        entries
            .flatten()
            .filter_map(|e| e.file_name().to_str().and_then(|n| n.parse::<u32>().ok()))
            .filter(|pid| {
                let cmdline = std::fs::read(format!("/proc/{pid}/cmdline")).unwrap_or_default();
                let parts: Vec<&[u8]> = cmdline.split(|&b| b == 0).filter(|p| !p.is_empty()).collect();
                let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap_or_default();
                let zombie =
                    stat.rsplit_once(") ").is_none_or(|(_, rest)| rest.starts_with('Z') || rest.starts_with('X'));
                !zombie && parts.len() == args.len() && parts.iter().zip(args).all(|(a, b)| *a == b.as_bytes())
            })
            .collect()
    }

    /// Waits up to 10 s until no process runs `args`; whether none does.
    pub async fn gone(args: &[&str]) -> bool {
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
        while std::time::Instant::now() < deadline {
            if running(args).is_empty() {
                return true;
            }
            tokio::time::sleep(std::time::Duration::from_millis(50)).await;
        }
        false
    }
}
