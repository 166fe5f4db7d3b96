//! Arguments: parse, coerce and validate the model's argument text against a
//! tool's schema (docs/semantics.md §3 with docs/semantics.md D1–D4). A validator is compiled once per
//! tool, at load time.

use jsonschema::error::{TypeKind, ValidationErrorKind};
use jsonschema::{Draft, PatternOptions, Validator};
use serde_json::{Map, Value};
use std::collections::HashMap;
use std::time::Instant;

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
    validator: Validator,
    strict: bool,
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
        Ok(Self { tool: tool.into(), schema: schema.clone(), validator, strict, order, patterns })
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
        self.prepare_value_charged(value, deadline, None).await
    }

    /// [`ArgumentValidator::prepare_value_async`] whose costly check is
    /// charged to a tenant's CPU share (`cpu`): it waits while the tenant is
    /// past its share of the window, and its time counts in the share, so
    /// a tenant's argument bombs and its spinning calls together take no
    /// more than its cores.
    pub(crate) async fn prepare_value_charged(
        self: &std::sync::Arc<Self>,
        value: Value,
        deadline: Option<Instant>,
        cpu: Option<std::sync::Arc<crate::sandbox::TenantCpu>>,
    ) -> Result<Value, ArgumentError> {
        // A small value is tried with a small budget (on a copy, kept in
        // case the try runs out of steps); a large one goes straight to the
        // costly checks. Matching a pattern is work that no step can
        // interrupt, so a schema with patterns is never checked in place.
        if at_most_nodes(&value, INLINE_NODES) {
            let tried = if self.patterns.is_empty() {
                self.prepare_within(value.clone(), deadline, INLINE_STEPS)
            } else {
                let (this, copy) = (self.clone(), value.clone());
                let task = tokio::task::spawn_blocking(move || this.prepare_within(copy, deadline, INLINE_STEPS));
                match until(deadline, task).await? {
                    Ok(tried) => tried,
                    // The check does not panic; should it, the call is refused, not the host.
                    Err(_) => Some(Err(self.too_large())),
                }
            };
            if let Some(done) = tried {
                return done;
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
        coerce(value, &self.schema, &self.schema, !self.strict, 0, budget)?;
        // The validator cannot be interrupted or metered: it runs only after
        // an estimate of its own work fits the budget. A valid instance is
        // settled by `is_valid`, which checks `type` before anything else.
        let schema = Schema { root: &self.schema, patterns: &self.patterns };
        walk(value, &[&self.schema], schema, true, budget)?;
        budget.check_deadline()?;
        if self.validator.is_valid(value) {
            self.apply_defaults(value);
            return Ok(());
        }
        // Collecting errors applies every keyword of every branch, whatever
        // the `type` says: estimate that too before asking for the errors.
        walk(value, &[&self.schema], schema, false, budget)?;
        budget.check_deadline()?;
        let mut problems: Vec<(String, String)> = Vec::new();
        for error in self.validator.iter_errors(value) {
            let path = pointer_to_path(error.instance_path().as_str());
            self.describe(&error, path, &mut problems);
        }
        if problems.is_empty() {
            self.apply_defaults(value);
            return Ok(());
        }
        let rank = |path: &str| {
            let first = path.split('.').next().unwrap_or("");
            self.order.iter().position(|k| k == first).unwrap_or(usize::MAX)
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

fn type_message(kind: &TypeKind, instance: &Value) -> String {
    let wanted = match kind {
        TypeKind::Single(t) => t.to_string(),
        TypeKind::Multiple(set) => set.iter().map(|t| t.to_string()).collect::<Vec<_>>().join(" or "),
    };
    match (wanted.as_str(), instance) {
        ("integer", Value::String(_)) => "Input should be a valid integer, unable to parse string as an integer".into(),
        ("integer", Value::Number(_)) => "Input should be a valid integer, got a number with a fractional part".into(),
        ("number", Value::String(_)) => "Input should be a valid number, unable to parse string as a number".into(),
        ("boolean", Value::String(_)) => "Input should be a valid boolean, unable to interpret input".into(),
        (w, _) => format!("Input should be a valid {w}, got {}", json_type(instance)),
    }
}

fn literal(v: &Value) -> String {
    match v {
        Value::String(s) => format!("'{s}'"),
        other => other.to_string(),
    }
}

/// `'a'`, `'a' or 'b'`, `'a', 'b' or 'c'` (the reference's wording).
fn or_list(values: &[Value]) -> String {
    let items: Vec<String> = values.iter().map(literal).collect();
    match items.split_last() {
        None => String::new(),
        Some((last, [])) => last.clone(),
        Some((last, rest)) => format!("{} or {last}", rest.join(", ")),
    }
}

fn plural(n: u64, word: &str) -> String {
    if n == 1 { word.to_owned() } else { format!("{word}s") }
}

/// `/p/x` → `["p", "x"]`, unescaping `~1` and `~0`.
fn pointer_to_path(pointer: &str) -> Vec<String> {
    pointer.split('/').skip(1).map(|s| s.replace("~1", "/").replace("~0", "~")).collect()
}

fn resolve<'a>(schema: &'a Value, root: &'a Value) -> &'a Value {
    let mut current = schema;
    // A bounded number of hops: a reference cycle is the validator's problem, not ours.
    for _ in 0..8 {
        match current.get("$ref").and_then(Value::as_str).and_then(|r| r.strip_prefix('#')) {
            Some(pointer) => match root.pointer(pointer) {
                Some(target) => current = target,
                None => break,
            },
            None => break,
        }
    }
    current
}

fn type_is(schema: &Value, name: &str) -> bool {
    match schema.get("type") {
        Some(Value::String(t)) => t == name,
        Some(Value::Array(ts)) => ts.iter().any(|t| t == name),
        _ => false,
    }
}

/// The first `anyOf`/`oneOf` list of `schema`, as coercion reads it.
fn union_of(schema: &Value) -> Option<&[Value]> {
    ["anyOf", "oneOf"].into_iter().find_map(|key| match schema.get(key) {
        Some(Value::Array(branches)) => Some(branches.as_slice()),
        _ => None,
    })
}

/// The scalar coercions of D3 for one node under a schema that is not a union.
fn scalar(value: &Value, schema: &Value) -> Option<Value> {
    if type_is(schema, "integer") {
        match value {
            Value::String(s) => s.parse::<i64>().map(Value::from).or_else(|_| s.parse::<u64>().map(Value::from)).ok(),
            Value::Number(n) if !(n.is_i64() || n.is_u64()) => n
                .as_f64()
                .filter(|f| f.fract() == 0.0 && f.abs() < 9.007_199_254_740_992e15)
                .map(|f| Value::from(f as i64)),
            _ => None,
        }
    } else if type_is(schema, "number") {
        let Value::String(s) = value else { return None };
        match s.parse::<i64>() {
            Ok(i) => Some(Value::from(i)),
            Err(_) => s
                .parse::<f64>()
                .ok()
                .filter(|f| f.is_finite())
                .and_then(serde_json::Number::from_f64)
                .map(Value::Number),
        }
    } else if type_is(schema, "boolean") {
        match value.as_str() {
            Some("true") => Some(Value::Bool(true)),
            Some("false") => Some(Value::Bool(false)),
            _ => None,
        }
    } else {
        None
    }
}

/// What coercion under `schema` makes of this node itself, children aside:
/// `Some` replacement scalar, or `None` when it stays as it is. Only
/// scalars change, so this never looks below the node.
fn coerce_node(
    value: &Value,
    schema: &Value,
    root: &Value,
    depth: usize,
    budget: &mut Budget,
) -> Result<Option<Value>, Stop> {
    if depth > MAX_DEPTH {
        return Ok(None);
    }
    budget.spend(1)?;
    let schema = resolve(schema, root);
    match union_of(schema) {
        Some(_) if value.is_null() => Ok(None),
        Some(branches) => Ok(pick(value, branches, root, depth, budget)?.and_then(|(_, replaced)| replaced)),
        None => Ok(scalar(value, schema)),
    }
}

/// The branch of a union that coercion follows: the first non-null one whose
/// type matches the node once the node itself is coerced by it. Only the
/// node is examined (nested unions the same shallow way), never its
/// children: the choice costs the size of the union, not of the subtree, and
/// picks what trying each branch on a full copy did, since coercing the
/// children never changes the node's own type.
fn pick<'s>(
    value: &Value,
    branches: &'s [Value],
    root: &Value,
    depth: usize,
    budget: &mut Budget,
) -> Result<Option<(&'s Value, Option<Value>)>, Stop> {
    for branch in branches.iter().filter(|b| !type_is(b, "null")) {
        let replaced = coerce_node(value, branch, root, depth + 1, budget)?;
        if shallow_type_matches(replaced.as_ref().unwrap_or(value), resolve(branch, root)) {
            return Ok(Some((branch, replaced)));
        }
    }
    Ok(None)
}

/// Schema-guided lax coercion (docs/semantics.md D3): strings holding an integer,
/// number or boolean where one is wanted, integral floats where an integer is
/// wanted; nothing else. Unknown keys are dropped when `drop_unknown`. Each
/// argument value is coerced under one chain of schema nodes (a union picks
/// its branch with [`pick`] first), so the work is linear in the arguments.
fn coerce(
    value: &mut Value,
    schema: &Value,
    root: &Value,
    drop_unknown: bool,
    depth: usize,
    budget: &mut Budget,
) -> Result<(), Stop> {
    if depth > MAX_DEPTH {
        return Ok(());
    }
    budget.spend(1)?;
    let schema = resolve(schema, root);
    if let Some(branches) = union_of(schema) {
        if value.is_null() {
            return Ok(());
        }
        return match pick(value, branches, root, depth, budget)? {
            Some((branch, _)) => coerce(value, branch, root, drop_unknown, depth + 1, budget),
            None => Ok(()),
        };
    }
    if let Some(replacement) = scalar(value, schema) {
        *value = replacement;
    }
    match value {
        Value::Object(obj) => coerce_object(obj, schema, root, drop_unknown, depth, budget),
        Value::Array(items) => {
            let prefix = schema.get("prefixItems").and_then(Value::as_array);
            for (i, item) in items.iter_mut().enumerate() {
                match (prefix.and_then(|p| p.get(i)), schema.get("items")) {
                    (Some(s), _) | (None, Some(s)) => coerce(item, s, root, drop_unknown, depth + 1, budget)?,
                    (None, None) => {}
                }
            }
            Ok(())
        }
        _ => Ok(()),
    }
}

fn coerce_object(
    obj: &mut Map<String, Value>,
    schema: &Value,
    root: &Value,
    drop_unknown: bool,
    depth: usize,
    budget: &mut Budget,
) -> Result<(), Stop> {
    let properties = schema.get("properties").and_then(Value::as_object);
    let additional = schema.get("additionalProperties").filter(|a| a.is_object());
    if drop_unknown
        && additional.is_none()
        && let Some(props) = properties
    {
        obj.retain(|k, _| props.contains_key(k));
    }
    for (key, item) in obj.iter_mut() {
        match (properties.and_then(|p| p.get(key)), additional) {
            (Some(s), _) | (None, Some(s)) => coerce(item, s, root, drop_unknown, depth + 1, budget)?,
            (None, None) => {}
        }
    }
    Ok(())
}

fn shallow_type_matches(value: &Value, schema: &Value) -> bool {
    match schema.get("type") {
        None => true,
        Some(_) => {
            let t = json_type(value);
            type_is(schema, t) || (t == "integer" && type_is(schema, "number"))
        }
    }
}

/// Why a budgeted check did not produce a value.
enum Failed {
    /// The arguments are rejected.
    Argument(ArgumentError),
    /// The check stopped early.
    Stopped(Stop),
}

impl From<Stop> for Failed {
    fn from(stop: Stop) -> Self {
        Failed::Stopped(stop)
    }
}

/// Why an argument check stopped early.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Stop {
    /// [`MAX_ARGUMENT_STEPS`] ran out.
    Steps,
    /// The call's deadline passed.
    Deadline,
    /// A string to be matched against a pattern is longer than
    /// [`MAX_PATTERN_SUBJECT_BYTES`].
    Subject,
}

/// The steps one argument check has spent, and its deadline.
struct Budget {
    steps: u64,
    limit: u64,
    deadline: Option<Instant>,
    next_clock_check: u64,
}

/// The budget of a check run in place on an async task before it moves to
/// the blocking pool ([`ArgumentValidator::prepare_value_async`]): ordinary
/// calls take a few hundred steps. Fixed: 10,000.
pub const INLINE_STEPS: u64 = 10_000;

/// Arguments with more values than this skip the in-place try. Fixed: 1,000.
const INLINE_NODES: usize = 1_000;

/// Steps between two readings of the clock (a reading costs more than a step).
const CLOCK_EVERY: u64 = 4096;

impl Budget {
    fn new(deadline: Option<Instant>, limit: u64) -> Self {
        Self { steps: 0, limit, deadline, next_clock_check: CLOCK_EVERY }
    }

    fn spend(&mut self, steps: u64) -> Result<(), Stop> {
        self.steps = self.steps.saturating_add(steps);
        if self.steps > self.limit {
            return Err(Stop::Steps);
        }
        if self.steps >= self.next_clock_check {
            self.next_clock_check = self.steps + CLOCK_EVERY;
            self.check_deadline()?;
        }
        Ok(())
    }

    fn check_deadline(&self) -> Result<(), Stop> {
        match self.deadline {
            Some(deadline) if Instant::now() >= deadline => Err(Stop::Deadline),
            _ => Ok(()),
        }
    }
}

/// Whether `value` nests deeper than `limit` (the value itself is depth 0).
/// Iterative, so that no nesting can overflow the stack here.
fn nested_deeper_than(value: &Value, limit: usize) -> bool {
    let mut stack = vec![(value, 0usize)];
    while let Some((v, depth)) = stack.pop() {
        match v {
            Value::Array(items) if !items.is_empty() => {
                if depth >= limit {
                    return true;
                }
                stack.extend(items.iter().map(|c| (c, depth + 1)));
            }
            Value::Object(obj) if !obj.is_empty() => {
                if depth >= limit {
                    return true;
                }
                stack.extend(obj.values().map(|c| (c, depth + 1)));
            }
            _ => {}
        }
    }
    false
}

/// Whether `value` has at most `limit` nodes (counting stops past it).
fn at_most_nodes(value: &Value, limit: usize) -> bool {
    let mut seen = 0usize;
    let mut stack = vec![value];
    while let Some(v) = stack.pop() {
        seen += 1;
        if seen > limit {
            return false;
        }
        match v {
            Value::Array(items) => stack.extend(items),
            Value::Object(obj) => stack.extend(obj.values()),
            _ => {}
        }
    }
    true
}

/// The target of a local `$ref` (`#` or `#/pointer`), if it resolves.
fn ref_target<'a>(schema: &'a Value, root: &'a Value) -> Option<(&'a str, Option<&'a Value>)> {
    let reference = schema.get("$ref")?.as_str()?;
    // The validator percent-decodes a pointer and serde_json's `pointer` does
    // not: `#/$defs/a%62` would be checked here as the key `a%62` and run
    // there as `ab`. A reference with `%` has no target here, so it is refused.
    if reference.contains('%') {
        return Some((reference, None));
    }
    Some((reference, reference.strip_prefix('#').and_then(|p| root.pointer(p))))
}

/// Whether a schema node's `type` admits instances of JSON type `name`
/// (`integer` is also a `number`); a node without `type` admits anything.
fn admits(schema: &Value, name: &str) -> bool {
    match schema.get("type") {
        None => true,
        Some(_) => type_is(schema, name) || (name == "integer" && type_is(schema, "number")),
    }
}

/// The subschemas that apply to the same instance as `schema` (in place).
fn in_place(schema: &Value) -> impl Iterator<Item = &Value> {
    let lists =
        ["allOf", "anyOf", "oneOf"].into_iter().filter_map(move |k| schema.get(k).and_then(Value::as_array)).flatten();
    let single = ["not", "if", "then", "else"].into_iter().filter_map(move |k| schema.get(k));
    // `dependencies` is the older spelling; its array values are not schemas.
    let dependent = ["dependentSchemas", "dependencies"]
        .into_iter()
        .filter_map(move |k| schema.get(k).and_then(Value::as_object))
        .flat_map(|m| m.values())
        .filter(|s| !s.is_array());
    lists.chain(single).chain(dependent)
}

/// The subschemas of `schema` that apply to the children of an object
/// instance (`properties`, `patternProperties`, `additionalProperties`,
/// `propertyNames`, `unevaluatedProperties`), each with the key it is for
/// (`None`: possibly any key).
fn object_children(schema: &Value) -> impl Iterator<Item = (Option<&str>, &Value)> {
    let named =
        schema.get("properties").and_then(Value::as_object).into_iter().flatten().map(|(k, s)| (Some(k.as_str()), s));
    let patterns = schema.get("patternProperties").and_then(Value::as_object).into_iter().flat_map(|m| m.values());
    let rest = ["additionalProperties", "propertyNames", "unevaluatedProperties"]
        .into_iter()
        .filter_map(move |k| schema.get(k));
    named.chain(patterns.chain(rest).map(|s| (None, s)))
}

/// The subschemas of `schema` that apply to the items of an array instance
/// (`prefixItems`, `items`, `contains`, `unevaluatedItems`, and the older
/// tuple form `items: [...]` with `additionalItems`), with the index each is
/// for (`None`: possibly any index).
fn array_children(schema: &Value) -> impl Iterator<Item = (Option<usize>, &Value)> {
    let tuples = ["prefixItems", "items"]
        .into_iter()
        .filter_map(move |k| schema.get(k).and_then(Value::as_array))
        .flat_map(|t| t.iter().enumerate().map(|(i, s)| (Some(i), s)));
    let rest = ["items", "contains", "unevaluatedItems", "additionalItems"]
        .into_iter()
        .filter_map(move |k| schema.get(k))
        .filter(|s| !s.is_array())
        .map(|s| (None, s));
    tuples.chain(rest)
}

/// One pass over a schema node's entries: what applies in place (pushed on
/// `stack`), and what applies to the children of an object or array value
/// (into `children`, with the key or index each is for). Equivalent to
/// [`in_place`] with [`ref_target`], [`object_children`] and
/// [`array_children`], without a map lookup per keyword: this is the hot
/// loop of the per-call estimate.
fn expand<'s>(
    schema: &'s Value,
    root: &'s Value,
    kind: &str,
    stack: &mut Vec<&'s Value>,
    children: &mut Vec<(Child<'s>, &'s Value)>,
) {
    let Some(obj) = schema.as_object() else { return };
    for (key, value) in obj {
        match key.as_str() {
            "$ref" => {
                if let Some(target) = value.as_str().and_then(|r| r.strip_prefix('#')).and_then(|p| root.pointer(p)) {
                    stack.push(target);
                }
            }
            "allOf" | "anyOf" | "oneOf" => stack.extend(value.as_array().into_iter().flatten()),
            "not" | "if" | "then" | "else" => stack.push(value),
            "dependentSchemas" | "dependencies" => {
                stack.extend(value.as_object().into_iter().flat_map(|m| m.values()).filter(|s| !s.is_array()));
            }
            "properties" if kind == "object" => {
                children.extend(value.as_object().into_iter().flatten().map(|(k, s)| (Child::Key(k.as_str()), s)));
            }
            "patternProperties" if kind == "object" => {
                children.extend(value.as_object().into_iter().flat_map(|m| m.values()).map(|s| (Child::Any, s)));
            }
            "additionalProperties" | "propertyNames" | "unevaluatedProperties" if kind == "object" => {
                children.push((Child::Any, value));
            }
            "prefixItems" | "items" if kind == "array" && value.is_array() => {
                children.extend(value.as_array().into_iter().flatten().enumerate().map(|(i, s)| (Child::Index(i), s)));
            }
            "items" | "contains" | "unevaluatedItems" | "additionalItems" if kind == "array" => {
                children.push((Child::Any, value));
            }
            _ => {}
        }
    }
}

