//! Support code for the macros. Not a public API: it may change in any release.

use crate::bindings::exports::lovia::tools::plugin::PluginInfo;
use crate::bindings::lovia::tools::types::{Approval, CallError, Output, ToolHints, ToolSpec};
use serde::{Serialize, de::DeserializeOwned};

pub use crate::schema::{ArgMeta, ParametersBuilder};
pub use {schemars, serde, serde_json};

/// An approval predicate over the argument text: an `Err` denies the call.
pub type Predicate = fn(&str) -> Result<bool, String>;

/// One tool as the `#[tool]` macro describes it.
pub struct ToolDef {
    /// The name the model calls.
    pub name: &'static str,
    /// Builds the spec (schemas are derived at run time by schemars).
    pub spec: fn() -> ToolSpec,
    /// Parses the arguments and runs the function.
    pub call: fn(&str) -> Result<Output, CallError>,
    /// The approval predicate, for `needs_approval = path`.
    pub needs_approval: Option<Predicate>,
}

/// The flags of a tool, as the macro collected them.
#[derive(Debug, Clone, Copy)]
pub struct Flags {
    pub strict: bool,
    pub parallel: bool,
    pub retries: Option<u32>,
    pub timeout_ms: Option<u64>,
    pub max_output_chars: Option<u64>,
    pub approval: Approval,
    pub hints: ToolHints,
}

pub fn spec(name: &str, title: Option<&str>, description: &str, parameters: String, flags: Flags) -> ToolSpec {
    ToolSpec {
        name: name.into(),
        title: title.map(Into::into),
        description: description.into(),
        parameters,
        output_schema: None,
        strict: flags.strict,
        parallel: flags.parallel,
        retries: flags.retries,
        timeout_ms: flags.timeout_ms,
        max_output_chars: flags.max_output_chars,
        approval: flags.approval,
        hints: flags.hints,
    }
}

/// Parses the argument object. The host has validated it already; this
/// guards direct callers and reports in the host's format (docs/semantics.md §3).
pub fn parse_args<T: DeserializeOwned>(tool: &str, arguments: &str) -> Result<T, CallError> {
    let text = if arguments.trim().is_empty() { "{}" } else { arguments };
    serde_json::from_str(text)
        .map_err(|e| CallError::InvalidArguments(format!("Invalid arguments for tool '{tool}': arguments: {e}")))
}

/// A `String` result passes to the model verbatim.
pub fn text_output(value: String) -> Result<Output, CallError> {
    Ok(Output::Text(value))
}

/// Any other result is JSON, rendered by the host.
pub fn json_output<T: Serialize + ?Sized>(value: &T) -> Result<Output, CallError> {
    serde_json::to_string(value).map(Output::Json).map_err(|e| {
        CallError::Tool(crate::bindings::lovia::tools::types::ToolError {
            message: format!("the result could not be serialised as JSON: {e}"),
            hint: None,
            kind: None,
        })
    })
}

/// A [`crate::Content`] result: its parts, in order.
pub fn parts_output(value: crate::Content) -> Result<Output, CallError> {
    Ok(Output::Parts(value.into_parts()))
}

/// Maps the error of a `Result`-returning tool.
pub fn tool_error<E: Into<crate::ToolError>>(e: E) -> CallError {
    e.into().into()
}

pub fn info(name: &str, version: &str, instructions: Option<&str>) -> PluginInfo {
    PluginInfo { name: name.into(), version: version.into(), instructions: instructions.map(Into::into) }
}

pub fn call(tools: &[ToolDef], tool: &str, arguments: &str) -> Result<Output, CallError> {
    match tools.iter().find(|t| t.name == tool) {
        Some(def) => (def.call)(arguments),
        None => Err(tool_error(format!("Tool '{tool}' is not available."))),
    }
}

pub fn needs_approval(tools: &[ToolDef], tool: &str, arguments: &str) -> Result<bool, String> {
    match tools.iter().find(|t| t.name == tool) {
        Some(ToolDef { needs_approval: Some(pred), .. }) => pred(arguments),
        Some(_) => Ok(false),
        None => Err(format!("Tool '{tool}' is not available.")),
    }
}

pub use crate::bindings::lovia::tools::types::{Approval as ApprovalMode, ToolHints as Hints};

#[doc(hidden)]
pub use crate::bindings::lovia::tools::types::{CallError as __CallError, Output as __Output, ToolSpec as __Spec};
