//! The parts of the suite that need more than cargo (a PostgreSQL server,
//! the Python MCP client, componentize-py, a browser, npm's filesystem MCP
//! server) and the one way out of
//! each: `LOVIA_SKIP`, a comma-separated list of part names that
//! `scripts/test` checks and exports.
//!
//! A test whose part is missing fails, naming what is missing and how to
//! provide it; only a part opted out by name lets a test return without
//! running its real component, and then it prints `opted out: LOVIA_SKIP=<part>`.

/// A part of the suite that a plain `cargo test` cannot provide.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Part {
    /// A PostgreSQL server (`LOVIA_TEST_POSTGRES_URL`), for the PostgreSQL
    /// stores and the replicas.
    Postgres,
    /// The official Python MCP client (`target/mcp-venv`).
    McpClient,
    /// componentize-py 0.25.1 (`target/py-venv`) and Python 3, for tools
    /// written in Python and the Python SDK's own tests.
    Python,
    /// Headless Chromium, node and Playwright, for the console's browser test.
    Browser,
    /// node and npm's `@modelcontextprotocol/server-filesystem`
    /// (tests/mcp-fs/node_modules), the third-party MCP server the
    /// confinement of command-started servers is tested with, and the
    /// TypeScript MCP SDK the task server of the source tests runs on.
    McpFs,
    /// An OCI registry binary (Debian's `docker-registry`), which the OCI
    /// tests start on loopback.
    Registry,
    /// node and the TypeScript build toolchain (esbuild, componentize-qjs,
    /// zod in sdk/js/node_modules), for tools written in TypeScript.
    Ts,
    /// Arize Phoenix (target/phoenix-venv), the OpenTelemetry backend the
    /// trace tests export to and read spans back from.
    Telemetry,
    /// The fault run's short form (bench/fault-run), which `scripts/test`
    /// runs after `cargo test`; no cargo test needs it, but `LOVIA_SKIP`
    /// names it.
    Faults,
}

impl Part {
    /// Every part, in the order `scripts/test` provides them.
    pub const ALL: [Part; 9] = [
        Part::Postgres,
        Part::McpClient,
        Part::Python,
        Part::Browser,
        Part::McpFs,
        Part::Registry,
        Part::Ts,
        Part::Telemetry,
        Part::Faults,
    ];

    /// The name `LOVIA_SKIP` uses.
    pub fn name(self) -> &'static str {
        match self {
            Part::Postgres => "postgres",
            Part::McpClient => "mcp-client",
            Part::Python => "python",
            Part::Browser => "browser",
            Part::McpFs => "mcp-fs",
            Part::Registry => "registry",
            Part::Ts => "ts",
            Part::Telemetry => "telemetry",
            Part::Faults => "faults",
        }
    }

    /// What the part is, for the message of a test that lacks it.
    fn what(self) -> &'static str {
        match self {
            Part::Postgres => "a PostgreSQL server (LOVIA_TEST_POSTGRES_URL)",
            Part::McpClient => "the Python MCP client (PyPI `mcp` in target/mcp-venv)",
            Part::Python => "componentize-py 0.25.1 (in target/py-venv) and Python 3",
            Part::Browser => "headless Chromium, node and Playwright (tests/console/node_modules)",
            Part::McpFs => "node and npm's @modelcontextprotocol/server-filesystem (tests/mcp-fs/node_modules)",
            Part::Registry => "an OCI registry binary (docker-registry, or LOVIA_REGISTRY_BIN)",
            Part::Ts => "node and the TypeScript toolchain (esbuild, componentize-qjs, zod in sdk/js/node_modules)",
            Part::Telemetry => "the OpenTelemetry backend Arize Phoenix (in target/phoenix-venv)",
            Part::Faults => "the fault run's PostgreSQL (initdb, pg_ctl, psql) and root for its disk fault",
        }
    }

    /// How to provide it.
    fn how(self) -> &'static str {
        match self {
            Part::Postgres => {
                "run the tests with scripts/test, which starts a throwaway server when initdb is installed \
                 (as root: apt-get install postgresql), or set LOVIA_TEST_POSTGRES_URL to a server the tests \
                 may create databases on"
            }
            Part::McpClient => {
                "run the tests with scripts/test, which installs it (python3 -m venv target/mcp-venv && \
                 target/mcp-venv/bin/pip install 'mcp>=2.3,<3')"
            }
            Part::Python => {
                "run the tests with scripts/test, which installs it (python3 -m venv target/py-venv && \
                 target/py-venv/bin/pip install componentize-py==0.25.1)"
            }
            Part::Browser => {
                "as root: apt-get install chromium nodejs npm (or set LOVIA_CHROMIUM to a Chromium binary); \
                 scripts/test then installs Playwright (npm ci in tests/console)"
            }
            Part::McpFs => {
                "as root: apt-get install nodejs npm; scripts/test then installs the server (npm ci in tests/mcp-fs)"
            }
            Part::Registry => {
                "as root: apt-get install docker-registry (or set LOVIA_REGISTRY_BIN to a registry binary)"
            }
            Part::Ts => {
                "as root: apt-get install nodejs npm; scripts/test then installs the toolchain (npm ci in sdk/js)"
            }
            Part::Telemetry => {
                "run the tests with scripts/test, which installs it (python3 -m venv target/phoenix-venv && \
                 target/phoenix-venv/bin/pip install -r tests/telemetry/requirements.txt)"
            }
            Part::Faults => {
                "as root: apt-get install postgresql; scripts/test then runs bench/fault-run after cargo test"
            }
        }
    }
}

