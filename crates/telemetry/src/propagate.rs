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
    // The SDK's parser pads short ids; W3C asks for exact lengths.
    if !found.0[0].is_some_and(well_formed) {
        return Context::new();
    }
    TraceContextPropagator::new().extract_with_context(&Context::new(), &found)
}

/// Whether `value` has W3C's shape: `00-<32 hex>-<16 hex>-<2 hex>`, lower
/// case (a later version may add fields after a dash).
fn well_formed(value: &str) -> bool {
    let hex = |s: &str, n: usize| s.len() == n && s.bytes().all(|b| matches!(b, b'0'..=b'9' | b'a'..=b'f'));
    let mut parts = value.trim().split('-');
    let (Some(version), Some(trace), Some(parent), Some(flags)) =
        (parts.next(), parts.next(), parts.next(), parts.next())
    else {
        return false;
    };
    hex(version, 2)
        && version != "ff"
        && hex(trace, 32)
        && hex(parent, 16)
        && hex(flags, 2)
        && (version != "00" || parts.next().is_none())
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

#[cfg(test)]
mod tests {
    use super::*;

    const PARENT: &str = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01";

    #[test]
    fn a_traceparent_round_trips_through_meta_and_a_checkpoint() {
        let cx = from_traceparent(PARENT);
        assert_eq!(trace_id(&cx).as_deref(), Some("4bf92f3577b34da6a3ce929d0e0e4736"));
        let mut meta = serde_json::Map::new();
        into_meta(&cx, &mut meta);
        assert_eq!(meta["traceparent"], PARENT);
        assert_eq!(traceparent(&from_meta(&meta)).as_deref(), Some(PARENT));
    }

    #[test]
    fn a_malformed_traceparent_is_ignored() {
        let bad = [
            "",
            "garbage",
            "00-00000000000000000000000000000000-00f067aa0ba902b7-01",
            "00-4bf9-00f0-01",
            "00-4BF92F3577B34DA6A3CE929D0E0E4736-00f067aa0ba902b7-01",
            "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01-extra",
        ];
        for bad in bad {
            let cx = from_traceparent(bad);
            assert_eq!(trace_id(&cx), None, "{bad:?}");
            let mut meta = serde_json::Map::new();
            into_meta(&cx, &mut meta);
            assert!(meta.is_empty(), "{bad:?}: nothing is passed on");
        }
    }

    #[test]
    fn headers_carry_it_too() {
        let mut headers = http::HeaderMap::new();
        headers.insert("traceparent", http::HeaderValue::from_static(PARENT));
        assert_eq!(traceparent(&from_headers(&headers)).as_deref(), Some(PARENT));
    }
}
