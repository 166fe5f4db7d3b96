//! `lovia:tools@0.1.0` values converted up to the current contract
//! (docs/contract.md, "How the host treats 0.1.0").

use super::v0_1::exports::lovia::tools::plugin as old_guest;
use super::v0_1::lovia::tools as old;
use super::{guest, wit};

pub(crate) fn info(info: old_guest::PluginInfo) -> guest::PluginInfo {
    guest::PluginInfo { name: info.name, version: info.version, instructions: info.instructions }
}

/// A 0.1.0 tool has no title.
pub(crate) fn tool_spec(spec: old::types::ToolSpec) -> wit::ToolSpec {
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

pub(crate) fn output(output: old::types::Output) -> wit::Output {
    match output {
        old::types::Output::Text(t) => wit::Output::Text(t),
        old::types::Output::Json(t) => wit::Output::Json(t),
    }
}

/// A 0.1.0 error has no kind.
pub(crate) fn call_error(error: old::types::CallError) -> wit::CallError {
    match error {
        old::types::CallError::Tool(e) => {
            wit::CallError::Tool(wit::ToolError { message: e.message, hint: e.hint, kind: None })
        }
        old::types::CallError::InvalidArguments(m) => wit::CallError::InvalidArguments(m),
        old::types::CallError::CancelRun(m) => wit::CallError::CancelRun(m),
        old::types::CallError::BudgetExceeded(m) => wit::CallError::BudgetExceeded(m),
    }
}
