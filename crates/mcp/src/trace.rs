//! MCP's spans (docs/telemetry.md), in the MCP semantic conventions: a
//! server span for each `tools/call` lovia answers, a client span for each
//! it sends to a source. Trace context crosses in `_meta` (`traceparent`,
//! `tracestate`) both ways; over HTTP a `traceparent` header is read too.

use lovia_telemetry::{KeyValue, Scope, SpanKind, Telemetry, attr, propagate};

/// The server span of one `tools/call`: a child of the trace context the
/// request's `_meta` carries, else of its HTTP request's `traceparent`.
#[cfg(feature = "server")]
pub(crate) fn server_call(
    telemetry: &Telemetry,
    tool: &str,
    context: &rmcp::service::RequestContext<rmcp::RoleServer>,
    params_meta: Option<&rmcp::model::RequestMetaObject>,
    tenant: Option<&str>,
) -> Scope {
    if !telemetry.is_on() {
        return Scope::none();
    }
    let mut parent = propagate::from_meta(&context.meta.0.0);
    if !has_span(&parent)
        && let Some(meta) = params_meta
    {
        parent = propagate::from_meta(&meta.0.0);
    }
    let http = context.extensions.get::<http::request::Parts>();
    if !has_span(&parent)
        && let Some(parts) = http
    {
        parent = propagate::from_headers(&parts.headers);
    }
    telemetry.start(format!("tools/call {tool}"), SpanKind::Server, &parent, || {
        let mut attributes = vec![
            KeyValue::new(attr::MCP_METHOD, "tools/call"),
            KeyValue::new(attr::GEN_AI_TOOL_NAME, tool.to_owned()),
            KeyValue::new(attr::GEN_AI_OPERATION, "execute_tool"),
            // The client chooses the id: at most 128 characters of it.
            KeyValue::new(attr::JSONRPC_REQUEST_ID, context.id.to_string().chars().take(128).collect::<String>()),
            KeyValue::new(attr::NETWORK_TRANSPORT, if http.is_some() { "tcp" } else { "pipe" }),
        ];
        if let Some(version) = context.protocol_version() {
            attributes.push(KeyValue::new(attr::MCP_PROTOCOL_VERSION, version.to_string()));
        }
        if let Some(session) = http.and_then(|p| p.headers.get("mcp-session-id")).and_then(|v| v.to_str().ok()) {
            attributes.push(KeyValue::new(attr::MCP_SESSION, session.to_owned()));
        }
        if let Some(tenant) = tenant {
            attributes.push(KeyValue::new(attr::TENANT, tenant.to_owned()));
        }
        attributes
    })
}

#[cfg(feature = "server")]
fn has_span(cx: &lovia_telemetry::Context) -> bool {
    propagate::trace_id(cx).is_some()
}

#[cfg(feature = "client")]
/// The client span of one `tools/call` to source `server`, under the
/// current context (the lovia call that made it), and the `_meta` that
/// carries it to the server.
pub(crate) fn client_call(
    server: &str,
    tool: &str,
    http: bool,
) -> (Scope, Option<serde_json::Map<String, serde_json::Value>>) {
    let telemetry = Telemetry::in_current();
    if !telemetry.is_on() {
        return (Scope::none(), None);
    }
    let span = telemetry.start(format!("tools/call {tool}"), SpanKind::Client, &telemetry.current(), || {
        vec![
            KeyValue::new(attr::MCP_METHOD, "tools/call"),
            KeyValue::new(attr::GEN_AI_TOOL_NAME, tool.to_owned()),
            KeyValue::new("lovia.mcp.server", server.to_owned()),
            KeyValue::new(attr::NETWORK_TRANSPORT, if http { "tcp" } else { "pipe" }),
        ]
    });
    let meta = span.context().map(|cx| {
        let mut meta = serde_json::Map::new();
        propagate::into_meta(cx, &mut meta);
        meta
    });
    (span, meta.filter(|m| !m.is_empty()))
}
