//! Arguments: parse, coerce and validate the model's argument text against a
//! tool's schema (docs/semantics.md §3 with docs/semantics.md D1–D4). A validator is compiled once per
//! tool: at load time, or at the tool's first check when its schema was
//! already accepted by this version of lovia (`ArgumentValidator::deferred`).

mod budget;
mod checks;
mod coerce;
mod message;
mod walk;

pub use budget::INLINE_STEPS;
use budget::{Budget, Failed, INLINE_NODES, Stop, at_most_nodes, nested_deeper_than, until};
use checks::{check_fan, check_references, pattern_weights};
use coerce::coerce;
use jsonschema::error::ValidationErrorKind;
use jsonschema::{Draft, PatternOptions, Validator};
use message::{literal, or_list, plural, pointer_to_path, type_message};
use serde_json::Value;
use std::collections::HashMap;
use std::time::Instant;
use walk::{Schema, walk};

/// Why the model's arguments were rejected. `Display` is the exact text the
/// model reads (without the `Tool error: ` prefix for [`ArgumentError::Invalid`]).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum ArgumentError {
    /// The text is not JSON.
    #[error("Invalid JSON in tool arguments: {message}")]
    InvalidJson {
        /// The decoder's message.
        message: String,
    },
    /// The JSON is not an object.
    #[error("Invalid tool arguments: expected a JSON object, got {got}.")]
    NotObject {
        /// The JSON type found (`array`, `string`, `integer`, `number`, `boolean`, `null`).
        got: &'static str,
    },
    /// The object does not match the schema.
    #[error("Invalid arguments for tool '{tool}': {}", problems.iter().map(|(p, m)| format!("{p}: {m}")).collect::<Vec<_>>().join("; "))]
    Invalid {
        /// The tool's name.
        tool: String,
        /// `(path, message)` pairs in declaration order; the path is dotted
        /// (`p.x`, `xs.1`) and `arguments` when empty.
        problems: Vec<(String, String)>,
    },
    /// The call's deadline passed while its arguments were being checked
    /// ([`ArgumentValidator::prepare_value_by`]); the executor reports it as
    /// the call's timeout.
    #[error("the call's deadline passed while its arguments were checked")]
    DeadlinePassed,
}

/// A tool's compiled argument checker.
#[derive(Debug, Clone)]
pub struct ArgumentValidator {
    tool: String,
    schema: Value,
    strict: bool,
    /// Compiled by [`ArgumentValidator::new`], or at the first check of a
    /// [`ArgumentValidator::deferred`] one.
    compiled: std::sync::OnceLock<Result<Compiled, SchemaError>>,
}

/// What compiling a schema makes.
#[derive(Debug, Clone)]
struct Compiled {
    validator: Validator,
    /// Top-level property names in declaration order, to order the messages.
    order: Vec<String>,
    /// The weight of every `pattern` and `patternProperties` key in the
    /// schema: the states of the automaton it compiles to.
    patterns: HashMap<String, u64>,
}

/// Why a tool's parameters schema was refused.
#[non_exhaustive]
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum SchemaError {
    /// The schema does not describe an object.
    #[error("the parameters schema must have \"type\": \"object\"")]
    NotAnObject,
    /// The schema is not valid JSON Schema (2020-12).
    #[error("invalid parameters schema: {message}")]
    Invalid {
        /// The schema compiler's message.
        message: String,
    },
    /// Too many schema nodes can apply to the arguments at one nesting depth
    /// (`$ref`s shared between `anyOf` branches multiply): validating a call
    /// could take time exponential in its size.
    #[error(
        "the parameters schema lets {figure} schema nodes apply at nesting depth {depth} of the arguments; the limit is {limit}"
    )]
    TooComplex {
        /// How many schema nodes apply at `depth`, counted with repetition.
        figure: u64,
        /// The nesting depth of the arguments (the top-level object is 0).
        depth: usize,
        /// [`MAX_SCHEMA_FAN`].
        limit: u64,
    },
    /// A `$ref` is not a JSON pointer into the schema itself, or the schema
    /// uses `$id` below its root, `$dynamicRef`, `$recursiveRef` or
    /// `contentSchema`: references would resolve, or documents be validated,
    /// where the load-time check cannot follow.
    #[error(
        "the parameters schema uses {keyword} {value}; only local references (\"#/...\") are supported, and no $id below the root, $dynamicRef, $recursiveRef or contentSchema"
    )]
    UnsupportedReference {
        /// `$ref`, `$id`, `$dynamicRef`, `$recursiveRef` or `contentSchema`.
        keyword: &'static str,
        /// Its value as JSON (cut to 200 characters).
        value: String,
    },
    /// A `pattern` (or a `patternProperties` key, or a pattern under
    /// `propertyNames`) compiles to an automaton larger than
    /// [`MAX_PATTERN_STATES`]: matching it costs that much per byte checked.
    #[error(
        "the parameters schema's pattern \"{pattern}\" compiles to {states} automaton states; the limit is {limit}"
    )]
    PatternTooComplex {
        /// The pattern (cut to 200 characters).
        pattern: String,
        /// The states of its compiled automaton.
        states: u64,
        /// [`MAX_PATTERN_STATES`].
        limit: u64,
    },
    /// A chain of `$ref`s leads back to where it started without descending
    /// into the arguments: validation would never end.
    #[error("the parameters schema's $ref \"{reference}\" leads back to itself")]
    RefCycle {
        /// The reference that closes the cycle (cut to 200 characters).
        reference: String,
    },
}