/// The parts a `LOVIA_SKIP` value opts out of, or why it is not one: an
/// unknown name is an error that lists the known ones, so a typo never
/// opts out of nothing in silence.
pub fn parse_skip(value: &str) -> Result<Vec<Part>, String> {
    let mut out = Vec::new();
    for name in value.split(',').map(str::trim).filter(|n| !n.is_empty()) {
        match Part::ALL.into_iter().find(|p| p.name() == name) {
            Some(part) => out.push(part),
            None => {
                let known: Vec<&str> = Part::ALL.into_iter().map(Part::name).collect();
                return Err(format!("unknown part {name:?} in LOVIA_SKIP; the parts are: {}", known.join(", ")));
            }
        }
    }
    Ok(out)
}

/// Whether `LOVIA_SKIP` opts out of `part`; panics on an unknown name.
pub fn opted_out(part: Part) -> bool {
    let value = std::env::var("LOVIA_SKIP").unwrap_or_default();
    parse_skip(&value).unwrap_or_else(|e| panic!("{e}")).contains(&part)
}

/// `Some` of what `find` found; `None`, after printing `opted out: ...`,
/// when `LOVIA_SKIP` opts out of `part` (then `find` does not run); a panic
/// saying what is missing and how to provide it when `find` fails.
pub fn require<T>(part: Part, find: impl FnOnce() -> Result<T, String>) -> Option<T> {
    if opted_out(part) {
        println!("opted out: LOVIA_SKIP={}", part.name());
        return None;
    }
    Some(find().unwrap_or_else(|why| missing(part, &why)))
}

/// Fails the test: `part` is needed, not opted out, and missing (`why`).
pub fn missing(part: Part, why: &str) -> ! {
    panic!(
        "this test needs {}, which is missing: {why}\nto provide it: {}\nor opt out of the part by name: LOVIA_SKIP={}",
        part.what(),
        part.how(),
        part.name()
    )
}

/// The OCI registry binary (`LOVIA_REGISTRY_BIN`, else `docker-registry`
/// on `PATH`), `None` when the `registry` part is opted out.
pub fn registry_bin() -> Option<std::path::PathBuf> {
    require(Part::Registry, || {
        let bin = std::env::var_os("LOVIA_REGISTRY_BIN")
            .map(std::path::PathBuf::from)
            .unwrap_or_else(|| "docker-registry".into());
        match std::process::Command::new(&bin).arg("--version").output() {
            Ok(o) if o.status.success() => Ok(bin),
            _ => Err(format!("{} --version does not run", bin.display())),
        }
    })
}

/// The test PostgreSQL server's URL (`LOVIA_TEST_POSTGRES_URL`), `None`
/// when the `postgres` part is opted out.
pub fn postgres_url() -> Option<String> {
    require(Part::Postgres, || {
        std::env::var("LOVIA_TEST_POSTGRES_URL").map_err(|_| "LOVIA_TEST_POSTGRES_URL is not set".to_owned())
    })
}