/// Which children of a value a subschema applies to.
#[derive(Clone, Copy)]
enum Child<'s> {
    /// The property of that name.
    Key(&'s str),
    /// The item at that index.
    Index(usize),
    /// Possibly any child (patterns are not matched; `additionalProperties`
    /// is counted even for declared keys): an over-estimate, never an under-one.
    Any,
}

/// Estimates, within `budget`, the validator's work on `value`: every schema
/// node that applies to every argument value, `$ref`s unfolded and every
/// combinator branch counted, with repetition. `typed` models `is_valid`,
/// which stops at a node whose `type` refuses the value; otherwise (error
/// collection) every keyword of every node applies. The recursion follows
/// the arguments, whose depth [`MAX_ARGUMENT_DEPTH`] bounds.
fn walk<'s>(
    value: &Value,
    frontier: &[&'s Value],
    schema_of: Schema<'s>,
    typed: bool,
    budget: &mut Budget,
) -> Result<(), Stop> {
    let root = schema_of.root;
    let kind = json_type(value);
    let container = match value {
        Value::Object(_) => "object",
        Value::Array(_) => "array",
        _ => "",
    };
    let mut stack = frontier.to_vec();
    let mut children: Vec<(Child<'s>, &'s Value)> = Vec::new();
    while let Some(schema) = stack.pop() {
        budget.spend(1)?;
        if typed && !admits(schema, kind) {
            continue;
        }
        if !schema_of.patterns.is_empty() {
            charge_patterns(value, schema, schema_of, typed, budget)?;
        }
        expand(schema, root, container, &mut stack, &mut children);
    }
    if children.is_empty() {
        return Ok(());
    }
    // Gathering them costs a step each (a node may declare many properties);
    // then each child costs one lookup, not a scan.
    budget.spend(u64::try_from(children.len()).unwrap_or(u64::MAX))?;
    let mut any: Vec<&Value> = Vec::new();
    let mut by_key: HashMap<&str, Vec<&Value>> = HashMap::new();
    let mut by_index: HashMap<usize, Vec<&Value>> = HashMap::new();
    for (child, schema) in children {
        match child {
            Child::Key(k) => by_key.entry(k).or_default().push(schema),
            Child::Index(i) => by_index.entry(i).or_default().push(schema),
            Child::Any => any.push(schema),
        }
    }
    let visit = |child: &Value, named: Option<&Vec<&'s Value>>, budget: &mut Budget| -> Result<(), Stop> {
        match named {
            Some(named) => {
                let mut next = any.clone();
                next.extend(named);
                walk(child, &next, schema_of, typed, budget)
            }
            None if any.is_empty() => Ok(()),
            None => walk(child, &any, schema_of, typed, budget),
        }
    };
    match value {
        Value::Object(obj) => {
            for (key, child) in obj {
                visit(child, by_key.get(key.as_str()), budget)?;
            }
        }
        Value::Array(items) => {
            for (i, item) in items.iter().enumerate() {
                visit(item, by_index.get(&i), budget)?;
            }
        }
        _ => {}
    }
    Ok(())
}

