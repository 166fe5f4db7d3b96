//! Host errors. A tool's failure is not here: it is data for the model
//! ([`crate::CallOutcome`]). These are failures of the host or of its input.

use std::path::PathBuf;

/// Creating the host failed.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum HostError {
    /// wasmtime refused the engine configuration.
    #[error("cannot create the WebAssembly engine: {source}")]
    Engine {
        /// wasmtime's error.
        source: wasmtime::Error,
    },
    /// The host functions could not be defined in the engine's linker.
    #[error("cannot define the host functions in the engine's linker: {source}")]
    Linker {
        /// wasmtime's error.
        source: wasmtime::Error,
    },
    /// The compiled-artifact cache directory cannot be used.
    #[error("cannot use the cache directory {path}: {source}")]
    CacheDir {
        /// The directory.
        path: PathBuf,
        /// The I/O error.
        source: std::io::Error,
    },
    /// The cache directory or its key could be written or read by someone
    /// else, who could then make the host run their native code.
    #[error("refusing the cache directory {path}: {problem}")]
    CacheInsecure {
        /// The directory or key file at fault.
        path: PathBuf,
        /// What is wrong with it.
        problem: CacheProblem,
    },
}

/// Why a cache directory is refused ([`HostError::CacheInsecure`]).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum CacheProblem {
    /// Group or others may write to it.
    #[error("its mode {mode:o} lets group or others write to it (chmod 700 it)")]
    Writable {
        /// The permission bits.
        mode: u32,
    },
    /// Another user owns it.
    #[error("it is owned by uid {owner}, not by this process's uid {uid}")]
    Owner {
        /// The owner's uid.
        owner: u32,
        /// This process's effective uid.
        uid: u32,
    },
    /// The artifact key may be read or written by group or others.
    #[error("its mode {mode:o} lets group or others read or write the artifact key (chmod 600 it)")]
    KeyExposed {
        /// The permission bits.
        mode: u32,
    },
    /// The artifact key file does not hold a key.
    #[error("the artifact key is {len} bytes, not 32 (delete it and the cache to start afresh)")]
    KeyInvalid {
        /// Its length.
        len: u64,
    },
}

