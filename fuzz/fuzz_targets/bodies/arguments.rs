//! The `arguments` fuzz target's body: argument coercion and validation.
//! Two halves, chosen by the first byte:
//!
//! - the example tools' real schemas with arbitrary argument text: any text
//!   the model sends must give a value or a rejection, never a panic, and an
//!   accepted value must be an object the schema accepts again unchanged;
//! - random schemas (unions, `$ref`s shared between branches, tuples,
//!   nesting; or arbitrary JSON) with random arguments: compiling the schema
//!   and checking the arguments must never panic and must finish in bounded
//!   time, however the schema is built (docs/semantics.md D15).
//!
//! Shared by the cargo-fuzz target (fuzz_targets/arguments.rs) and the fuzz
//! smoke in the test build (tests/all/fuzz.rs).

use lovia_host::ArgumentValidator;
use serde_json::{Map, Value, json};
use std::sync::OnceLock;
use std::time::{Duration, Instant};

/// What one input may take, schema compilation and argument check together.
/// The check is bounded by its budget (tens of milliseconds); this leaves a
/// wide margin for a slow machine and still catches anything exponential.
const BOUND: Duration = Duration::from_secs(2);

fn validators() -> &'static [ArgumentValidator] {
    static V: OnceLock<Vec<ArgumentValidator>> = OnceLock::new();
    V.get_or_init(|| {
        let mut out = Vec::new();
        for golden in [
            include_str!("../../../tests/golden/orders.json"),
            include_str!("../../../tests/golden/docs.json"),
            include_str!("../../../tests/golden/notes.json"),
            include_str!("../../../tests/golden/ops.json"),
            include_str!("../../../tests/golden/diagnostics.json"),
        ] {
            let specs: Vec<serde_json::Value> = serde_json::from_str(golden).expect("golden specs");
            for spec in specs {
                let name = spec["name"].as_str().expect("name");
                let strict = spec["strict"].as_bool().unwrap_or(false);
                out.push(ArgumentValidator::new(name, &spec["parameters"], strict).expect("schema"));
            }
        }
        out
    })
}

/// The input as a stream of choices; zeros once it runs out.
struct Choices<'a>(&'a [u8]);

impl Choices<'_> {
    fn next(&mut self) -> u8 {
        match self.0.split_first() {
            Some((&b, rest)) => {
                self.0 = rest;
                b
            }
            None => 0,
        }
    }
}

const DEFS: u8 = 4;
const KEYS: [&str; 3] = ["a", "b", "c"];

/// A random subschema: the keywords coercion and the load-time check read,
/// with `$ref`s into a few shared definitions so that branches share them.
fn schema(c: &mut Choices<'_>, depth: u32) -> Value {
    let branches = |c: &mut Choices<'_>| -> Value {
        let n = 1 + c.next() % 3;
        Value::Array((0..n).map(|_| schema(c, depth + 1)).collect())
    };
    if depth > 6 {
        let leaf = ["integer", "number", "boolean", "string", "null"][usize::from(c.next() % 5)];
        return json!({ "type": leaf });
    }
    match c.next() % 12 {
        0 => json!({"type": "integer"}),
        1 => json!({"type": "number", "minimum": c.next()}),
        2 => json!({"type": "boolean"}),
        3 => json!({"type": "null"}),
        4 => json!({"anyOf": branches(c)}),
        5 => json!({"oneOf": branches(c)}),
        6 => json!({"allOf": branches(c)}),
        7 => json!({"$ref": format!("#/$defs/d{}", c.next() % DEFS)}),
        8 => {
            let mut properties = Map::new();
            for key in KEYS {
                if c.next().is_multiple_of(2) {
                    properties.insert(key.into(), schema(c, depth + 1));
                }
            }
            let mut node = json!({"properties": properties});
            if c.next().is_multiple_of(2) {
                node["type"] = json!("object");
            }
            if c.next().is_multiple_of(3) {
                node["additionalProperties"] = schema(c, depth + 1);
            }
            node
        }
        9 => json!({"type": "array", "items": schema(c, depth + 1)}),
        10 => json!({"prefixItems": branches(c), "items": schema(c, depth + 1)}),
        _ => json!({"not": schema(c, depth + 1), "type": ["string", "integer"]}),
    }
}

/// A random argument value, with strings that coercion may turn into numbers or booleans.
fn value(c: &mut Choices<'_>, depth: u32) -> Value {
    if depth > 8 {
        return Value::Null;
    }
    match c.next() % 10 {
        0 => Value::Null,
        1 => Value::Bool(c.next().is_multiple_of(2)),
        2 => json!(c.next()),
        3 => json!(f64::from(c.next()) / 2.0),
        4 => Value::from(["3", "2.5", "true", "false", "x", "-0", "1e3"][usize::from(c.next() % 7)]),
        5 | 6 => Value::Array((0..c.next() % 4).map(|_| value(c, depth + 1)).collect()),
        _ => {
            let mut obj = Map::new();
            for key in KEYS {
                if c.next().is_multiple_of(2) {
                    obj.insert(key.into(), value(c, depth + 1));
                }
            }
            Value::Object(obj)
        }
    }
}

/// Compiles `schema` and checks `arguments` against it within [`BOUND`].
fn check_bounded(schema: &Value, arguments: Value, strict: bool) {
    let start = Instant::now();
    if let Ok(validator) = ArgumentValidator::new("t", schema, strict)
        && let Ok(accepted) = validator.prepare_value(arguments)
    {
        assert!(accepted.is_object(), "an accepted value is an object");
    }
    let took = start.elapsed();
    assert!(took < BOUND, "compiling and checking took {took:?}:\nschema {schema}");
}

/// One input: never a panic, and within [`BOUND`].
pub(crate) fn run(data: &[u8]) {
    let Some((&pick, rest)) = data.split_first() else { return };
    if pick & 0x80 == 0 {
        let all = validators();
        let validator = &all[usize::from(pick) % all.len()];
        let Ok(text) = std::str::from_utf8(rest) else { return };
        if let Ok(value) = validator.prepare(text) {
            assert!(value.is_object(), "an accepted value is an object");
            // What preflight accepted must be accepted again unchanged (policies re-validate it).
            assert_eq!(validator.prepare(&value.to_string()).as_ref(), Ok(&value), "validation is idempotent");
        }
        return;
    }
    let strict = pick & 0x01 != 0;
    if pick & 0x40 != 0 {
        // Arbitrary JSON as the schema: `length` bytes of schema text, then the argument text.
        let Some((&length, rest)) = rest.split_first() else { return };
        let (schema_text, arguments) = rest.split_at(usize::from(length).min(rest.len()));
        let (Ok(schema), Ok(arguments)) =
            (serde_json::from_slice::<Value>(schema_text), serde_json::from_slice::<Value>(arguments))
        else {
            return;
        };
        check_bounded(&schema, arguments, strict);
        return;
    }
    let mut c = Choices(rest);
    let mut defs = Map::new();
    for i in 0..DEFS {
        defs.insert(format!("d{i}"), schema(&mut c, 1));
    }
    let root = json!({"$defs": defs, "properties": {"a": schema(&mut c, 1), "b": schema(&mut c, 1)}, "type": "object"});
    let mut arguments = Map::new();
    for key in KEYS {
        arguments.insert(key.into(), value(&mut c, 1));
    }
    check_bounded(&root, Value::Object(arguments), strict);
}
