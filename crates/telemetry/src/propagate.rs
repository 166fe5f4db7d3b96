//! Trace context across boundaries, in W3C Trace Context form: HTTP headers
//! (`traceparent`, `tracestate`), MCP's `_meta` (the same two keys, as the
//! MCP conventions put them), and a run's checkpoint (its `traceparent`).

use opentelemetry::Context;
use opentelemetry::propagation::{Extractor, Injector, TextMapPropagator};
use opentelemetry::trace::TraceContextExt;
use opentelemetry_sdk::propagation::TraceContextPropagator;

/// The two keys trace context travels under.
pub const KEYS: [&str; 2] = ["traceparent", "tracestate"];

/// The context named by `get` (a header map's or `_meta`'s lookup); empty
/// when there is none or it does not parse. A malformed `traceparent` from a
/// client is ignored, as W3C asks, not an error of the request.
pub fn extract<'a>(get: impl Fn(&str) -> Option<&'a str>) -> Context {
    struct Found<'a>([Option<&'a str>; 2]);
    impl Extractor for Found<'_> {
        fn get(&self, key: &str) -> Option<&str> {
            KEYS.iter().position(|k| *k == key).and_then(|i| self.0[i])
        }
        fn keys(&self) -> Vec<&str> {
            KEYS.to_vec()
        }
    }
    let found = Found([get(KEYS[0]), get(KEYS[1])]);
    if found.0[0].is_none() {
        return Context::new();
    }
    TraceContextPropagator::new().extract_with_context(&Context::new(), &found)
}

/// The `traceparent` and `tracestate` values of `cx`'s span, for `set`;
/// nothing when `cx` has no valid span.
pub fn inject(cx: &Context, mut set: impl FnMut(&'static str, String)) {
    struct Sink<'s>(&'s mut dyn FnMut(&'static str, String));
    impl Injector for Sink<'_> {
        fn set(&mut self, key: &str, value: String) {
            if let Some(known) = KEYS.iter().find(|k| **k == key) {
                (self.0)(known, value);
            }
        }
    }
    if cx.span().span_context().is_valid() {
        TraceContextPropagator::new().inject_context(cx, &mut Sink(&mut set));
    }
}

/// The context in an HTTP request's headers.
pub fn from_headers(headers: &http::HeaderMap) -> Context {
    extract(|key| headers.get(key).and_then(|v| v.to_str().ok()))
}

/// The context in an MCP message's `_meta`.
pub fn from_meta(meta: &serde_json::Map<String, serde_json::Value>) -> Context {
    extract(|key| meta.get(key).and_then(serde_json::Value::as_str))
}

/// Puts `cx`'s trace context into an MCP message's `_meta`.
pub fn into_meta(cx: &Context, meta: &mut serde_json::Map<String, serde_json::Value>) {
    inject(cx, |key, value| {
        meta.insert(key.to_owned(), serde_json::Value::String(value));
    });
}

/// `cx`'s span as one `traceparent` string (what a checkpoint keeps).
pub fn traceparent(cx: &Context) -> Option<String> {
    let mut out = None;
    inject(cx, |key, value| {
        if key == "traceparent" {
            out = Some(value);
        }
    });
    out
}

/// The context a `traceparent` string names.
pub fn from_traceparent(value: &str) -> Context {
    extract(|key| (key == "traceparent").then_some(value))
}

/// The 32-hex-digit trace id of `cx`'s span, when it has a valid one.
pub fn trace_id(cx: &Context) -> Option<String> {
    let span = cx.span();
    let sc = span.span_context();
    sc.is_valid().then(|| sc.trace_id().to_string())
}