/// The deepest nesting of argument values accepted: the top-level object is
/// depth 0, its values depth 1. Deeper arguments are rejected before any
/// schema work, so coercion, the load-time figure and the validator's
/// recursion are all bounded by it. Fixed: 64.
pub const MAX_ARGUMENT_DEPTH: usize = 64;

/// The most schema nodes that may apply at one nesting depth of the
/// arguments, counted at load with repetition (every `$ref` unfolded, every
/// combinator branch and every property's schema counted, up to
/// [`MAX_ARGUMENT_DEPTH`]); a schema above it is refused with
/// [`SchemaError::TooComplex`]. Real schemas stay in the tens; a `$ref`
/// shared between union branches doubles it per level. Fixed: 10,000.
pub const MAX_SCHEMA_FAN: u64 = 10_000;

/// The work budget of one argument check, in steps (one step is one schema
/// node applied to one argument value, by coercion or by the cost estimate
/// that precedes validation). Past it the call is rejected instead of burning
/// CPU. Fixed: 1,000,000 (about half a second in an unoptimised test build,
/// where `tests/all/threat/arguments.rs` prints the figure).
pub const MAX_ARGUMENT_STEPS: u64 = 1_000_000;

/// The largest automaton a schema's pattern may compile to, in states of
/// its Thompson NFA (after jsonschema's ECMA-to-Rust translation); a schema
/// with a larger one is refused at load with
/// [`SchemaError::PatternTooComplex`]. Matching costs up to one step of work
/// per state per byte of the string, so this bounds the cost of a byte.
/// `^A-[0-9]{4}$` has a dozen states; Fixed: 2,000.
pub const MAX_PATTERN_STATES: u64 = 2_000;

/// The longest string (argument value, or object key under
/// `patternProperties` or `propertyNames`) checked against a pattern, in
/// bytes; a longer one is rejected before any matching. Fixed: 65,536.
pub const MAX_PATTERN_SUBJECT_BYTES: usize = 64 << 10;

/// The compiled size a pattern may reach in the `regex` engine (its
/// `size_limit`), in bytes: a pattern past it does not compile and the
/// schema is refused. Fixed: 1 MiB.
const PATTERN_SIZE_LIMIT: usize = 1 << 20;

/// The lazy DFA's cache of one pattern (the `regex` engine's
/// `dfa_size_limit`), in bytes: past it the engine falls back to its
/// linear-time NFA simulation. Fixed: 2 MiB.
const PATTERN_DFA_SIZE_LIMIT: usize = 2 << 20;

/// Nesting past this depth is not coerced; [`MAX_ARGUMENT_DEPTH`] rejects it first.
const MAX_DEPTH: usize = MAX_ARGUMENT_DEPTH;

impl ArgumentValidator {
    /// Compiles `schema`. Fails with a readable reason when it is not a valid
    /// JSON Schema (2020-12) for an object.
    pub fn new(tool: &str, schema: &Value, strict: bool) -> Result<Self, SchemaError> {
        let compiled = Self::compile(schema)?;
        Ok(Self { tool: tool.into(), schema: schema.clone(), strict, compiled: Ok(compiled).into() })
    }

    /// A validator of a schema that this version of lovia has accepted
    /// before (a plugin's description from the artifact cache, sealed and
    /// keyed by lovia's version), compiled at its first check instead of
    /// now: compiling was about a third of a cached load
    /// (docs/performance.md, round five). Should the schema fail to compile
    /// after all, every check answers [`ArgumentError::Invalid`] saying so.
    pub(crate) fn deferred(tool: &str, schema: &Value, strict: bool) -> Self {
        Self { tool: tool.into(), schema: schema.clone(), strict, compiled: std::sync::OnceLock::new() }
    }

    /// The compiled schema, compiled now if it is not yet.
    fn compiled(&self) -> Result<&Compiled, ArgumentError> {
        self.compiled.get_or_init(|| Self::compile(&self.schema)).as_ref().map_err(|e| ArgumentError::Invalid {
            tool: self.tool.clone(),
            problems: vec![("arguments".to_owned(), format!("the tool's parameters schema cannot be used: {e}"))],
        })
    }

