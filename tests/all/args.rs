//! Arguments: parsing, coercion and validation (docs/semantics.md §3, D1–D4).

use lovia_host::{ArgumentError, ArgumentValidator, CallOutcome, ErrorKind};
use lovia_tests::{fixtures, load};
use serde_json::{Value, json};

fn validator(strict: bool) -> ArgumentValidator {
    let schema = json!({
        "$defs": {"P": {"properties": {"x": {"type": "integer"}, "y": {"type": "number"}}, "required": ["x"], "type": "object"}},
        "properties": {
            "count": {"type": "integer"},
            "ratio": {"type": "number", "default": 1.0},
            "flag": {"type": "boolean", "default": false},
            "mode": {"enum": ["a", "b"], "type": "string", "default": "a"},
            "n": {"maximum": 3, "minimum": 1, "type": "integer", "default": 2},
            "p": {"anyOf": [{"$ref": "#/$defs/P"}, {"type": "null"}], "default": null},
            "xs": {"items": {"type": "integer"}, "type": "array", "default": []},
            "opt": {"anyOf": [{"minimum": 1, "type": "integer"}, {"type": "null"}], "default": null}
        },
        "required": ["count"],
        "type": "object",
        "additionalProperties": false
    });
    ArgumentValidator::new("t", &schema, strict).expect("schema compiles")
}

fn ok(raw: &str) -> Value {
    validator(false).prepare(raw).unwrap_or_else(|e| panic!("{raw}: {e}"))
}

fn err(raw: &str) -> String {
    validator(false).prepare(raw).expect_err(raw).to_string()
}

