//! Compiling a component in a child process that can be killed
//! ([`HostConfig::compile_worker`](crate::HostConfig::compile_worker)).
//!
//! Cranelift compiles a component on as many threads as it likes and has
//! no way to stop half-way: a hostile 12 MB component once kept a core busy
//! for 30 s. In a child process the compile has a deadline: past it the
//! child is killed, and the load fails with [`LoadError::CompileTimeout`].
//!
//! The child is this same program (the embedder names how to start it) and
//! builds its engine from the parent's engine settings, sent as its last
//! argument, so the artifact it writes is one the parent's engine accepts;
//! wasmtime checks that again when the parent deserialises it.

use crate::error::{CompileWorkerError, InvalidComponent, LoadError};
use std::ffi::OsString;
use std::io::{Read, Write};
use std::path::PathBuf;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};
use wasmtime::Engine;
use wasmtime::component::Component;

/// How to start a compile worker, and how long a compile may take.
///
/// ```no_run
/// # use lovia_host::compile_worker::CompileWorker;
/// // `my-app compile-worker` calls `lovia_host::engine::serve_compile_worker`.
/// let worker = CompileWorker::new(std::env::current_exe().unwrap(), ["compile-worker"], std::time::Duration::from_secs(60));
/// ```
#[derive(Debug, Clone)]
#[non_exhaustive]
pub struct CompileWorker {
    /// The program to run: one that calls
    /// [`serve_compile_worker`](crate::engine::serve_compile_worker) when started with
    /// [`args`](Self::args).
    pub program: PathBuf,
    /// Its arguments, before the engine settings lovia adds.
    pub args: Vec<OsString>,
    /// How long a compile may take before the child is killed.
    pub timeout: Duration,
}

impl CompileWorker {
    /// A worker started as `program args…`, whose compiles may take `timeout`.
    pub fn new(
        program: impl Into<PathBuf>,
        args: impl IntoIterator<Item = impl Into<OsString>>,
        timeout: Duration,
    ) -> Self {
        Self { program: program.into(), args: args.into_iter().map(Into::into).collect(), timeout }
    }
}

/// The engine settings the child needs to compile for the parent's engine.
#[derive(Debug, Clone, Copy, serde::Serialize, serde::Deserialize)]
pub(crate) struct EngineSettings {
    pub(crate) fuel_metering: bool,
    pub(crate) max_wasm_stack: usize,
    pub(crate) pool_slots: u32,
    pub(crate) memory_bytes: usize,
    pub(crate) pooled: bool,
    pub(crate) abi: crate::bindings::Abi,
}

/// The longest error message read from a failed child.
const MAX_ERROR_BYTES: u64 = 16 << 10;

/// Compiles `bytes` in a child started as `worker` says, for `engine`.
pub(crate) fn compile(
    worker: &CompileWorker,
    settings: EngineSettings,
    engine: &Engine,
    bytes: &[u8],
    origin: &str,
) -> Result<Component, LoadError> {
    let failed = |error: CompileWorkerError| LoadError::Invalid {
        origin: origin.into(),
        source: InvalidComponent::Worker(error),
    };
    let settings = serde_json::to_string(&settings).map_err(|e| failed(CompileWorkerError::Settings(e)))?;
    let mut child = Command::new(&worker.program)
        .args(&worker.args)
        .arg(settings)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .map_err(|source| failed(CompileWorkerError::Start { program: worker.program.clone(), source }))?;
    let started = Instant::now();
    // Writing and reading on their own threads: a full pipe on one side
    // must not stall the other.
    let mut stdin = child.stdin.take();
    let input = bytes.to_vec();
    let writer = std::thread::spawn(move || {
        if let Some(stdin) = stdin.as_mut() {
            let _ = stdin.write_all(&input);
        }
    });
    let mut stdout = child.stdout.take();
    let reader = std::thread::spawn(move || {
        let mut out = Vec::new();
        if let Some(stdout) = stdout.as_mut() {
            let _ = stdout.read_to_end(&mut out);
        }
        out
    });
    let status = loop {
        match child.try_wait() {
            Ok(Some(status)) => break status,
            Ok(None) if started.elapsed() >= worker.timeout => {
                let _ = child.kill();
                let _ = child.wait();
                let _ = writer.join();
                let _ = reader.join();
                return Err(LoadError::CompileTimeout { origin: origin.into(), timeout: worker.timeout });
            }
            Ok(None) => std::thread::sleep(Duration::from_millis(5)),
            Err(e) => return Err(failed(CompileWorkerError::Wait(e))),
        }
    };
    let _ = writer.join();
    let artifact = reader.join().unwrap_or_default();
    if !status.success() {
        let mut message = String::new();
        if let Some(stderr) = child.stderr.take() {
            let _ = stderr.take(MAX_ERROR_BYTES).read_to_string(&mut message);
        }
        return Err(failed(CompileWorkerError::Failed { status, stderr: message.trim().to_owned() }));
    }
    deserialize(engine, &artifact).map_err(|e| failed(CompileWorkerError::Artifact(e)))
}

#[expect(unsafe_code, reason = "deserialising a precompiled artifact is unsafe by wasmtime's contract")]
fn deserialize(engine: &Engine, artifact: &[u8]) -> wasmtime::Result<Component> {
    // SAFETY: the artifact was just written by a child this process
    // started from the program its embedder named, compiling with this
    // engine's settings; it never touched disk. wasmtime checks its header
    // and that it was compiled for this engine's configuration.
    unsafe { Component::deserialize(engine, artifact) }
}