/// Loading a plugin failed. Each variant names the cause; `hint()` says what to do.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum LoadError {
    /// The file could not be read.
    #[error("cannot read {path}: {source}")]
    Read {
        /// The path given.
        path: PathBuf,
        /// The I/O error.
        source: std::io::Error,
    },
    /// The bytes are not WebAssembly at all.
    #[error("{origin} is not a WebAssembly file (it does not start with \\0asm)")]
    NotWasm {
        /// Where the bytes came from.
        origin: String,
    },
    /// A core module was given where a component is needed.
    #[error("{origin} is a core WebAssembly module, not a component")]
    CoreModule {
        /// Where the bytes came from.
        origin: String,
    },
    /// The component did not compile (truncated, corrupt, or unsupported).
    #[error("{origin} is not a valid component: {source}")]
    Invalid {
        /// Where the bytes came from.
        origin: String,
        /// Which step refused it, with the error of the crate that did.
        source: InvalidComponent,
    },
    /// The component imports something the host does not provide.
    #[error("{origin} imports {import}, which lovia does not provide")]
    UnknownImport {
        /// Where the bytes came from.
        origin: String,
        /// The import, as wasmtime names it.
        import: String,
    },
    /// The component does not export the `lovia:tools/plugin` interface as the world says.
    #[error("{origin} does not implement the lovia:tools/tool-plugin world: {reason}")]
    WrongExports {
        /// Where the bytes came from.
        origin: String,
        /// What is missing or mistyped.
        reason: String,
    },
    /// Calling `info` or `tools` failed (trap, timeout, limit).
    #[error("{origin}: `{function}` failed: {reason}")]
    Describe {
        /// Where the bytes came from.
        origin: String,
        /// `info` or `tools`.
        function: &'static str,
        /// The failure, as the model would read it.
        reason: String,
    },
    /// A tool spec is unusable (name, schema, duplicate).
    #[error("{origin}: tool `{tool}`: {reason}")]
    InvalidSpec {
        /// Where the bytes came from.
        origin: String,
        /// The tool's name as declared.
        tool: String,
        /// What is wrong.
        reason: String,
    },
    /// The plugin's config asks for more linear memory than the host's limit
    /// ([`crate::CallLimits::memory_bytes`] of its [`crate::HostConfig`]),
    /// which sizes every instance's memory slot: it could never be had.
    #[error("{origin}: its config asks for {asked_mib} MiB of memory, above the host's limit of {host_mib} MiB")]
    MemoryAboveHost {
        /// The file or name the plugin was loaded from.
        origin: String,
        /// The plugin's `memory_mib`.
        asked_mib: usize,
        /// The host's limit in MiB.
        host_mib: usize,
    },
    /// What the plugin declares about itself is unusable: its name, its
    /// version, its instructions, or the number and size of its tools.
    #[error("{origin}: {reason}")]
    InvalidPlugin {
        /// Where the bytes came from.
        origin: String,
        /// What is wrong, with the size and the limit.
        reason: String,
    },
    /// The embedded manifest is unreadable, or cannot be embedded.
    #[error("{origin}: {source}")]
    Manifest {
        /// Where the bytes came from.
        origin: String,
        /// What is wrong.
        source: ManifestError,
    },
    /// The plugin's config file is unreadable or invalid.
    #[error("{path}: {source}")]
    Config {
        /// The config file.
        path: PathBuf,
        /// What is wrong.
        source: PluginConfigError,
    },
    /// The config's `store_namespace` is not a namespace.
    #[error(
        "{origin}: store_namespace {namespace:?} must be 1-128 letters, digits, _ . or - (a plugin's store namespace cannot hold / or %)"
    )]
    StoreNamespace {
        /// Where the bytes came from.
        origin: String,
        /// The namespace given.
        namespace: String,
    },
    /// Compiling the component took longer than the compile worker's
    /// timeout; the worker was killed.
    #[error("{origin}: compiling it took longer than {} s; refused", timeout.as_secs_f64())]
    CompileTimeout {
        /// Where the bytes came from.
        origin: String,
        /// The worker's timeout.
        timeout: std::time::Duration,
    },
    /// The async runtime shut down before the compile could run (it runs
    /// on tokio's blocking pool).
    #[error("{origin}: the compile did not run: the async runtime is shutting down")]
    Cancelled {
        /// Where the bytes came from.
        origin: String,
    },
    /// The config pins a digest the component does not have.
    #[error("{origin} has digest sha256:{actual}, but its config pins {expected}")]
    DigestMismatch {
        /// Where the bytes came from.
        origin: String,
        /// The pin, as written (`sha256:<64 hex>`).
        expected: String,
        /// The component's SHA-256, hex.
        actual: String,
    },
    /// The config's `digest` is not a SHA-256 digest.
    #[error("{origin}: digest {digest:?} must be sha256: followed by 64 hex digits")]
    BadDigest {
        /// Where the bytes came from.
        origin: String,
        /// The pin given.
        digest: String,
    },
    /// The compiled-artifact cache failed while writing.
    #[error("cannot write the compiled artifact {path}: {source}")]
    Cache {
        /// The artifact path.
        path: PathBuf,
        /// The I/O error.
        source: std::io::Error,
    },
    /// The engine of the component's calling convention could not be made
    /// (the engine of `async-plugin` components, made on first need).
    #[error("{origin}: cannot make the engine that runs it: {source}")]
    Engine {
        /// Where the bytes came from.
        origin: String,
        /// Why.
        source: Box<HostError>,
    },
}

