//! `lovia:tools@0.1.0` on the current contract: its values converted up
//! (docs/contract.md, "How the host treats 0.1.0"), and its imports served by
//! the same code as the current ones.

use super::v0_1::exports::lovia::tools::plugin as old_guest;
use super::v0_1::lovia::tools as old;
use super::{guest, v0_2, wit};
use crate::sandbox::SandboxState;

pub(super) fn info(info: old_guest::PluginInfo) -> guest::PluginInfo {
    guest::PluginInfo { name: info.name, version: info.version, instructions: info.instructions }
}

/// A 0.1.0 tool has no title.
pub(super) fn tool_spec(spec: old::types::ToolSpec) -> wit::ToolSpec {
    wit::ToolSpec {
        name: spec.name,
        title: None,
        description: spec.description,
        parameters: spec.parameters,
        output_schema: spec.output_schema,
        strict: spec.strict,
        parallel: spec.parallel,
        retries: spec.retries,
        timeout_ms: spec.timeout_ms,
        max_output_chars: spec.max_output_chars,
        approval: match spec.approval {
            old::types::Approval::Never => wit::Approval::Never,
            old::types::Approval::Always => wit::Approval::Always,
            old::types::Approval::AskPlugin => wit::Approval::AskPlugin,
        },
        hints: wit::ToolHints {
            read_only: spec.hints.read_only,
            destructive: spec.hints.destructive,
            idempotent: spec.hints.idempotent,
            open_world: spec.hints.open_world,
        },
    }
}

pub(super) fn output(output: old::types::Output) -> wit::Output {
    match output {
        old::types::Output::Text(t) => wit::Output::Text(t),
        old::types::Output::Json(t) => wit::Output::Json(t),
    }
}

/// A 0.1.0 error has no kind.
pub(super) fn call_error(error: old::types::CallError) -> wit::CallError {
    match error {
        old::types::CallError::Tool(e) => {
            wit::CallError::Tool(wit::ToolError { message: e.message, hint: e.hint, kind: None })
        }
        old::types::CallError::InvalidArguments(m) => wit::CallError::InvalidArguments(m),
        old::types::CallError::CancelRun(m) => wit::CallError::CancelRun(m),
        old::types::CallError::BudgetExceeded(m) => wit::CallError::BudgetExceeded(m),
    }
}

// The 0.1.0 imports are the current ones: each call goes to the current implementation.

impl old::types::Host for SandboxState {}

impl old::context::Host for SandboxState {
    fn run_id(&mut self) -> String {
        v0_2::lovia::tools::context::Host::run_id(self)
    }
    fn session_id(&mut self) -> Option<String> {
        v0_2::lovia::tools::context::Host::session_id(self)
    }
    fn call_id(&mut self) -> String {
        v0_2::lovia::tools::context::Host::call_id(self)
    }
    fn agent(&mut self) -> String {
        v0_2::lovia::tools::context::Host::agent(self)
    }
    fn turn(&mut self) -> u32 {
        v0_2::lovia::tools::context::Host::turn(self)
    }
    fn dependency(&mut self, key: String) -> Option<String> {
        v0_2::lovia::tools::context::Host::dependency(self, key)
    }
    fn cancelled(&mut self) -> bool {
        v0_2::lovia::tools::context::Host::cancelled(self)
    }
    fn progress(&mut self, message: String) {
        v0_2::lovia::tools::context::Host::progress(self, message);
    }
    fn log(&mut self, level: old::types::LogLevel, message: String) {
        let level = match level {
            old::types::LogLevel::Trace => wit::LogLevel::Trace,
            old::types::LogLevel::Debug => wit::LogLevel::Debug,
            old::types::LogLevel::Info => wit::LogLevel::Info,
            old::types::LogLevel::Warn => wit::LogLevel::Warn,
            old::types::LogLevel::Error => wit::LogLevel::Error,
        };
        v0_2::lovia::tools::context::Host::log(self, level, message);
    }
}

impl old::store::Host for SandboxState {
    fn get(&mut self, key: String) -> Option<Vec<u8>> {
        v0_2::lovia::tools::store::Host::get(self, key)
    }
    fn set(&mut self, key: String, value: Vec<u8>) -> Result<(), String> {
        v0_2::lovia::tools::store::Host::set(self, key, value)
    }
    fn delete(&mut self, key: String) {
        v0_2::lovia::tools::store::Host::delete(self, key);
    }
    fn keys(&mut self, prefix: String) -> Vec<String> {
        v0_2::lovia::tools::store::Host::keys(self, prefix)
    }
}