/// What the per-call estimate reads: the schema and its patterns' weights.
#[derive(Clone, Copy)]
struct Schema<'s> {
    root: &'s Value,
    patterns: &'s HashMap<String, u64>,
}

/// Charges what the validator's regex matching under `schema` costs on
/// `value`: for each pattern that applies, the length of the string it is
/// matched against times the pattern's weight ([`pattern_weights`]). A
/// `pattern` applies to a string; `patternProperties` and `propertyNames`
/// apply to an object's keys. A string longer than
/// [`MAX_PATTERN_SUBJECT_BYTES`] is refused before any matching.
fn charge_patterns<'s>(
    value: &Value,
    schema: &'s Value,
    schema_of: Schema<'s>,
    typed: bool,
    budget: &mut Budget,
) -> Result<(), Stop> {
    let charge = |subject: &str, pattern: &str, budget: &mut Budget| {
        if subject.len() > MAX_PATTERN_SUBJECT_BYTES {
            return Err(Stop::Subject);
        }
        // A pattern the load-time scan did not weigh (it cannot happen:
        // every subschema is scanned) costs the most a pattern may.
        let weight = schema_of.patterns.get(pattern).copied().unwrap_or(MAX_PATTERN_STATES);
        budget.spend(u64::try_from(subject.len()).unwrap_or(u64::MAX).max(1).saturating_mul(weight))
    };
    match value {
        Value::String(text) => {
            if let Some(pattern) = schema.get("pattern").and_then(Value::as_str) {
                charge(text, pattern, budget)?;
            }
        }
        Value::Object(obj) => {
            if let Some(patterns) = schema.get("patternProperties").and_then(Value::as_object) {
                // `additionalProperties` and `unevaluatedProperties` beside
                // them match every key against them once more.
                let rest = ["additionalProperties", "unevaluatedProperties"];
                let times = 1 + rest.iter().filter(|k| schema.get(**k).is_some()).count();
                for key in obj.keys() {
                    for pattern in patterns.keys() {
                        for _ in 0..times {
                            charge(key, pattern, budget)?;
                        }
                    }
                }
            }
            if let Some(names) = schema.get("propertyNames") {
                for key in obj.keys() {
                    walk(&Value::String(key.clone()), &[names], schema_of, typed, budget)?;
                }
            }
        }
        _ => {}
    }
    Ok(())
}

