//! [`run_code`]: the tool that runs a model's program, and its limits.

use crate::declarations::{declarations, identifiers};
use crate::engine::SharedEngine;
use crate::error::CodeModeError;
use crate::program;
use lovia_host::{Failure, Tool};
use serde_json::{Value, json};
use std::collections::HashSet;
use std::sync::Arc;
use std::time::Duration;

/// The tool's name: `run_code`.
pub const RUN_CODE: &str = "run_code";

/// The bounds of one program. Every field documents its default.
#[derive(Debug, Clone)]
#[non_exhaustive]
pub struct CodeLimits {
    /// The longest program, in characters. Default: 20,000.
    pub max_code_chars: usize,
    /// The program's own CPU, in epoch ticks of 1 ms while it runs (waiting
    /// on tools does not count). Default: 2 s.
    pub max_cpu: Duration,
    /// Deterministic fuel for the program's own instructions (the engine's
    /// included). Default: 2,000,000,000 (a few seconds of QuickJS).
    pub fuel: u64,
    /// The wall-clock time the program may spend waiting on its tool calls,
    /// approvals included. Default: 300 s.
    pub max_wait: Duration,
    /// Tool calls one program may make; the next one stops it. Default: 100.
    pub max_calls: u32,
    /// The engine instance's memory (all of its linear memories). Default:
    /// 64 MiB.
    pub memory_bytes: usize,
    /// `console.log` output kept, in characters; the rest is cut with a
    /// note. The result is then truncated like any other. Default: 50,000.
    pub max_log_chars: usize,
    /// The longest TypeScript declaration of the tools, in characters, in
    /// the tool's description. Default: 60,000.
    pub max_declaration_chars: usize,
}

impl Default for CodeLimits {
    fn default() -> Self {
        Self {
            max_code_chars: 20_000,
            max_cpu: Duration::from_secs(2),
            fuel: 2_000_000_000,
            max_wait: Duration::from_secs(300),
            max_calls: 100,
            memory_bytes: 64 << 20,
            max_log_chars: 50_000,
            max_declaration_chars: 60_000,
        }
    }
}

const DESCRIPTION: &str = "Run a JavaScript program that calls tools as functions, and get back only what it logs and returns.
- `code` is the body of an async function: use `await` and `return` at the top level.
- Call a tool with `await tools.NAME(args)`: it returns the tool's JSON result parsed (or its text), and throws a `ToolError` whose `message` is the tool's error.
- Tool calls made from the program follow the same rules as direct calls, approvals included.
- The result is what `console.log` printed, then the returned value (JSON unless it is a string). Print and return only what you need.
- There is no network, file system, timer or module: only `tools` and `console`.";

/// The `run_code` tool over the calls of `tools` (those that call tools
/// themselves are left out): its description carries their TypeScript
/// declarations; it never runs in parallel and is never retried.
pub fn run_code(engine: SharedEngine, tools: &[Tool], limits: CodeLimits) -> Result<Tool, CodeModeError> {
    let offered: Vec<Tool> = tools.iter().filter(|t| !t.calls_tools() && t.name() != RUN_CODE).cloned().collect();
    let declared = declarations(&offered);
    let chars = declared.chars().count();
    if chars > limits.max_declaration_chars {
        return Err(CodeModeError::DeclarationsTooLong {
            tools: offered.len(),
            chars,
            limit: limits.max_declaration_chars,
        });
    }
    let names = Arc::new(identifiers(&offered));
    let allowed: Arc<HashSet<String>> = Arc::new(offered.iter().map(|t| t.name().to_owned()).collect());
    let description = format!(
        "{DESCRIPTION}\n- Limits: {} tool calls, {} ms of CPU, {} MiB of memory.\n\nThe tools:\n```ts\n{declared}\n```",
        limits.max_calls,
        limits.max_cpu.as_millis(),
        limits.memory_bytes >> 20
    );
    let limits = Arc::new(limits);
    let max_code = limits.max_code_chars;
    let tool = Tool::builder(RUN_CODE)
        .title("Run code")
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
            let (engine, names, allowed, limits) = (engine.clone(), names.clone(), allowed.clone(), limits.clone());
            async move {
                let Some(code) = args.get("code").and_then(Value::as_str) else {
                    return Err(Failure::InvalidArguments("code: a string is required".into()));
                };
                program::run(&engine, code.to_owned(), names, allowed, &limits, &ctx).await
            }
        })?;
    Ok(tool.with_description(description).with_parallel(false).with_retries(0))
}
