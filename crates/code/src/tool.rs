//! [`run_code`]: the tool that runs a model's program.

use crate::declarations::{declarations, identifiers};
use crate::engine::SharedEngine;
use crate::error::CodeModeError;
use crate::limits::CodeLimits;
use crate::program;
use lovia_host::{Failure, Tool};
use serde_json::{Value, json};
use std::sync::Arc;

/// The tool's name: `run_code`.
pub const RUN_CODE: &str = "run_code";

const DESCRIPTION: &str = "Run a JavaScript program that calls tools as functions, and get back only what it logs and returns.
- `code` is the body of an async function: use `await` and `return` at the top level.
- Call a tool with `await tools.NAME(args)`: it returns the tool's JSON result parsed (or its text), and throws a `ToolError` whose `message` is the tool's error.
- Tool calls made from the program follow the same rules as direct calls, approvals included.
- The result is what `console.log` printed, then the returned value (JSON unless it is a string). Print and return only what you need.
- There is no network, file system, timer or module: only `tools` and `console`.";

/// Code mode as a capability of a door: `run_code` over the tools of
/// `others` as they are now (an MCP server's later changes are not
/// declared to the program), needing what they need, since a program's
/// calls are theirs. The door adds it after the others.
pub fn code_mode(
    engine: SharedEngine,
    others: &lovia_host::Composition,
    limits: CodeLimits,
) -> Result<lovia_host::capability::ToolList, CodeModeError> {
    let tool = run_code(engine, &others.tools(), limits)?;
    Ok(lovia_host::capability::ToolList::new("code mode", lovia_host::ToolSource::AgentTools, vec![tool])
        .needing(others.needs()))
}

/// The `run_code` tool over the calls of `tools` (those that call tools
/// themselves are left out): its description carries their TypeScript
/// declarations; it never runs in parallel and is never retried.
pub fn run_code(engine: SharedEngine, tools: &[Tool], limits: CodeLimits) -> Result<Tool, CodeModeError> {
    let offered: Vec<Tool> = tools.iter().filter(|t| !t.calls_tools() && t.name() != RUN_CODE).cloned().collect();
    let declared = declarations(offered.iter().map(Tool::spec));
    let chars = declared.chars().count();
    if chars > limits.max_declaration_chars {
        return Err(CodeModeError::DeclarationsTooLong {
            tools: offered.len(),
            chars,
            limit: limits.max_declaration_chars,
        });
    }
    let names = Arc::new(identifiers(offered.iter().map(Tool::name)));
    let description = format!(
        "{DESCRIPTION}\n- Limits: {} tool calls, {} ms of CPU, {} MiB of memory.\n\nThe tools:\n```ts\n{declared}\n```",
        limits.max_calls,
        limits.max_cpu.as_millis(),
        limits.memory_bytes.min(crate::engine::MAX_MEMORY_BYTES) >> 20
    );
    let limits = Arc::new(limits);
    let max_code = limits.max_code_chars;
    let tool = Tool::builder(RUN_CODE)
        .title("Run code")
        .hints(hints(&offered))
        .parameters(json!({
            "type": "object",
            "properties": {
                "code": {
                    "type": "string",
                    "minLength": 1,
                    "maxLength": max_code,
                    "description": "The body of an async JavaScript function; `await tools.NAME(args)` calls a tool."
                }
            },
            "required": ["code"],
            "additionalProperties": false
        }))
        .calls_tools(true)
        .invoke(move |args: Value, ctx| {
            let (engine, names, limits) = (engine.clone(), names.clone(), limits.clone());
            async move {
                let Some(code) = args.get("code").and_then(Value::as_str) else {
                    return Err(Failure::InvalidArguments("code: a string is required".into()));
                };
                program::run(&engine, code.to_owned(), names, &limits, &ctx).await
            }
        })?;
    Ok(tool.with_description(description).with_parallel(false).with_retries(0))
}

/// `run_code`'s MCP hints: what the tools a program may call would say
/// together. Read-only only when every one of them says it is; destructive
/// or open-world when any says so or leaves it unsaid (MCP reads an unsaid
/// `destructiveHint` and `openWorldHint` as true); never idempotent, since
/// a program may do anything twice.
fn hints(offered: &[Tool]) -> lovia_host::ToolHints {
    let all = |f: fn(&lovia_host::ToolHints) -> Option<bool>, when: bool| {
        offered.iter().all(|t| f(&t.spec().hints) == Some(when))
    };
    lovia_host::ToolHints::stated(
        all(|h| h.read_only, true),
        !all(|h| h.destructive, false),
        false,
        !all(|h| h.open_world, false),
    )
}