/// The weight of every pattern of the schema (`pattern` values and
/// `patternProperties` keys, in every subschema the validator compiles):
/// the states of the automaton it compiles to. Refuses a pattern over
/// [`MAX_PATTERN_STATES`]. Runs after [`check_references`], so every
/// `$ref` it follows resolves.
fn pattern_weights(root: &Value) -> Result<HashMap<String, u64>, SchemaError> {
    let mut weights: HashMap<String, u64> = HashMap::new();
    let mut seen: std::collections::HashSet<*const Value> = std::collections::HashSet::new();
    let mut stack = vec![root];
    while let Some(node) = stack.pop() {
        if !seen.insert(node as *const Value) {
            continue;
        }
        let Some(obj) = node.as_object() else { continue };
        let patterns = obj.get("pattern").and_then(Value::as_str).into_iter();
        let keys = obj.get("patternProperties").and_then(Value::as_object).into_iter().flat_map(|m| m.keys());
        for pattern in patterns.chain(keys.map(String::as_str)) {
            if !weights.contains_key(pattern) {
                weights.insert(pattern.to_owned(), pattern_states(pattern)?);
            }
        }
        if let Some((_, Some(target))) = ref_target(node, root) {
            stack.push(target);
        }
        stack.extend(in_place(node));
        stack.extend(object_children(node).map(|(_, s)| s));
        stack.extend(array_children(node).map(|(_, s)| s));
        for defs in ["$defs", "definitions"] {
            stack.extend(obj.get(defs).and_then(Value::as_object).into_iter().flat_map(|m| m.values()));
        }
    }
    Ok(weights)
}

