//! What a plugin declares (its info and tool specs), checked against the
//! contract's limits before it is trusted, and converted to the host's types.

use super::manifest;
use crate::bindings::{guest, wit};
use crate::call::{ApprovalMode, MAX_TITLE_BYTES, ToolHints, ToolSpec, is_valid_name};
use crate::error::LoadError;

pub(super) fn invalid_spec(origin: &str, tool: &str, reason: &str) -> LoadError {
    LoadError::InvalidSpec { origin: origin.into(), tool: tool.into(), reason: reason.into() }
}

/// Largest parameters (or output) schema accepted, in bytes of JSON text. Fixed: 256 KiB.
pub const MAX_SCHEMA_BYTES: usize = 256 << 10;

/// Largest tool description accepted, in bytes; also the cap on each
/// `description` and `title` string inside a schema. Models read it every
/// turn. Fixed: 4 KiB.
pub const MAX_DESCRIPTION_BYTES: usize = 4 << 10;

/// Largest `instructions` a plugin's `info()` may give, in bytes. Fixed: 8 KiB.
pub const MAX_INSTRUCTIONS_BYTES: usize = 8 << 10;

/// Longest plugin version, in bytes (the name follows the tool-name grammar,
/// `^[a-zA-Z0-9_-]{1,64}$`). Fixed: 64.
pub const MAX_VERSION_BYTES: usize = 64;

/// Most tools one plugin may declare (OpenAI accepts 128 per request). Fixed: 128.
pub const MAX_TOOLS: usize = 128;

/// Most text one plugin may put before a model, in bytes: its instructions
/// and every tool's name, description and schemas together, which
/// `/api/tools` serves and a model reads every turn. Fixed: 1 MiB.
pub const MAX_DECLARED_BYTES: usize = 1 << 20;

pub(super) fn invalid_plugin(origin: &str, reason: String) -> LoadError {
    LoadError::InvalidPlugin { origin: origin.into(), reason }
}

/// The count and total size of what `info()` and `tools()` returned, checked
/// before any schema is parsed, so that a plugin declaring a million tools
/// costs one pass over their lengths.
pub(super) fn check_declared_size(
    info: &guest::PluginInfo,
    specs: &[wit::ToolSpec],
    origin: &str,
) -> Result<(), LoadError> {
    check_info(&info.name, &info.version, info.instructions.as_deref(), origin)?;
    if specs.len() > MAX_TOOLS {
        return Err(invalid_plugin(
            origin,
            format!("the plugin declares {} tools; the limit is {MAX_TOOLS}", specs.len()),
        ));
    }
    // Each tool's own limits first: their errors name the tool.
    for spec in specs {
        let shown: String = spec.name.chars().take(80).collect();
        if let Some(problem) = spec.title.as_deref().and_then(title_problem) {
            return Err(invalid_spec(origin, &shown, &problem));
        }
        if spec.description.len() > MAX_DESCRIPTION_BYTES {
            return Err(invalid_spec(
                origin,
                &shown,
                &format!("the description is {} bytes; the limit is {MAX_DESCRIPTION_BYTES}", spec.description.len()),
            ));
        }
        for (what, text) in [("parameters", Some(&spec.parameters)), ("output", spec.output_schema.as_ref())] {
            if let Some(text) = text
                && text.len() > MAX_SCHEMA_BYTES
            {
                return Err(invalid_spec(
                    origin,
                    &shown,
                    &format!("the {what} schema is {} bytes; the limit is {MAX_SCHEMA_BYTES}", text.len()),
                ));
            }
        }
    }
    let text = |s: &wit::ToolSpec| {
        s.name.len()
            + s.title.as_ref().map_or(0, String::len)
            + s.description.len()
            + s.parameters.len()
            + s.output_schema.as_ref().map_or(0, String::len)
    };
    let total = specs.iter().map(text).sum::<usize>() + info.instructions.as_ref().map_or(0, String::len);
    check_total(total, origin)
}

pub(super) fn check_total(total: usize, origin: &str) -> Result<(), LoadError> {
    if total > MAX_DECLARED_BYTES {
        return Err(invalid_plugin(
            origin,
            format!(
                "the plugin's instructions, tool names, descriptions and schemas are {total} bytes; the limit is {MAX_DECLARED_BYTES}"
            ),
        ));
    }
    Ok(())
}

/// The plugin's name (the tool-name grammar: it reaches logs, metrics and
/// `/api/tools`), version and instructions.
pub(super) fn check_info(name: &str, version: &str, instructions: Option<&str>, origin: &str) -> Result<(), LoadError> {
    if !is_valid_name(name) {
        // Shown escaped and cut: the name may hold newlines meant to forge log lines.
        let shown: String = name.chars().take(80).collect();
        return Err(invalid_plugin(
            origin,
            format!("the plugin name \"{}\" must match ^[a-zA-Z0-9_-]{{1,64}}$", shown.escape_debug()),
        ));
    }
    if version.len() > MAX_VERSION_BYTES {
        return Err(invalid_plugin(
            origin,
            format!("the plugin version is {} bytes; the limit is {MAX_VERSION_BYTES}", version.len()),
        ));
    }
    let instructions = instructions.map_or(0, str::len);
    if instructions > MAX_INSTRUCTIONS_BYTES {
        return Err(invalid_plugin(
            origin,
            format!("the plugin's instructions are {instructions} bytes; the limit is {MAX_INSTRUCTIONS_BYTES}"),
        ));
    }
    Ok(())
}