    fn compile(schema: &Value) -> Result<Compiled, SchemaError> {
        if schema.get("type").and_then(Value::as_str) != Some("object") {
            return Err(SchemaError::NotAnObject);
        }
        // Strict only changes the schema the model sees: an omitted argument
        // that has a default still gets it (docs/semantics.md §2 rule 9).
        let mut checked = schema.clone();
        let defaulted: Vec<String> = schema
            .get("properties")
            .and_then(Value::as_object)
            .map(|p| p.iter().filter(|(_, s)| s.get("default").is_some()).map(|(k, _)| k.clone()).collect())
            .unwrap_or_default();
        if let Some(Value::Array(required)) = checked.get_mut("required") {
            required.retain(|r| r.as_str().is_none_or(|r| !defaulted.iter().any(|d| d == r)));
        }
        // Patterns run on the `regex` engine, whose matching is linear in
        // the string (no backtracking, so no lookaround or backreference),
        // with bounded compiled sizes.
        let patterns = PatternOptions::regex().size_limit(PATTERN_SIZE_LIMIT).dfa_size_limit(PATTERN_DFA_SIZE_LIMIT);
        let validator = jsonschema::options()
            .with_draft(Draft::Draft202012)
            .with_pattern_options(patterns)
            .build(&checked)
            .map_err(|e| SchemaError::Invalid { message: e.to_string() })?;
        check_references(&checked)?;
        check_fan(&checked)?;
        let patterns = pattern_weights(&checked)?;
        let order = schema
            .get("properties")
            .and_then(Value::as_object)
            .map(|p| p.keys().cloned().collect())
            .unwrap_or_default();
        Ok(Compiled { validator, order, patterns })
    }

    /// Parses `raw` (empty text counts as `{}`), coerces it (docs/semantics.md D3),
    /// drops unknown keys unless the tool is strict (D2), and validates it.
    /// Returns the object the tool receives.
    pub fn prepare(&self, raw: &str) -> Result<Value, ArgumentError> {
        self.prepare_value(parse_object(raw)?)
    }

    /// [`ArgumentValidator::prepare`] for arguments already parsed, so that a
    /// call's text is parsed once: `value` must be an object.
    pub fn prepare_value(&self, value: Value) -> Result<Value, ArgumentError> {
        self.prepare_value_by(value, None)
    }

    /// [`ArgumentValidator::prepare_value`] that gives up with
    /// [`ArgumentError::DeadlinePassed`] once `deadline` passes, so that the
    /// check counts against the call's timeout. The work is bounded anyway
    /// ([`MAX_ARGUMENT_DEPTH`], [`MAX_ARGUMENT_STEPS`]).
    pub fn prepare_value_by(&self, value: Value, deadline: Option<Instant>) -> Result<Value, ArgumentError> {
        self.prepare_within(value, deadline, MAX_ARGUMENT_STEPS).unwrap_or_else(|| {
            // Unreachable: only a budget below MAX_ARGUMENT_STEPS hands the check back.
            Err(self.too_large())
        })
    }

    /// [`ArgumentValidator::prepare_value_by`] for async callers: a check that
    /// fits in [`INLINE_STEPS`] runs in place, unless the schema has a
    /// pattern; a costlier one starts again on the blocking pool, so that it
    /// never holds a tokio worker that other calls (other tenants',
    /// `/healthz`) are waiting for. The deadline holds for the caller even
    /// while a check runs on the pool: the answer is then
    /// [`ArgumentError::DeadlinePassed`], and the check, bounded by its
    /// budget, ends on its own.
    pub async fn prepare_value_async(
        self: &std::sync::Arc<Self>,
        value: Value,
        deadline: Option<Instant>,
    ) -> Result<Value, ArgumentError> {
        self.prepare_value_charged(value, None, deadline, None).await
    }

    /// [`ArgumentValidator::prepare_value_async`] whose costly check is
    /// charged to a tenant's CPU share (`cpu`): it waits while the tenant is
    /// past its share of the window, and its time counts in the share, so
    /// a tenant's argument bombs and its spinning calls together take no
    /// more than its cores.
    ///
    /// `source` is the text `value` was parsed from, if the caller has it:
    /// a small value is then tried in place and, should the try run out of
    /// steps, parsed again for the costly check, instead of copied up front
    /// for a check that almost never runs out (a copy on every call's path).
    pub(crate) async fn prepare_value_charged(
        self: &std::sync::Arc<Self>,
        mut value: Value,
        source: Option<&str>,
        deadline: Option<Instant>,
        cpu: Option<std::sync::Arc<crate::sandbox::TenantCpu>>,
    ) -> Result<Value, ArgumentError> {
        // A small value is tried with a small budget (on the value, or on a
        // copy kept in case the try runs out of steps); a large one goes
        // straight to the costly checks. Matching a pattern is work that no
        // step can interrupt, so a schema with patterns is never checked in place.
        if at_most_nodes(&value, INLINE_NODES) {
            let tried = value_or_copy(&mut value, source);
            let tried = if self.compiled()?.patterns.is_empty() {
                self.prepare_within(tried, deadline, INLINE_STEPS)
            } else {
                let this = self.clone();
                let task = tokio::task::spawn_blocking(move || this.prepare_within(tried, deadline, INLINE_STEPS));
                match until(deadline, task).await? {
                    Ok(tried) => tried,
                    // The check does not panic; should it, the call is refused, not the host.
                    Err(_) => Some(Err(self.too_large())),
                }
            };
            if let Some(done) = tried {
                return done;
            }
            if let Some(text) = source {
                value = parse_object(text)?;
            }
        }
        // A tenant out of its CPU share waits for a token first.
        while let Some(until) = cpu.as_ref().and_then(|c| c.over()) {
            if deadline.is_some_and(|d| until >= d) {
                return Err(ArgumentError::DeadlinePassed);
            }
            tokio::time::sleep_until(until.into()).await;
        }
        // Costly checks run one fewer at a time than there are cores, so that
        // one tenant's argument bombs, each up to its work budget, leave a
        // core to everyone else; the wait counts against the deadline.
        let permit = match deadline {
            Some(at) => tokio::time::timeout_at(at.into(), costly_checks().acquire_owned())
                .await
                .map_err(|_| ArgumentError::DeadlinePassed)?,
            None => costly_checks().acquire_owned().await,
        };
        let Ok(permit) = permit else { return Err(self.too_large()) };
        let this = self.clone();
        // The permit goes with the check: a check the caller stopped waiting
        // for still holds its place until it ends.
        // The check's core is taken from the tenant's share while it runs
        // (not charged after it), so its guests cannot run on beside it.
        let charged = cpu.map(InFlight::start);
        let task = tokio::task::spawn_blocking(move || {
            let checked = this.prepare_value_by(value, deadline);
            drop(permit);
            drop(charged);
            checked
        });
        until(deadline, task).await?.unwrap_or_else(|_| Err(self.too_large()))
    }

