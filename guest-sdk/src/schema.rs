//! The JSON Schema of a tool's arguments (docs/semantics.md §2 and its decisions).
//!
//! `#[lovia::tool]` declares each argument with its Rust type and metadata;
//! [`ParametersBuilder`] asks `schemars` for the type's schema and normalises
//! it to the shapes models and the host expect: integers carry their real
//! bounds, `Option<T>` is `anyOf` with `null`, titles are gone, and keys are
//! in a stable order.

use schemars::{JsonSchema, SchemaGenerator, generate::SchemaSettings};
use serde_json::{Map, Value, json};

/// Metadata of one argument, as the macro collected it.
#[doc(hidden)]
#[derive(Debug, Default)]
pub struct ArgMeta {
    pub name: &'static str,
    pub description: Option<&'static str>,
    pub minimum: Option<Value>,
    pub maximum: Option<Value>,
    pub pattern: Option<&'static str>,
    pub min_length: Option<u64>,
    pub max_length: Option<u64>,
    /// The declared default, already serialised.
    pub default: Option<Value>,
    /// True when the model may omit the argument.
    pub optional: bool,
}

/// Builds the `parameters` schema of one tool.
#[doc(hidden)]
#[derive(Debug)]
pub struct ParametersBuilder {
    generator: SchemaGenerator,
    properties: Map<String, Value>,
    required: Vec<Value>,
    strict: bool,
}

impl ParametersBuilder {
    pub fn new(strict: bool) -> Self {
        Self {
            generator: SchemaGenerator::new(SchemaSettings::draft2020_12()),
            properties: Map::new(),
            required: Vec::new(),
            strict,
        }
    }

    pub fn arg<T: ?Sized + JsonSchema>(&mut self, meta: ArgMeta) -> &mut Self {
        let mut schema = normalize(self.generator.subschema_for::<T>().to_value());
        apply_constraints(&mut schema, &meta);
        if let Some(obj) = schema.as_object_mut() {
            if let Some(d) = meta.description {
                obj.insert("description".into(), Value::String(d.into()));
            }
            match meta.default {
                Some(d) => {
                    obj.insert("default".into(), d);
                }
                None if meta.optional => {
                    obj.insert("default".into(), Value::Null);
                }
                None => {}
            }
        }
        if self.strict || !meta.optional {
            self.required.push(Value::String(meta.name.into()));
        }
        self.properties.insert(meta.name.into(), sort_keys(schema));
        self
    }

    /// The schema as JSON text, keys in the order of docs/semantics.md §2 rule 7.
    pub fn finish(mut self) -> String {
        let defs = self.generator.take_definitions(true);
        let mut top = Map::new();
        if !defs.is_empty() {
            let defs = defs.into_iter().map(|(k, v)| (k, sort_keys(normalize(v)))).collect();
            top.insert("$defs".into(), Value::Object(defs));
        }
        top.insert("properties".into(), Value::Object(self.properties));
        if !self.required.is_empty() {
            top.insert("required".into(), Value::Array(self.required));
        }
        top.insert("type".into(), json!("object"));
        top.insert("additionalProperties".into(), json!(false));
        Value::Object(top).to_string()
    }
}

/// The inclusive bounds the model is shown for the integer formats
/// schemars emits: the real ones for types narrower than 64 bits; none for
/// 64-bit and pointer-sized ones, whose 2^63−1 tells the model nothing and
/// costs tokens every turn (unsigned ones keep `minimum: 0`; docs/semantics.md D10).
fn integer_bounds(format: &str) -> Option<(Option<Value>, Option<Value>)> {
    Some(match format {
        "int8" => (Some(json!(i8::MIN)), Some(json!(i8::MAX))),
        "int16" => (Some(json!(i16::MIN)), Some(json!(i16::MAX))),
        "int32" => (Some(json!(i32::MIN)), Some(json!(i32::MAX))),
        "int64" | "int" => (None, None),
        "uint8" => (Some(json!(0)), Some(json!(u8::MAX))),
        "uint16" => (Some(json!(0)), Some(json!(u16::MAX))),
        "uint32" => (Some(json!(0)), Some(json!(u32::MAX))),
        "uint64" | "uint" => (Some(json!(0)), None),
        _ => return None,
    })
}