impl LoadError {
    /// What the user can do about it.
    pub fn hint(&self) -> Option<&'static str> {
        Some(match self {
            LoadError::Read { .. } => "check the path; plugins are .wasm files built for wasm32-wasip2",
            LoadError::NotWasm { .. } => {
                "pass the .wasm file from target/wasm32-wasip2/release/, not a source or text file"
            }
            LoadError::CoreModule { .. } => {
                "build the plugin with `cargo build --target wasm32-wasip2` (which produces a component), \
                 or wrap the module with `wasm-tools component new`"
            }
            LoadError::Invalid { .. } => "the file may be truncated or corrupt: rebuild it",
            LoadError::UnknownImport { .. } => {
                "a plugin may import lovia:tools/context, lovia:tools/store and WASI 0.2 (wasi:cli, wasi:io, \
                 wasi:clocks, wasi:random, wasi:filesystem, wasi:sockets, wasi:http); rebuild against wit/lovia.wit"
            }
            LoadError::WrongExports { .. } => {
                "export the lovia:tools/plugin@0.2.0 interface (or @0.1.0, or async-plugin@0.2.0), e.g. with the `lovia` guest SDK's `export!` macro"
            }
            // Making the instance is the host's work, before any of the
            // plugin's code runs: what fails there is a host resource.
            LoadError::Describe { function: "instantiate", .. } => {
                "making an instance failed in the host, before the plugin's code ran: the usual cause is a limit on \
                 this process's memory or address space (ulimit -v; an MCP server's sandbox memory_bytes)"
            }
            LoadError::Describe { .. } => "the plugin's info()/tools() must return without side effects",
            LoadError::InvalidSpec { .. } => "fix the tool's declaration in the plugin and rebuild it",
            LoadError::InvalidPlugin { .. } => {
                "fix the plugin's info() or tools() and rebuild it; the limits are in docs/tool-authors.md, section \"Limits\""
            }
            LoadError::MemoryAboveHost { .. } => {
                "lower the plugin's memory_mib, or raise the host's memory limit (`lovia call --memory-mib`, \
                 HostConfig's limits.memory_bytes)"
            }
            LoadError::Manifest { .. } => "run `lovia pack PLUGIN.wasm` to embed the manifest",
            LoadError::Cache { .. } => "set a writable cache directory, or disable the cache",
            LoadError::Engine { .. } => {
                "the engine of async (JavaScript) plugins is made on the first such load; the reason says why it could not be"
            }
            LoadError::CompileTimeout { .. } => {
                "a component this large or this complex is refused here; build a smaller one (fewer or smaller functions)"
            }
            LoadError::Cancelled { .. } => "load the plugin before the runtime shuts down",
            LoadError::DigestMismatch { .. } => {
                "the file is not the component that was pinned: get the pinned one, or pin the new digest \
                 (`lovia inspect` prints it) once you trust it"
            }
            LoadError::BadDigest { .. } => "write the pin as `lovia inspect` prints it: sha256:<64 hex digits>",
            LoadError::StoreNamespace { .. } => {
                "give plugins that should share session data the same store_namespace, such as \"notes\""
            }
            LoadError::Config { .. } => {
                "the config has digest, instance, store_namespace, [grants] (dirs, env, secrets) and [limits] (memory_mib, max_wall_clock_ms, fuel, \
                 result_bytes); see docs/tool-authors.md, section \"What a plugin can be granted\""
            }
        })
    }
}

/// A wasmtime error as one line: each cause once, outermost first.
pub(crate) fn root_cause(err: &wasmtime::Error) -> String {
    let mut parts: Vec<String> = err.chain().map(|c| c.to_string()).collect();
    parts.dedup();
    parts.join(": ")
}

