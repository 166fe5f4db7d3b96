//! Code mode: the model writes a short JavaScript program that calls the
//! tools as async functions, loops and filters inside the program, and
//! returns only what matters (docs/code-mode.md).
//!
//! [`run_code`] makes the tool that runs such a program. Each program runs in
//! a fresh instance of [`CodeEngine`], QuickJS built as a WebAssembly
//! component whose one import calls a tool: no files, network, clocks or
//! environment. Every call the program makes goes through the executor as a
//! call of its own (validation, approval, policies, retries, timeouts,
//! truncation, events, the run's budget), and [`CodeLimits`] bound the
//! program's CPU, fuel, memory, waiting, calls, size and output.
//!
//! ```no_run
//! # async fn example(host: lovia_host::Host, plugin: lovia_host::Plugin) -> Result<(), Box<dyn std::error::Error>> {
//! use lovia_host::{Tool, Toolset, ToolSource};
//! use std::sync::Arc;
//! let tools = Tool::from_plugin(&plugin);
//! let engine = Arc::new(lovia_code::CodeEngine::new(&host)?);
//! let run_code = lovia_code::run_code(engine, &tools, lovia_code::CodeLimits::default())?;
//! let toolset = Toolset::new()
//!     .with(ToolSource::Plugin, tools)?
//!     .with(ToolSource::AgentTools, [run_code])?;
//! # Ok(()) }
//! ```

mod declarations;
mod engine;
mod error;
mod limits;
mod program;
mod state;
mod tool;

pub use declarations::{declarations, identifier};
pub use engine::{CodeEngine, ENGINE_BYTES};
pub use error::CodeModeError;
pub use limits::CodeLimits;
pub use tool::{RUN_CODE, code_mode, run_code};