/// Rewrites one schemars schema (recursively) into lovia's shapes.
fn normalize(value: Value) -> Value {
    let Value::Object(mut obj) = value else {
        return match value {
            Value::Array(items) => Value::Array(items.into_iter().map(normalize).collect()),
            other => other,
        };
    };
    // Titles are noise to a model (docs/semantics.md §2 rule 6); a property named `title` is an object, so it stays.
    if obj.get("title").is_some_and(Value::is_string) {
        obj.remove("title");
    }
    if let Some(Value::String(format)) = obj.get("format") {
        if let Some((min, max)) = integer_bounds(format) {
            obj.remove("format");
            // A declared bound tighter than the type's wins; schemars' own
            // `minimum: 0` of an unsigned type stays either way.
            if let Some(min) = min
                && !obj.get("minimum").is_some_and(|cur| cur.as_f64() > min.as_f64())
            {
                obj.insert("minimum".into(), min);
            }
            if let Some(max) = max
                && !obj.get("maximum").is_some_and(|cur| cur.as_f64() < max.as_f64())
            {
                obj.insert("maximum".into(), max);
            }
        } else if format == "double" || format == "float" {
            obj.remove("format");
        }
    }
    let mut obj: Map<String, Value> = obj
        .into_iter()
        .map(|(k, v)| {
            let v = normalize_child(&k, v);
            (k, v)
        })
        .collect();
    // A single-variant unit enum is a constant (docs/semantics.md D10).
    if obj.get("type") == Some(&json!("string"))
        && let Some(Value::Array(values)) = obj.get("enum")
        && let [only @ Value::String(_)] = values.as_slice()
    {
        let only = only.clone();
        obj.remove("enum");
        obj.insert("const".into(), only);
    }
    // `{"type": ["T", "null"]}` becomes `{"anyOf": [{"type": "T"}, {"type": "null"}]}` (docs/semantics.md §2 rule 4).
    let nullable_type = match obj.get("type") {
        Some(Value::Array(types)) if types.len() == 2 && types.contains(&json!("null")) => {
            types.iter().find(|t| **t != json!("null")).cloned()
        }
        _ => None,
    };
    if let Some(inner_type) = nullable_type {
        obj.insert("type".into(), inner_type);
        if let Some(Value::Array(values)) = obj.get_mut("enum") {
            values.retain(|v| !v.is_null());
        }
        let mut outer = Map::new();
        for key in ["description", "default"] {
            if let Some(v) = obj.remove(key) {
                outer.insert(key.into(), v);
            }
        }
        outer.insert("anyOf".into(), json!([Value::Object(obj), {"type": "null"}]));
        return Value::Object(outer);
    }
    Value::Object(obj)
}

fn normalize_child(key: &str, value: Value) -> Value {
    match key {
        // Maps from names to schemas: normalise each schema, never the map itself.
        "properties" | "$defs" | "patternProperties" => match value {
            Value::Object(m) => Value::Object(m.into_iter().map(|(k, v)| (k, normalize(v))).collect()),
            other => other,
        },
        // Literal values, not schemas.
        "enum" | "const" | "default" | "examples" | "required" => value,
        _ => normalize(value),
    }
}

/// Applies per-argument constraints to the value schema, or to the non-null
/// branch of an optional one (so `Option<u32>` with `min = 1` reads
/// `{"anyOf":[{"minimum":1,...},{"type":"null"}]}`).
fn apply_constraints(schema: &mut Value, meta: &ArgMeta) {
    let target = match schema.get_mut("anyOf") {
        Some(Value::Array(branches)) if branches.len() == 2 => {
            match branches.iter_mut().find(|b| b.get("type") != Some(&json!("null"))) {
                Some(b) => b,
                None => return,
            }
        }
        _ => schema,
    };
    let Some(obj) = target.as_object_mut() else { return };
    let is_array = obj.get("type") == Some(&json!("array"));
    if let Some(v) = &meta.minimum {
        obj.insert("minimum".into(), v.clone());
    }
    if let Some(v) = &meta.maximum {
        obj.insert("maximum".into(), v.clone());
    }
    if let Some(p) = meta.pattern {
        obj.insert("pattern".into(), json!(p));
    }
    let (min_key, max_key) = if is_array { ("minItems", "maxItems") } else { ("minLength", "maxLength") };
    if let Some(n) = meta.min_length {
        obj.insert(min_key.into(), json!(n));
    }
    if let Some(n) = meta.max_length {
        obj.insert(max_key.into(), json!(n));
    }
}