/// The states of the automaton `pattern` compiles to: its Thompson NFA
/// after the ECMA-to-Rust translation the validator applies, as the
/// `regex` engine builds it. Over [`MAX_PATTERN_STATES`] it is refused.
fn pattern_states(pattern: &str) -> Result<u64, SchemaError> {
    use regex_automata::nfa::thompson;
    let invalid = |why: String| SchemaError::Invalid { message: format!("the pattern \"{}\" {why}", cut(pattern)) };
    let translated =
        jsonschema_regex::to_rust_regex(pattern).map_err(|()| invalid("is not a regular expression".into()))?;
    let nfa = thompson::Compiler::new()
        .configure(thompson::Config::new().nfa_size_limit(Some(PATTERN_SIZE_LIMIT)))
        .build(&translated)
        .map_err(|e| invalid(format!("does not compile within {PATTERN_SIZE_LIMIT} bytes: {e}")))?;
    let states = u64::try_from(nfa.states().len()).unwrap_or(u64::MAX);
    if states > MAX_PATTERN_STATES {
        return Err(SchemaError::PatternTooComplex { pattern: cut(pattern), states, limit: MAX_PATTERN_STATES });
    }
    Ok(states.max(1))
}

/// Waits for a check on the blocking pool until `deadline`.
async fn until<T>(
    deadline: Option<Instant>,
    task: tokio::task::JoinHandle<T>,
) -> Result<Result<T, tokio::task::JoinError>, ArgumentError> {
    match deadline {
        Some(at) => tokio::time::timeout_at(at.into(), task).await.map_err(|_| ArgumentError::DeadlinePassed),
        None => Ok(task.await),
    }
}