    fn too_large(&self) -> ArgumentError {
        ArgumentError::Invalid {
            tool: self.tool.clone(),
            problems: vec![(
                "arguments".to_owned(),
                format!("Input is too large to check against this tool's schema (over {MAX_ARGUMENT_STEPS} steps)"),
            )],
        }
    }

    /// The check with a budget of `max_steps`; `None` when a budget below
    /// [`MAX_ARGUMENT_STEPS`] ran out (the caller may start again with more).
    fn prepare_within(
        &self,
        mut value: Value,
        deadline: Option<Instant>,
        max_steps: u64,
    ) -> Option<Result<Value, ArgumentError>> {
        let mut budget = Budget::new(deadline, max_steps);
        match self.check(&mut value, &mut budget) {
            Ok(()) => Some(Ok(value)),
            Err(Failed::Argument(e)) => Some(Err(e)),
            Err(Failed::Stopped(Stop::Deadline)) => Some(Err(ArgumentError::DeadlinePassed)),
            Err(Failed::Stopped(Stop::Steps)) if max_steps < MAX_ARGUMENT_STEPS => None,
            Err(Failed::Stopped(Stop::Steps)) => Some(Err(self.too_large())),
            Err(Failed::Stopped(Stop::Subject)) => Some(Err(ArgumentError::Invalid {
                tool: self.tool.clone(),
                problems: vec![(
                    "arguments".to_owned(),
                    format!(
                        "Input is too long to match against this tool's patterns (a string over {MAX_PATTERN_SUBJECT_BYTES} bytes)"
                    ),
                )],
            })),
        }
    }

    /// Coerces and validates `value` in place within `budget`.
    fn check(&self, value: &mut Value, budget: &mut Budget) -> Result<(), Failed> {
        // The deadline may have passed already (a slow parse, a wait for the pool).
        budget.check_deadline()?;
        if !value.is_object() {
            return Err(Failed::Argument(ArgumentError::NotObject { got: json_type(value) }));
        }
        if nested_deeper_than(value, MAX_ARGUMENT_DEPTH) {
            return Err(Failed::Argument(ArgumentError::Invalid {
                tool: self.tool.clone(),
                problems: vec![(
                    "arguments".to_owned(),
                    format!("Input should be nested at most {MAX_ARGUMENT_DEPTH} levels deep"),
                )],
            }));
        }
        let compiled = self.compiled().map_err(Failed::Argument)?;
        coerce(value, &self.schema, &self.schema, !self.strict, 0, budget)?;
        // The validator cannot be interrupted or metered: it runs only after
        // an estimate of its own work fits the budget. A valid instance is
        // settled by `is_valid`, which checks `type` before anything else.
        let schema = Schema { root: &self.schema, patterns: &compiled.patterns };
        walk(value, &[&self.schema], schema, true, budget)?;
        budget.check_deadline()?;
        if compiled.validator.is_valid(value) {
            self.apply_defaults(value);
            return Ok(());
        }
        // Collecting errors applies every keyword of every branch, whatever
        // the `type` says: estimate that too before asking for the errors.
        walk(value, &[&self.schema], schema, false, budget)?;
        budget.check_deadline()?;
        let mut problems: Vec<(String, String)> = Vec::new();
        for error in compiled.validator.iter_errors(value) {
            let path = pointer_to_path(error.instance_path().as_str());
            self.describe(&error, path, &mut problems);
        }
        if problems.is_empty() {
            self.apply_defaults(value);
            return Ok(());
        }
        let rank = |path: &str| {
            let first = path.split('.').next().unwrap_or("");
            compiled.order.iter().position(|k| k == first).unwrap_or(usize::MAX)
        };
        problems.sort_by_key(|(p, _)| rank(p));
        problems.dedup();
        Err(Failed::Argument(ArgumentError::Invalid { tool: self.tool.clone(), problems }))
    }