#[test]
fn coerces_strings_and_integral_floats_where_the_schema_asks() {
    assert_eq!(ok(r#"{"count": "3"}"#)["count"], json!(3));
    assert_eq!(ok(r#"{"count": 3.0}"#)["count"], json!(3));
    assert_eq!(ok(r#"{"count": 1, "ratio": "2.5"}"#)["ratio"], json!(2.5));
    assert_eq!(ok(r#"{"count": 1, "flag": "true"}"#)["flag"], json!(true));
    assert_eq!(ok(r#"{"count": 1, "flag": "false"}"#)["flag"], json!(false));
    assert_eq!(ok(r#"{"count": 1, "xs": ["1", 2]}"#)["xs"], json!([1, 2]));
    assert_eq!(ok(r#"{"count": 1, "p": {"x": "1", "y": "0.5"}}"#)["p"], json!({"x": 1, "y": 0.5}));
    assert_eq!(ok(r#"{"count": 1, "opt": "4"}"#)["opt"], json!(4));
}

#[test]
fn coerces_nothing_else() {
    assert_eq!(
        err(r#"{"count": "3.5"}"#),
        "Invalid arguments for tool 't': count: Input should be a valid integer, unable to parse string as an integer"
    );
    assert_eq!(
        err(r#"{"count": 3.5}"#),
        "Invalid arguments for tool 't': count: Input should be a valid integer, got a number with a fractional part"
    );
    assert_eq!(
        err(r#"{"count": 1, "flag": "yes"}"#),
        "Invalid arguments for tool 't': flag: Input should be a valid boolean, unable to interpret input"
    );
    assert_eq!(
        err(r#"{"count": null}"#),
        "Invalid arguments for tool 't': count: Input should be a valid integer, got null"
    );
    assert_eq!(
        err(r#"{"count": true}"#),
        "Invalid arguments for tool 't': count: Input should be a valid integer, got boolean"
    );
}

#[test]
fn messages_name_the_path() {
    assert_eq!(err("{}"), "Invalid arguments for tool 't': count: Field required");
    assert_eq!(err(r#"{"count": 1, "mode": "c"}"#), "Invalid arguments for tool 't': mode: Input should be 'a' or 'b'");
    assert_eq!(
        err(r#"{"count": 1, "n": 4}"#),
        "Invalid arguments for tool 't': n: Input should be less than or equal to 3"
    );
    assert_eq!(err(r#"{"count": 1, "p": {}}"#), "Invalid arguments for tool 't': p.x: Field required");
    assert_eq!(
        err(r#"{"count": 1, "xs": [1, "a"]}"#),
        "Invalid arguments for tool 't': xs.1: Input should be a valid integer, unable to parse string as an integer"
    );
    assert_eq!(
        err(r#"{"count": 1, "opt": 0}"#),
        "Invalid arguments for tool 't': opt: Input should be greater than or equal to 1"
    );
}

#[test]
fn several_errors_come_in_declaration_order() {
    assert_eq!(
        err(r#"{"n": 0, "mode": "c", "count": "x"}"#),
        "Invalid arguments for tool 't': count: Input should be a valid integer, unable to parse string as an integer; \
         mode: Input should be 'a' or 'b'; n: Input should be greater than or equal to 1"
    );
}

#[test]
fn unknown_keys_are_dropped_unless_strict() {
    let v = ok(r#"{"count": 1, "extra": 2, "p": {"x": 1, "deep": true}}"#);
    assert_eq!(v["p"], json!({"x": 1}));
    assert!(v.get("extra").is_none());
    assert_eq!(
        validator(true).prepare(r#"{"count": 1, "extra": 2}"#).expect_err("strict").to_string(),
        "Invalid arguments for tool 't': extra: Extra inputs are not permitted"
    );
}

#[test]
fn parsing_follows_spec_3a() {
    let defaults =
        json!({"count": 1, "ratio": 1.0, "flag": false, "mode": "a", "n": 2, "p": null, "xs": [], "opt": null});
    assert_eq!(validator(false).prepare(r#"{"count": 1}"#), Ok(defaults), "omitted arguments get their defaults");
    assert!(
        matches!(validator(false).prepare(""), Err(ArgumentError::Invalid { .. })),
        "empty text is {{}}, which lacks count"
    );
    assert!(
        matches!(validator(false).prepare("   "), Err(ArgumentError::InvalidJson { .. })),
        "whitespace is not JSON"
    );
    assert!(err(r#"{"count": 1"#).starts_with("Invalid JSON in tool arguments: "));
    assert_eq!(err("[1]"), "Invalid tool arguments: expected a JSON object, got array.");
    assert_eq!(err("5"), "Invalid tool arguments: expected a JSON object, got integer.");
    assert_eq!(err("2.5"), "Invalid tool arguments: expected a JSON object, got number.");
    assert_eq!(err(r#""s""#), "Invalid tool arguments: expected a JSON object, got string.");
    assert_eq!(err("true"), "Invalid tool arguments: expected a JSON object, got boolean.");
    assert_eq!(err("null"), "Invalid tool arguments: expected a JSON object, got null.");
}

#[test]
fn an_invalid_schema_is_refused_at_compile_time() {
    let bad = json!({"type": "object", "properties": {"x": {"type": "no-such-type"}}});
    assert!(ArgumentValidator::new("t", &bad, false).is_err());
    assert!(ArgumentValidator::new("t", &json!({"type": "array"}), false).is_err());
}

#[tokio::test]
async fn strict_tools_still_apply_defaults_for_omitted_arguments() {
    let docs = load(fixtures::DOCS).await;
    // search_docs is strict: `limit` and `filter` are listed as required, yet may be omitted.
    let v = docs.prepare_arguments("search_docs", r#"{"query": "limits"}"#).expect("valid");
    assert_eq!(v, json!({"query": "limits", "limit": 5, "filter": null}), "omitted arguments get their defaults");
    let out = docs.invoke(&lovia_host::CallRequest::new("search_docs", r#"{"query": "limits", "limit": "1"}"#)).await;
    assert_eq!(out, CallOutcome::Json(json!(["Limits"])));
}

#[tokio::test]
async fn plugin_rejections_are_final_strings() {
    let docs = load(fixtures::DOCS).await;
    let reject = |raw: &str| {
        let raw = raw.to_owned();
        let docs = docs.clone();
        async move { docs.invoke(&lovia_host::CallRequest::new("search_docs", raw)).await }
    };
    assert_eq!(
        reject(r#"{"query": "", "bogus": 1}"#).await,
        CallOutcome::Rejected {
            kind: ErrorKind::InvalidArguments,
            text:
                "Tool error: Invalid arguments for tool 'search_docs': query: String should have at least 1 character; \
             bogus: Extra inputs are not permitted"
                    .into()
        }
    );
    let unknown = docs.invoke(&lovia_host::CallRequest::new("nope", "garbage")).await;
    assert_eq!(
        unknown,
        CallOutcome::Rejected { kind: ErrorKind::UnknownTool, text: "Tool 'nope' is not available.".into() }
    );
}

#[test]
fn the_json_decoder_wording_is_serde_jsons() {
    // docs/semantics.md D13: the decoder's own words after the fixed frame;
    // this pins them so that a serde_json upgrade cannot change them unseen.
    assert_eq!(
        err(r#"{"count": 1"#),
        "Invalid JSON in tool arguments: EOF while parsing an object at line 1 column 11"
    );
    assert_eq!(err(r#"{"count": }"#), "Invalid JSON in tool arguments: expected value at line 1 column 11");
    assert_eq!(err("{count: 1}"), "Invalid JSON in tool arguments: key must be a string at line 1 column 2");
    assert_eq!(err("   "), "Invalid JSON in tool arguments: EOF while parsing a value at line 1 column 3");
}