/// `s` cut to 200 characters, for error messages about hostile schemas.
fn cut(s: &str) -> String {
    s.chars().take(200).collect()
}

/// Refuses what the load-time figure could not follow: a `$ref` that is not
/// a JSON pointer resolving inside the schema (`#/...`), `$id` below the root
/// (it rebases the references under it), `$dynamicRef` and `$recursiveRef`
/// (resolved at run time), and `contentSchema` (it validates a document
/// decoded from a string, outside the depth limit). Visits every subschema
/// the validator compiles: the applicators, the definitions, and whatever a
/// `$ref` points at; values such as `default` or `enum` are not schemas.
fn check_references(root: &Value) -> Result<(), SchemaError> {
    let unsupported = |keyword: &'static str, value: &Value| SchemaError::UnsupportedReference {
        keyword,
        value: cut(&value.to_string()),
    };
    let mut seen: std::collections::HashSet<*const Value> = std::collections::HashSet::new();
    let mut stack = vec![root];
    while let Some(node) = stack.pop() {
        if !seen.insert(node as *const Value) {
            continue;
        }
        let Some(obj) = node.as_object() else { continue };
        if let Some(id) = obj.get("$id").filter(|_| !std::ptr::eq(node, root)) {
            return Err(unsupported("$id", id));
        }
        for keyword in ["$dynamicRef", "$recursiveRef", "contentSchema"] {
            if let Some(value) = obj.get(keyword) {
                return Err(unsupported(keyword, value));
            }
        }
        if let Some(reference) = obj.get("$ref") {
            match ref_target(node, root) {
                Some((_, Some(target))) => stack.push(target),
                _ => return Err(unsupported("$ref", reference)),
            }
        }
        stack.extend(in_place(node));
        stack.extend(object_children(node).map(|(_, s)| s));
        stack.extend(array_children(node).map(|(_, s)| s));
        for defs in ["$defs", "definitions"] {
            stack.extend(obj.get(defs).and_then(Value::as_object).into_iter().flat_map(|m| m.values()));
        }
    }
    Ok(())
}