    /// Omitted arguments receive their declared default (docs/semantics.md §3B).
    fn apply_defaults(&self, value: &mut Value) {
        let (Some(props), Some(obj)) =
            (self.schema.get("properties").and_then(Value::as_object), value.as_object_mut())
        else {
            return;
        };
        for (name, schema) in props {
            if let Some(default) = schema.get("default")
                && !obj.contains_key(name)
            {
                obj.insert(name.clone(), default.clone());
            }
        }
    }

    fn describe(&self, error: &jsonschema::ValidationError<'_>, path: Vec<String>, out: &mut Vec<(String, String)>) {
        let join = |mut p: Vec<String>, extra: Option<&str>| {
            if let Some(e) = extra {
                p.push(e.to_owned());
            }
            if p.is_empty() { "arguments".to_owned() } else { p.join(".") }
        };
        let instance = error.instance();
        let message = match error.kind() {
            ValidationErrorKind::Required { property } => {
                let name = property.as_str().unwrap_or_default().to_owned();
                out.push((join(path, Some(&name)), "Field required".into()));
                return;
            }
            ValidationErrorKind::AdditionalProperties { unexpected } => {
                for key in unexpected {
                    out.push((join(path.clone(), Some(key)), "Extra inputs are not permitted".into()));
                }
                return;
            }
            ValidationErrorKind::AnyOf { context } | ValidationErrorKind::OneOfNotValid { context } => {
                // `Option<T>` is `anyOf [T, null]`: report why the value is not a T.
                // The validator already collected each branch's errors (with
                // absolute paths); nothing is compiled per call.
                if let Some(branch) = self.single_non_null_branch(error.schema_path().as_str())
                    && let Some(errors) = context.get(branch)
                {
                    let before = out.len();
                    for e in errors {
                        self.describe(e, pointer_to_path(e.instance_path().as_str()), out);
                    }
                    if out.len() > before {
                        return;
                    }
                }
                "Input does not match any allowed shape".to_owned()
            }
            ValidationErrorKind::Type { kind } => type_message(kind, instance),
            ValidationErrorKind::Enum { options } => match options.as_array() {
                Some(values) => format!("Input should be {}", or_list(values)),
                None => "Input should be one of the allowed values".into(),
            },
            ValidationErrorKind::Constant { expected_value } => format!("Input should be {}", literal(expected_value)),
            ValidationErrorKind::Minimum { limit } => format!("Input should be greater than or equal to {limit}"),
            ValidationErrorKind::Maximum { limit } => format!("Input should be less than or equal to {limit}"),
            ValidationErrorKind::ExclusiveMinimum { limit } => format!("Input should be greater than {limit}"),
            ValidationErrorKind::ExclusiveMaximum { limit } => format!("Input should be less than {limit}"),
            ValidationErrorKind::MinLength { limit } => {
                format!("String should have at least {limit} {}", plural(*limit, "character"))
            }
            ValidationErrorKind::MaxLength { limit } => {
                format!("String should have at most {limit} {}", plural(*limit, "character"))
            }
            ValidationErrorKind::MinItems { limit } => {
                format!("Array should have at least {limit} {}", plural(*limit, "item"))
            }
            ValidationErrorKind::MaxItems { limit } => {
                format!("Array should have at most {limit} {}", plural(*limit, "item"))
            }
            ValidationErrorKind::Pattern { pattern } => format!("String should match pattern '{pattern}'"),
            ValidationErrorKind::UniqueItems => "Array items should be unique".into(),
            ValidationErrorKind::MultipleOf { .. } => "Input should be a multiple of the allowed step".into(),
            _ => error.to_string(),
        };
        out.push((join(path, None), message));
    }

    /// For an `anyOf`/`oneOf` at `schema_path` with one non-null branch: that
    /// branch's index.
    fn single_non_null_branch(&self, schema_path: &str) -> Option<usize> {
        let node = self.schema.pointer(schema_path)?;
        let mut branches =
            node.as_array()?.iter().enumerate().filter(|(_, b)| b.get("type") != Some(&Value::from("null")));
        match (branches.next(), branches.next()) {
            (Some((i, _)), None) => Some(i),
            _ => None,
        }
    }
}

/// Parses the argument text (docs/semantics.md §3A).
pub(crate) fn parse_object(raw: &str) -> Result<Value, ArgumentError> {
    let text = if raw.is_empty() { "{}" } else { raw };
    let value: Value = serde_json::from_str(text).map_err(|e| ArgumentError::InvalidJson { message: e.to_string() })?;
    if !value.is_object() {
        return Err(ArgumentError::NotObject { got: json_type(&value) });
    }
    Ok(value)
}

/// The JSON type name used in messages (docs/semantics.md D4: JSON names, not Python's).
pub(crate) fn json_type(value: &Value) -> &'static str {
    match value {
        Value::Null => "null",
        Value::Bool(_) => "boolean",
        Value::Number(n) if n.is_i64() || n.is_u64() => "integer",
        Value::Number(_) => "number",
        Value::String(_) => "string",
        Value::Array(_) => "array",
        Value::Object(_) => "object",
    }
}

/// A costly check counted in its tenant's CPU share until it drops
/// (whether the check ends or its task is dropped).
struct InFlight(std::sync::Arc<crate::sandbox::TenantCpu>);