/// Why a component's bytes did not become a compiled component: the step
/// that refused them, with its own error as the source.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum InvalidComponent {
    /// Its sections could not be parsed (read before the compile, for the
    /// embedded manifest and the imports).
    #[error("{0}")]
    Sections(#[source] ManifestError),
    /// wasmtime refused to compile it. The message is the chain of causes,
    /// outermost first.
    #[error("{}", root_cause(.0))]
    Compile(#[source] wasmtime::Error),
    /// The compiled component could not be serialised for the artifact cache.
    #[error("cannot serialise the compiled component: {}", root_cause(.0))]
    Serialize(#[source] wasmtime::Error),
    /// The compile worker, the child process that compiles when
    /// [`HostConfig::compile_worker`](crate::HostConfig::compile_worker) is set, failed.
    #[error("{0}")]
    Worker(#[source] CompileWorkerError),
}

/// Why the compile worker produced no component (the load fails with
/// [`LoadError::Invalid`] and this as [`InvalidComponent::Worker`]; a
/// compile past its deadline is [`LoadError::CompileTimeout`]).
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum CompileWorkerError {
    /// The engine settings could not be written for the child.
    #[error("cannot write the engine settings for the compile worker: {0}")]
    Settings(#[source] serde_json::Error),
    /// The child could not be started.
    #[error("cannot start the compile worker {}: {source}", program.display())]
    Start {
        /// The program the embedder named.
        program: PathBuf,
        /// The I/O error.
        source: std::io::Error,
    },
    /// Waiting for the child failed.
    #[error("the compile worker: {0}")]
    Wait(#[source] std::io::Error),
    /// The child exited unsuccessfully. Its stderr, up to 16 KiB, is what
    /// the compile printed (wasmtime's explanation, in the same words as
    /// [`InvalidComponent::Compile`]): text from another process, so a
    /// string.
    #[error("{}", failure(.status, .stderr))]
    Failed {
        /// How it exited.
        status: std::process::ExitStatus,
        /// Its stderr, trimmed.
        stderr: String,
    },
    /// The child's artifact did not deserialise for this engine.
    #[error("the compile worker's artifact: {}", root_cause(.0))]
    Artifact(#[source] wasmtime::Error),
}

/// What a failed child said, or how it exited when it said nothing.
fn failure(status: &std::process::ExitStatus, stderr: &str) -> String {
    if stderr.is_empty() { format!("the compile worker failed ({status})") } else { stderr.to_owned() }
}

/// Why a plugin's config is unusable.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum PluginConfigError {
    /// The file could not be read.
    #[error("{0}")]
    Read(#[source] std::io::Error),
    /// It is not valid TOML, or names an unknown key or value (the
    /// message names it and the allowed ones).
    #[error("{message}")]
    Syntax {
        /// The TOML parser's message.
        message: String,
    },
    /// `store_namespace` is not a namespace.
    #[error("store_namespace {namespace:?} must be 1-128 letters, digits, _ . or -")]
    StoreNamespace {
        /// The namespace given.
        namespace: String,
    },
    /// A granted host directory does not exist.
    #[error("granted directory {} does not exist", path.display())]
    NoSuchDirectory {
        /// The directory, made absolute.
        path: PathBuf,
    },
    /// A grant's guest path is not absolute.
    #[error("guest path {guest:?} must be absolute, like /data")]
    RelativeGuestPath {
        /// The path given.
        guest: String,
    },
}

/// Why a component's manifest could not be read or written.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum ManifestError {
    /// The component's binary could not be parsed (truncated, corrupt).
    #[error("{0}")]
    Parse(#[from] wasmtime::wasmparser::BinaryReaderError),
    /// The manifest section is not the JSON of a [`crate::Manifest`].
    #[error("unreadable manifest: {0}")]
    Unreadable(#[source] serde_json::Error),
    /// A manifest section exists but is not the component's last section,
    /// so it cannot be replaced without rewriting the component.
    #[error("the component has a manifest section that is not the last section")]
    NotLast,
    /// The manifest could not be written as JSON.
    #[error("cannot write the manifest: {0}")]
    Unwritable(#[source] serde_json::Error),
}