/// Computes, for each nesting depth of the arguments up to
/// [`MAX_ARGUMENT_DEPTH`], how many schema nodes can apply there (with
/// repetition, over every key at that depth) and refuses the schema when a
/// depth exceeds [`MAX_SCHEMA_FAN`]. A node's multiplicity is summed over
/// the in-place graph (`$ref`, combinators) in topological order, so shared
/// references cost one visit per node and depth however often they repeat:
/// the check is linear in the schema's size times the depth limit. Children
/// are only counted where the node's `type` admits objects or arrays, as
/// `is_valid` checks `type` first (the per-call estimate covers the rest).
fn check_fan(root: &Value) -> Result<(), SchemaError> {
    type Key = *const Value;
    let mut frontier: HashMap<Key, (&Value, u64)> = HashMap::from([(root as Key, (root, 1))]);
    for depth in 0..=MAX_ARGUMENT_DEPTH {
        if frontier.is_empty() {
            break;
        }
        // Discover the in-place graph below the frontier, in post-order,
        // refusing a cycle (a node reached again while it is being explored).
        let mut state: HashMap<Key, bool> = HashMap::new(); // false: open, true: done
        let mut order: Vec<&Value> = Vec::new();
        let mut edges: HashMap<Key, Vec<&Value>> = HashMap::new();
        for &(start, _) in frontier.values() {
            if state.contains_key(&(start as Key)) {
                continue;
            }
            let mut stack: Vec<(&Value, bool)> = vec![(start, false)];
            while let Some((node, expanded)) = stack.pop() {
                let key = node as Key;
                if expanded {
                    state.insert(key, true);
                    order.push(node);
                    continue;
                }
                if state.contains_key(&key) {
                    continue;
                }
                state.insert(key, false);
                stack.push((node, true));
                let mut next: Vec<&Value> = in_place(node).collect();
                if let Some((reference, target)) = ref_target(node, root) {
                    match target {
                        Some(t) if state.get(&(t as Key)) == Some(&false) => {
                            return Err(SchemaError::RefCycle { reference: cut(reference) });
                        }
                        Some(t) => next.push(t),
                        None => {}
                    }
                }
                for &n in &next {
                    match state.get(&(n as Key)) {
                        Some(false) => {
                            let reference = n.get("$ref").and_then(Value::as_str).unwrap_or("#");
                            return Err(SchemaError::RefCycle { reference: cut(reference) });
                        }
                        Some(true) => {}
                        None => stack.push((n, false)),
                    }
                }
                edges.insert(key, next);
            }
        }
        // Multiplicities in topological order (reverse post-order).
        let mut count: HashMap<Key, u64> = frontier.iter().map(|(k, (_, m))| (*k, *m)).collect();
        let mut figure: u64 = 0;
        for node in order.iter().rev() {
            let m = count.get(&(*node as Key)).copied().unwrap_or(0);
            figure = figure.saturating_add(m);
            for &n in edges.get(&(*node as Key)).into_iter().flatten() {
                let c = count.entry(n as Key).or_insert(0);
                *c = c.saturating_add(m);
            }
        }
        if figure > MAX_SCHEMA_FAN {
            return Err(SchemaError::TooComplex { figure, depth, limit: MAX_SCHEMA_FAN });
        }
        let mut next: HashMap<Key, (&Value, u64)> = HashMap::new();
        for node in &order {
            let m = count.get(&(*node as Key)).copied().unwrap_or(0);
            let objects = admits(node, "object").then(|| object_children(node).map(|(_, s)| s));
            let arrays = admits(node, "array").then(|| array_children(node).map(|(_, s)| s));
            for child in objects.into_iter().flatten().chain(arrays.into_iter().flatten()) {
                let entry = next.entry(child as Key).or_insert((child, 0));
                entry.1 = entry.1.saturating_add(m);
            }
        }
        frontier = next;
    }
    Ok(())
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

#[cfg(test)]
mod tests {
    use super::*;
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
        let weight = v.patterns[REGEX_BOMB];
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