impl InFlight {
    fn start(cpu: std::sync::Arc<crate::sandbox::TenantCpu>) -> InFlight {
        cpu.check_started();
        InFlight(cpu)
    }
}

impl Drop for InFlight {
    fn drop(&mut self) {
        self.0.check_ended();
    }
}

/// The costly argument checks that may run at once, process-wide: one
/// fewer than the cores (at least one).
fn costly_checks() -> std::sync::Arc<tokio::sync::Semaphore> {
    static CHECKS: std::sync::OnceLock<std::sync::Arc<tokio::sync::Semaphore>> = std::sync::OnceLock::new();
    CHECKS
        .get_or_init(|| {
            let cores = std::thread::available_parallelism().map_or(1, std::num::NonZero::get);
            std::sync::Arc::new(tokio::sync::Semaphore::new(cores.saturating_sub(1).max(1)))
        })
        .clone()
}

/// The value a first, small-budget try of the checks takes: `value` itself
/// when it can be parsed again from `source`, otherwise a copy.
fn value_or_copy(value: &mut Value, source: Option<&str>) -> Value {
    match source {
        Some(_) => std::mem::take(value),
        None => value.clone(),
    }
}

#[cfg(test)]
mod tests {
    use super::checks::pattern_states;
    use super::*;
    use serde_json::Map;
    use serde_json::json;

    fn object(properties: Value) -> Value {
        json!({"properties": properties, "type": "object"})
    }

    /// 30 levels of `anyOf` whose two branches share the next level.
    fn ref_bomb(levels: usize) -> Value {
        let mut defs = Map::new();
        for k in 0..levels {
            let branch = json!({"properties": {"a": {"$ref": format!("#/$defs/X{}", k + 1)}}});
            defs.insert(format!("X{k}"), json!({"anyOf": [branch.clone(), branch]}));
        }
        defs.insert(format!("X{levels}"), json!({"type": "integer"}));
        json!({"$defs": defs, "properties": {"a": {"$ref": "#/$defs/X0"}}, "type": "object"})
    }

    #[test]
    fn shared_references_between_union_branches_are_refused_with_the_figure() {
        let err = ArgumentValidator::new("t", &ref_bomb(30), false).expect_err("exponential");
        assert_eq!(err, SchemaError::TooComplex { figure: 16384, depth: 13, limit: MAX_SCHEMA_FAN });
        // 2^(d+1) nodes at depth d: 12 levels stay under the limit.
        assert!(ArgumentValidator::new("t", &ref_bomb(12), false).is_ok());
    }

    #[test]
    fn a_recursive_schema_that_descends_is_accepted_and_checked() {
        let schema = json!({
            "$defs": {"node": {"properties": {"n": {"type": "integer"}, "kids": {"items": {"$ref": "#/$defs/node"}, "type": "array"}}, "type": "object"}},
            "properties": {"root": {"$ref": "#/$defs/node"}}, "type": "object"
        });
        let v = ArgumentValidator::new("t", &schema, false).expect("a tree is fine");
        let mut tree = json!({"n": "1"});
        for _ in 0..30 {
            tree = json!({"n": "2", "kids": [tree]});
        }
        let out = v.prepare_value(json!({"root": tree})).expect("valid");
        assert_eq!(out["root"]["n"], json!(2));
    }

