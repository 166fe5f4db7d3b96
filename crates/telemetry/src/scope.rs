//! One span while it lasts.

use opentelemetry::trace::{Status, TraceContextExt};
use opentelemetry::{Context, KeyValue};

/// The most bytes of one content attribute: a model's arguments or a
/// tool's result can be megabytes, and every span crosses the export queue
/// and the network. Longer text is cut at a character boundary and marked.
pub const MAX_CONTENT_BYTES: usize = 16 * 1024;

/// `attribute` with a string value cut to [`MAX_CONTENT_BYTES`].
fn capped(attribute: KeyValue) -> KeyValue {
    match &attribute.value {
        opentelemetry::Value::String(text) if text.as_str().len() > MAX_CONTENT_BYTES => {
            let text = text.as_str();
            let mut end = MAX_CONTENT_BYTES;
            while !text.is_char_boundary(end) {
                end -= 1;
            }
            let cut = format!("{}…[{} more bytes]", &text[..end], text.len() - end);
            KeyValue::new(attribute.key, cut)
        }
        _ => attribute,
    }
}

/// A span that is open; ended by [`Scope::end`] or when dropped. Every
/// method does nothing when telemetry is off.
#[derive(Debug, Default)]
#[must_use = "a span ends when its scope is dropped"]
pub struct Scope {
    cx: Option<Context>,
    content: bool,
}

impl Scope {
    /// A scope that records nothing.
    pub fn none() -> Self {
        Self::default()
    }

    pub(crate) fn new(parent: &Context, span: opentelemetry::global::BoxedSpan, telemetry: &crate::Telemetry) -> Self {
        // The handle travels with the span's context (Telemetry::in_current).
        let cx = parent.with_span(span).with_value(telemetry.clone());
        Self { cx: Some(cx), content: telemetry.captures_content() }
    }

    /// Whether the span is made and sampled: attributes are worth computing.
    pub fn is_recording(&self) -> bool {
        self.cx.as_ref().is_some_and(|cx| cx.span().is_recording())
    }

    /// Whether content may go into this span.
    pub fn captures_content(&self) -> bool {
        self.content && self.is_recording()
    }

    /// The context with this span, to start children under or to pass on;
    /// `None` when telemetry is off.
    pub fn context(&self) -> Option<&Context> {
        self.cx.as_ref()
    }

    /// Sets one attribute.
    pub fn set(&self, attribute: KeyValue) {
        if let Some(cx) = &self.cx {
            cx.span().set_attribute(attribute);
        }
    }

    /// Sets the attributes `f` gives, computed only for a recording span.
    pub fn set_with(&self, f: impl FnOnce() -> Vec<KeyValue>) {
        if self.is_recording()
            && let Some(cx) = &self.cx
        {
            cx.span().set_attributes(f());
        }
    }

    /// Sets content attributes `f` gives, only when content is captured.
    pub fn set_content(&self, f: impl FnOnce() -> Vec<KeyValue>) {
        if self.captures_content()
            && let Some(cx) = &self.cx
        {
            cx.span().set_attributes(f().into_iter().map(capped));
        }
    }

    /// Marks the span failed: `error.type` and an error status.
    pub fn fail(
        &self,
        error_type: impl Into<opentelemetry::Value>,
        description: impl Into<std::borrow::Cow<'static, str>>,
    ) {
        if let Some(cx) = &self.cx {
            let span = cx.span();
            span.set_attribute(KeyValue::new(crate::attr::ERROR_TYPE, error_type.into()));
            span.set_status(Status::error(description));
        }
    }

    /// Runs `future` with this span as the current context, so spans made
    /// inside (and trace context sent on) are its children.
    pub async fn within<F: Future>(&self, future: F) -> F::Output {
        // Not `crate::within`: a second async frame around every call's
        // future grows it, and a debug build's stack with it.
        match &self.cx {
            Some(cx) => opentelemetry::context::FutureExt::with_context(future, cx.clone()).await,
            None => future.await,
        }
    }

    /// Ends the span now.
    pub fn end(self) {
        drop(self);
    }
}

impl Drop for Scope {
    fn drop(&mut self) {
        if let Some(cx) = &self.cx {
            cx.span().end();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn content_is_cut_at_a_character_boundary() {
        let long = "é".repeat(MAX_CONTENT_BYTES);
        let cut = capped(KeyValue::new("k", long.clone()));
        let text = cut.value.as_str();
        assert!(text.len() < MAX_CONTENT_BYTES + 32, "{}", text.len());
        assert!(
            text.ends_with(&format!("…[{} more bytes]", long.len() - MAX_CONTENT_BYTES)),
            "{}",
            &text[text.len() - 40..]
        );
        let short = capped(KeyValue::new("k", "short"));
        assert_eq!(short.value.as_str(), "short");
    }
}