/// What the plugin says about itself, whether just described or cached:
/// a plugin name of the tool-name grammar (it reaches logs, metrics and
/// `/api/tools`), bounded version and instructions, and every text a model
/// reads bounded (docs/tool-authors.md, "Limits").
pub(super) fn check_manifest(manifest: &manifest::Manifest, origin: &str) -> Result<(), LoadError> {
    let info = &manifest.info;
    check_info(&info.name, &info.version, info.instructions.as_deref(), origin)?;
    let instructions = info.instructions.as_ref().map_or(0, String::len);
    if manifest.tools.len() > MAX_TOOLS {
        return Err(invalid_plugin(
            origin,
            format!("the plugin declares {} tools; the limit is {MAX_TOOLS}", manifest.tools.len()),
        ));
    }
    let mut total = instructions;
    for spec in &manifest.tools {
        if let Some(problem) = spec.title.as_deref().and_then(title_problem) {
            return Err(invalid_spec(origin, &spec.name, &problem));
        }
        if spec.description.len() > MAX_DESCRIPTION_BYTES {
            return Err(invalid_spec(
                origin,
                &spec.name,
                &format!("the description is {} bytes; the limit is {MAX_DESCRIPTION_BYTES}", spec.description.len()),
            ));
        }
        for (what, schema) in [("parameters", Some(&spec.parameters)), ("output", spec.output_schema.as_ref())] {
            if let Some(bytes) = schema.and_then(longest_description)
                && bytes > MAX_DESCRIPTION_BYTES
            {
                return Err(invalid_spec(
                    origin,
                    &spec.name,
                    &format!(
                        "a description in the {what} schema is {bytes} bytes; the limit is {MAX_DESCRIPTION_BYTES}"
                    ),
                ));
            }
        }
        total += spec.name.len()
            + spec.title.as_ref().map_or(0, String::len)
            + spec.description.len()
            + spec.parameters.to_string().len()
            + spec.output_schema.as_ref().map_or(0, |s| s.to_string().len());
    }
    check_total(total, origin)
}

/// Why a tool's title is refused: longer than [`MAX_TITLE_BYTES`], or with
/// control characters (it reaches logs, consoles and MCP clients).
pub(super) fn title_problem(title: &str) -> Option<String> {
    if title.len() > MAX_TITLE_BYTES {
        Some(format!("the title is {} bytes; the limit is {MAX_TITLE_BYTES}", title.len()))
    } else if title.chars().any(char::is_control) {
        Some("the title must not contain control characters".into())
    } else {
        None
    }
}

/// The longest `description` or `title` string anywhere in `schema`, in bytes.
pub(super) fn longest_description(schema: &serde_json::Value) -> Option<usize> {
    let mut longest = None;
    let mut stack = vec![schema];
    while let Some(node) = stack.pop() {
        match node {
            serde_json::Value::Object(obj) => {
                for (key, value) in obj {
                    match value {
                        serde_json::Value::String(s) if key == "description" || key == "title" => {
                            longest = longest.max(Some(s.len()));
                        }
                        other => stack.push(other),
                    }
                }
            }
            serde_json::Value::Array(items) => stack.extend(items),
            _ => {}
        }
    }
    longest
}

pub(super) fn convert_spec(spec: wit::ToolSpec, origin: &str) -> Result<ToolSpec, LoadError> {
    if !is_valid_name(&spec.name) {
        let shown: String = spec.name.chars().take(80).collect();
        return Err(invalid_spec(origin, &shown, "a tool name must match ^[a-zA-Z0-9_-]{1,64}$"));
    }
    let parse = |text: &str, what: &str| -> Result<serde_json::Value, LoadError> {
        if text.len() > MAX_SCHEMA_BYTES {
            return Err(invalid_spec(
                origin,
                &spec.name,
                &format!("the {what} schema is {} bytes; the limit is {MAX_SCHEMA_BYTES}", text.len()),
            ));
        }
        serde_json::from_str(text)
            .map_err(|e| invalid_spec(origin, &spec.name, &format!("the {what} schema is not JSON: {e}")))
    };
    let parameters = parse(&spec.parameters, "parameters")?;
    let output_schema = spec.output_schema.as_deref().map(|s| parse(s, "output")).transpose()?;
    Ok(ToolSpec {
        parameters,
        output_schema,
        title: spec.title,
        description: spec.description,
        strict: spec.strict,
        parallel: spec.parallel,
        retries: spec.retries,
        timeout_ms: spec.timeout_ms,
        max_output_chars: spec.max_output_chars,
        approval: match spec.approval {
            wit::Approval::Never => ApprovalMode::Never,
            wit::Approval::Always => ApprovalMode::Always,
            wit::Approval::AskPlugin => ApprovalMode::AskPlugin,
        },
        hints: ToolHints::stated(
            spec.hints.read_only,
            spec.hints.destructive,
            spec.hints.idempotent,
            spec.hints.open_world,
        ),
        name: spec.name,
    })
}