    #[test]
    fn a_reference_cycle_in_place_is_refused() {
        let schema = json!({"$defs": {"a": {"allOf": [{"$ref": "#/$defs/a"}]}}, "properties": {"x": {"$ref": "#/$defs/a"}}, "type": "object"});
        let err = ArgumentValidator::new("t", &schema, false).expect_err("cycle");
        assert_eq!(err, SchemaError::RefCycle { reference: "#/$defs/a".into() });
        assert_eq!(err.to_string(), r##"the parameters schema's $ref "#/$defs/a" leads back to itself"##);
    }

    #[test]
    fn rebasing_references_are_refused() {
        let schema = object(json!({"x": {"$id": "https://example.com/x", "type": "string"}}));
        let err = ArgumentValidator::new("t", &schema, false).expect_err("$id below the root");
        assert_eq!(
            err,
            SchemaError::UnsupportedReference { keyword: "$id", value: r#""https://example.com/x""#.into() }
        );
        assert_eq!(
            err.to_string(),
            r##"the parameters schema uses $id "https://example.com/x"; only local references ("#/...") are supported, and no $id below the root, $dynamicRef, $recursiveRef or contentSchema"##
        );
        let schema = object(json!({"x": {"$ref": "#/$defs/missing%20one"}}));
        assert!(matches!(
            ArgumentValidator::new("t", &schema, false),
            Err(SchemaError::UnsupportedReference { keyword: "$ref", .. } | SchemaError::Invalid { .. })
        ));
    }

    #[test]
    fn a_percent_encoded_reference_cannot_hide_its_target() {
        // The validator would decode `a%62` to `ab` (the bomb) while the
        // check looked at the harmless key `a%62`: such a reference is refused.
        let bomb = json!({"anyOf": [{"type": "string"}, {"type": "integer"}]});
        let mut schema = object(json!({"x": {"$ref": "#/$defs/a%62"}}));
        schema["$defs"] = json!({"a%62": {"type": "string"}, "ab": bomb});
        let err = ArgumentValidator::new("t", &schema, false).expect_err("a % in a $ref");
        assert!(matches!(err, SchemaError::UnsupportedReference { keyword: "$ref", .. }), "{err:?}");
    }

    #[test]
    fn nested_unions_pick_the_branch_coercion_always_picked() {
        let schema = object(json!({
            "v": {"anyOf": [
                {"type": "array", "items": {"type": "integer"}},
                {"anyOf": [{"type": "integer"}, {"type": "null"}]},
                {"type": "string"}
            ]}
        }));
        let v = ArgumentValidator::new("t", &schema, false).expect("schema");
        // "3" is no array; the nested union makes it an integer. A branch
        // without its own `type` is taken whatever it did (as before), so
        // "x" stays a string, which the last branch accepts.
        assert_eq!(v.prepare_value(json!({"v": "3"})).expect("ok")["v"], json!(3));
        assert_eq!(v.prepare_value(json!({"v": ["1", 2]})).expect("ok")["v"], json!([1, 2]));
        assert_eq!(v.prepare_value(json!({"v": "x"})).expect("ok")["v"], json!("x"));
    }

    #[test]
    fn the_work_budget_rejects_instead_of_burning_cpu() {
        let schema = object(json!({"xs": {"items": {"type": "integer"}, "type": "array"}}));
        let v = ArgumentValidator::new("t", &schema, false).expect("schema");
        let xs: Vec<Value> = (0..600_000).map(|_| Value::from("1")).collect();
        let err = v.prepare_value(json!({"xs": xs})).expect_err("over budget");
        assert_eq!(
            err.to_string(),
            "Invalid arguments for tool 't': arguments: Input is too large to check against this tool's schema (over 1000000 steps)"
        );
    }

    /// A small value whose in-place try runs out of steps after coercing part
    /// of it is checked again from its text, so the result is what one
    /// whole check gives.
    #[tokio::test]
    async fn a_try_that_runs_out_starts_again_from_the_text() {
        let item = json!({"anyOf": [{"type": "null"}, {"type": "boolean"}, {"anyOf": [{"type": "null"}, {"type": "integer"}]}]});
        let schema = object(json!({"xs": {"items": item, "type": "array"}}));
        let v = std::sync::Arc::new(ArgumentValidator::new("t", &schema, false).expect("schema"));
        let text = serde_json::to_string(&json!({"xs": vec!["1"; 990]})).expect("text");
        let value = parse_object(&text).expect("object");
        assert!(at_most_nodes(&value, INLINE_NODES));
        assert!(v.prepare_within(value.clone(), None, INLINE_STEPS).is_none(), "the try must run out of steps");
        let whole = v.prepare_value(value.clone()).expect("valid");
        assert_eq!(whole["xs"][989], json!(1));
        assert_eq!(v.prepare_value_charged(value, Some(&text), None, None).await, Ok(whole));
    }

    #[test]
    fn a_deferred_validator_checks_as_a_compiled_one_and_says_when_its_schema_cannot_be_used() {
        let schema = object(json!({"n": {"type": "integer", "default": 3}, "s": {"type": "string"}}));
        let (now, later) = (
            ArgumentValidator::new("t", &schema, false).expect("schema"),
            ArgumentValidator::deferred("t", &schema, false),
        );
        for args in [json!({}), json!({"n": "4", "x": 1}), json!({"n": "four"}), json!({"s": 1})] {
            assert_eq!(later.prepare_value(args.clone()), now.prepare_value(args));
        }
        let broken = ArgumentValidator::deferred("t", &json!({"type": "string"}), false);
        assert_eq!(
            broken.prepare("{}").expect_err("unusable").to_string(),
            "Invalid arguments for tool 't': arguments: the tool's parameters schema cannot be used: the parameters schema must have \"type\": \"object\""
        );
    }

    #[test]
    fn a_passed_deadline_stops_the_check() {
        let schema = object(json!({"xs": {"items": {"type": "integer"}, "type": "array"}}));
        let v = ArgumentValidator::new("t", &schema, false).expect("schema");
        let xs: Vec<Value> = (0..100_000).map(|_| Value::from("1")).collect();
        let err = v.prepare_value_by(json!({"xs": xs}), Some(Instant::now())).expect_err("deadline");
        assert_eq!(err, ArgumentError::DeadlinePassed);
    }

    /// The pattern of issue 26: an unanchored search whose lazy DFA blows
    /// up, so that matching falls back to simulating its ~300-state NFA.
    const REGEX_BOMB: &str = "a[ab]{300}[^ab]";

    #[test]
    fn a_pattern_over_the_automaton_bound_is_refused_at_load() {
        let schema = object(json!({"s": {"type": "string", "pattern": "[ab]{3000}"}}));
        let err = ArgumentValidator::new("t", &schema, false).expect_err("too many states");
        assert!(
            matches!(&err, SchemaError::PatternTooComplex { pattern, states, limit: MAX_PATTERN_STATES } if pattern == "[ab]{3000}" && *states > MAX_PATTERN_STATES),
            "{err:?}"
        );
        // The same under patternProperties and under propertyNames.
        let schema = json!({"type": "object", "patternProperties": {"[ab]{3000}": {"type": "string"}}});
        assert!(matches!(ArgumentValidator::new("t", &schema, false), Err(SchemaError::PatternTooComplex { .. })));
        let schema = json!({"type": "object", "propertyNames": {"pattern": "[ab]{3000}"}});
        assert!(matches!(ArgumentValidator::new("t", &schema, false), Err(SchemaError::PatternTooComplex { .. })));
        // Lookaround needs a backtracking engine: refused.
        let schema = object(json!({"s": {"type": "string", "pattern": "^(?=a)a$"}}));
        assert!(matches!(ArgumentValidator::new("t", &schema, false), Err(SchemaError::Invalid { .. })));
        // The bomb itself fits the bound: its cost is charged per call.
        let schema = object(json!({"s": {"type": "string", "pattern": REGEX_BOMB}}));
        let v = ArgumentValidator::new("t", &schema, false).expect("within the bound");
        let weight = v.compiled().expect("compiled").patterns[REGEX_BOMB];
        println!("{REGEX_BOMB} weighs {weight} states; ^A-[0-9]{{4}}$ {}", pattern_states("^A-[0-9]{4}$").expect("ok"));
        assert!((300..=MAX_PATTERN_STATES).contains(&weight), "{weight}");
    }

    #[test]
    fn matching_a_pattern_is_charged_to_the_budget() {
        let schema = object(json!({"s": {"type": "string", "pattern": REGEX_BOMB}}));
        let v = ArgumentValidator::new("t", &schema, false).expect("schema");
        let started = Instant::now();
        // 1 KB: within the budget (charged twice: the validity check, then
        // the error report); the regex runs and the string does not match.
        let err = v.prepare_value(json!({"s": "a".repeat(1000)})).expect_err("no match");
        assert_eq!(
            err.to_string(),
            format!("Invalid arguments for tool 't': s: String should match pattern '{REGEX_BOMB}'")
        );
        println!("a 1000-byte string checked against the bomb in {:?}", started.elapsed());
        // 10 KB: length times weight is over the budget, refused before matching.
        let started = Instant::now();
        let err = v.prepare_value(json!({"s": "a".repeat(10_000)})).expect_err("over budget");
        assert_eq!(err, v.too_large());
        assert!(started.elapsed() < std::time::Duration::from_millis(100), "{:?}", started.elapsed());
        // Past the cap on a matched string, refused whatever the pattern.
        let err = v.prepare_value(json!({"s": "a".repeat(MAX_PATTERN_SUBJECT_BYTES + 1)})).expect_err("too long");
        assert_eq!(
            err.to_string(),
            "Invalid arguments for tool 't': arguments: Input is too long to match against this tool's patterns (a string over 65536 bytes)"
        );
        // Keys are matched too: under patternProperties and propertyNames.
        for schema in [
            json!({"type": "object", "patternProperties": {REGEX_BOMB: {"type": "string"}}}),
            json!({"type": "object", "propertyNames": {"pattern": REGEX_BOMB}}),
        ] {
            let v = ArgumentValidator::new("t", &schema, false).expect("schema");
            let mut args = Map::new();
            args.insert("a".repeat(10_000), json!("x"));
            assert_eq!(v.prepare_value(Value::Object(args)).expect_err("over budget"), v.too_large(), "{schema}");
        }
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_pattern_check_keeps_to_its_deadline_off_the_async_workers() {
        let schema = object(json!({"s": {"type": "string", "pattern": REGEX_BOMB}}));
        let v = std::sync::Arc::new(ArgumentValidator::new("t", &schema, false).expect("schema"));
        // A costly check that cannot start before its deadline (every place
        // for costly checks is taken meanwhile): the caller has its answer at
        // the deadline. Holding the places makes this deterministic; a check
        // that only ran long would race its own work budget.
        let semaphore = costly_checks();
        let held = semaphore.clone().acquire_many_owned(semaphore.available_permits() as u32).await;
        let deadline = Instant::now() + std::time::Duration::from_millis(50);
        let started = Instant::now();
        let got = v.prepare_value_async(json!({"s": "a".repeat(3000)}), Some(deadline)).await;
        drop(held);
        assert_eq!(got, Err(ArgumentError::DeadlinePassed));
        // Generous: other tests share the machine's cores.
        assert!(started.elapsed() < std::time::Duration::from_secs(1), "{:?}", started.elapsed());
        // An ordinary call of the same tool is answered as before.
        let ok = v.prepare_value_async(json!({"s": "ab"}), None).await;
        assert!(ok.expect_err("no match").to_string().contains("should match pattern"));
    }

    #[test]
    fn depth_is_counted_from_the_top_level_object() {
        let mut deep = json!(1);
        for _ in 0..MAX_ARGUMENT_DEPTH {
            deep = json!([deep]);
        }
        assert!(!nested_deeper_than(&json!({"x": deep.clone()}), MAX_ARGUMENT_DEPTH + 1));
        assert!(nested_deeper_than(&json!({"x": deep.clone()}), MAX_ARGUMENT_DEPTH));
        assert!(!nested_deeper_than(&deep, MAX_ARGUMENT_DEPTH));
    }
}
