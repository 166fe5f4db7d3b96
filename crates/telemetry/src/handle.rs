//! The handle every crate makes spans through.

use crate::scope::Scope;
use opentelemetry::global::{BoxedTracer, ObjectSafeTracerProvider};
use opentelemetry::trace::{SpanBuilder, SpanKind, Tracer};
use opentelemetry::{Context, InstrumentationScope, KeyValue};
use std::borrow::Cow;
use std::sync::Arc;

/// Makes lovia's spans, or none. Cheap to clone; the default is off.
///
/// A handle is made from the embedder's tracer provider and never installs
/// one globally. Content (arguments, results, prompts, command lines) is
/// left out of spans unless [`Telemetry::with_content`] turns it on, as the
/// GenAI conventions ask.
#[derive(Clone, Default)]
pub struct Telemetry {
    tracer: Option<Arc<BoxedTracer>>,
    content: bool,
}

impl std::fmt::Debug for Telemetry {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Telemetry").field("on", &self.is_on()).field("content", &self.content).finish()
    }
}

impl Telemetry {
    /// No spans: the default.
    pub fn off() -> Self {
        Self::default()
    }

    /// Spans go to a tracer of `provider`, named `lovia` with this crate's version.
    pub fn new(provider: &(impl ObjectSafeTracerProvider + ?Sized)) -> Self {
        let scope = InstrumentationScope::builder("lovia").with_version(env!("CARGO_PKG_VERSION")).build();
        Self { tracer: Some(Arc::new(BoxedTracer::new(provider.boxed_tracer(scope)))), content: false }
    }

    /// Records content (arguments, results, prompts, command lines) in spans
    /// when `capture` is true. Default: false.
    #[must_use]
    pub fn with_content(mut self, capture: bool) -> Self {
        self.content = capture;
        self
    }

    /// Whether spans are made at all.
    pub fn is_on(&self) -> bool {
        self.tracer.is_some()
    }

    /// Whether content goes into spans (only ever when spans are made).
    pub fn captures_content(&self) -> bool {
        self.content && self.is_on()
    }

    /// The context a span started now would be a child of: the one attached
    /// to the running future or thread. Empty when telemetry is off, so
    /// that nothing of an embedder's own context is touched then.
    pub fn current(&self) -> Context {
        if self.is_on() { Context::current() } else { Context::new() }
    }

    /// Starts span `name` of `kind` as a child of `parent`. `attributes`
    /// is called only when the span is made.
    pub fn start(
        &self,
        name: impl Into<Cow<'static, str>>,
        kind: SpanKind,
        parent: &Context,
        attributes: impl FnOnce() -> Vec<KeyValue>,
    ) -> Scope {
        let Some(tracer) = &self.tracer else { return Scope::none() };
        let builder = SpanBuilder::from_name(name).with_kind(kind).with_attributes(attributes());
        let span = tracer.build_with_context(builder, parent);
        Scope::new(parent, span, self)
    }

    /// Sets the attribute `f` gives on the span of the current context,
    /// when telemetry is on (an embedder's own span is never touched
    /// otherwise).
    pub fn annotate_current(&self, f: impl FnOnce() -> KeyValue) {
        if self.is_on() {
            use opentelemetry::trace::TraceContextExt;
            Context::map_current(|cx| {
                let span = cx.span();
                if span.is_recording() {
                    span.set_attribute(f());
                }
            });
        }
    }

    /// The handle that made the span of the current context, so that code
    /// a span's work reaches (an MCP source's client, a workspace command,
    /// a fetch) makes its spans with the same handle without being handed
    /// it. Off outside any of lovia's spans.
    pub fn in_current() -> Telemetry {
        Context::map_current(|cx| cx.get::<Telemetry>().cloned()).unwrap_or_default()
    }
}