/// Sorts object keys recursively (the reference emits sorted keys inside
/// property schemas), leaving arrays and literal values in their order.
fn sort_keys(value: Value) -> Value {
    match value {
        Value::Object(obj) => {
            let mut entries: Vec<(String, Value)> = obj.into_iter().collect();
            entries.sort_by(|a, b| a.0.cmp(&b.0));
            Value::Object(
                entries
                    .into_iter()
                    .map(|(k, v)| {
                        let v = match k.as_str() {
                            "enum" | "const" | "default" | "examples" | "required" => v,
                            _ => sort_keys(v),
                        };
                        (k, v)
                    })
                    .collect(),
            )
        }
        Value::Array(items) => Value::Array(items.into_iter().map(sort_keys).collect()),
        other => other,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn one(meta: ArgMeta, build: impl FnOnce(&mut ParametersBuilder, ArgMeta)) -> Value {
        let mut b = ParametersBuilder::new(false);
        build(&mut b, meta);
        serde_json::from_str(&b.finish()).expect("valid JSON")
    }

    #[test]
    fn no_arguments_is_the_closed_empty_object() {
        assert_eq!(
            ParametersBuilder::new(false).finish(),
            r#"{"properties":{},"type":"object","additionalProperties":false}"#
        );
    }

    #[test]
    fn integers_carry_their_real_bounds() {
        let s = one(ArgMeta { name: "n", ..Default::default() }, |b, m| {
            b.arg::<u8>(m);
        });
        assert_eq!(s["properties"]["n"], json!({"maximum": 255, "minimum": 0, "type": "integer"}));
        assert_eq!(s["required"], json!(["n"]));
    }

    #[test]
    fn sixty_four_bit_integers_carry_no_noise_bounds() {
        let s = one(ArgMeta { name: "n", ..Default::default() }, |b, m| {
            b.arg::<i64>(m);
        });
        assert_eq!(s["properties"]["n"], json!({"type": "integer"}));
        let s = one(ArgMeta { name: "n", ..Default::default() }, |b, m| {
            b.arg::<u64>(m);
        });
        assert_eq!(s["properties"]["n"], json!({"minimum": 0, "type": "integer"}));
        let s = one(ArgMeta { name: "n", ..Default::default() }, |b, m| {
            b.arg::<usize>(m);
        });
        assert_eq!(s["properties"]["n"], json!({"minimum": 0, "type": "integer"}));
        let s = one(ArgMeta { name: "n", ..Default::default() }, |b, m| {
            b.arg::<i32>(m);
        });
        assert_eq!(s["properties"]["n"], json!({"maximum": i32::MAX, "minimum": i32::MIN, "type": "integer"}));
    }

    #[test]
    fn a_single_variant_unit_enum_is_a_const() {
        #[derive(schemars::JsonSchema)]
        #[allow(dead_code, reason = "only its schema is used")]
        enum Only {
            #[serde(rename = "x")]
            X,
        }
        let s = one(ArgMeta { name: "e", ..Default::default() }, |b, m| {
            b.arg::<Only>(m);
        });
        let e = &s["properties"]["e"];
        let resolved = match e.get("$ref").and_then(Value::as_str) {
            Some(r) => s["$defs"][r.trim_start_matches("#/$defs/")].clone(),
            None => e.clone(),
        };
        assert_eq!(resolved, json!({"const": "x", "type": "string"}));
    }

    #[test]
    fn optional_with_constraint_lifts_description_and_default() {
        let meta = ArgMeta {
            name: "x",
            description: Some("the x"),
            minimum: Some(json!(1)),
            optional: true,
            ..Default::default()
        };
        let s = one(meta, |b, m| {
            b.arg::<Option<i64>>(m);
        });
        assert_eq!(
            s["properties"]["x"].to_string(),
            r#"{"anyOf":[{"minimum":1,"type":"integer"},{"type":"null"}],"default":null,"description":"the x"}"#
        );
        assert!(s.get("required").is_none());
    }

    #[test]
    fn lengths_apply_to_arrays_as_items() {
        let meta = ArgMeta { name: "xs", min_length: Some(1), max_length: Some(3), ..Default::default() };
        let s = one(meta, |b, m| {
            b.arg::<Vec<String>>(m);
        });
        assert_eq!(
            s["properties"]["xs"],
            json!({"items": {"type": "string"}, "maxItems": 3, "minItems": 1, "type": "array"})
        );
    }
}
