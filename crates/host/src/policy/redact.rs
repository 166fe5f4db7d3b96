//! Output redaction: patterns replaced before the model sees a result.

use super::{AttemptResult, Next, Policy};
use crate::call::CallContext;
use crate::call::Failure;
use crate::call::{BoxFuture, ContentPart, ToolOutput};
use regex::Regex;
use serde_json::Value;

/// Replaces every match of its patterns with `replacement` (default
/// `[REDACTED]`) in text results, in every string of JSON results, in the
/// text parts and link names and URIs of content parts, and in
/// tool error messages and hints.
#[derive(Debug, Clone)]
pub struct Redact {
    patterns: Vec<Regex>,
    replacement: String,
}

impl Redact {
    /// Compiles `patterns` (Rust `regex` syntax).
    pub fn new<I, S>(patterns: I) -> Result<Self, regex::Error>
    where
        I: IntoIterator<Item = S>,
        S: AsRef<str>,
    {
        let patterns = patterns.into_iter().map(|p| Regex::new(p.as_ref())).collect::<Result<_, _>>()?;
        Ok(Self { patterns, replacement: "[REDACTED]".into() })
    }

    /// The text that replaces a match (default `[REDACTED]`).
    #[must_use]
    pub fn replacement(mut self, replacement: impl Into<String>) -> Self {
        self.replacement = replacement.into();
        self
    }

    fn text(&self, text: &str) -> String {
        let mut out = text.to_owned();
        for p in &self.patterns {
            out = p.replace_all(&out, self.replacement.as_str()).into_owned();
        }
        out
    }

    fn value(&self, value: Value) -> Value {
        match value {
            Value::String(s) => Value::String(self.text(&s)),
            Value::Array(items) => Value::Array(items.into_iter().map(|v| self.value(v)).collect()),
            Value::Object(map) => Value::Object(map.into_iter().map(|(k, v)| (k, self.value(v))).collect()),
            other => other,
        }
    }
}

impl Policy for Redact {
    fn call<'a>(
        &'a self,
        _tool: &'a str,
        args: Value,
        _ctx: &'a CallContext,
        next: Next<'a>,
    ) -> BoxFuture<'a, AttemptResult> {
        Box::pin(async move {
            match next.run(args).await {
                Ok(ToolOutput::Text(t)) => Ok(ToolOutput::Text(self.text(&t))),
                Ok(ToolOutput::Json(v)) => Ok(ToolOutput::Json(self.value(v))),
                // Text parts and link names and URIs are redacted; image bytes are not text.
                Ok(ToolOutput::Parts(parts)) => Ok(ToolOutput::Parts(
                    parts
                        .into_iter()
                        .map(|part| match part {
                            ContentPart::Text { text } => ContentPart::Text { text: self.text(&text) },
                            ContentPart::ResourceLink { uri, name, mime_type } => {
                                ContentPart::ResourceLink { uri: self.text(&uri), name: self.text(&name), mime_type }
                            }
                            other => other,
                        })
                        .collect(),
                )),
                Err(Failure::Tool { message, hint, kind }) => {
                    Err(Failure::Tool { message: self.text(&message), hint: hint.map(|h| self.text(&h)), kind })
                }
                Err(other) => Err(other),
            }
        })
    }
}
