//! The default renderer of JSON results (docs/semantics.md §11): `", "` and `": "`
//! separators, non-ASCII characters unescaped.

use serde::Serialize;
use serde_json::ser::{CompactFormatter, Formatter};
use std::io::{self, Write};

/// Renders `value` the way the reference prints JSON to the model.
///
/// ```
/// let v = serde_json::json!({"a": 1, "b": [1, 2.5, true, null], "s": "héllo"});
/// assert_eq!(lovia_host::render_json(&v), r#"{"a": 1, "b": [1, 2.5, true, null], "s": "héllo"}"#);
/// ```
pub fn render_json(value: &serde_json::Value) -> String {
    let mut out = Vec::with_capacity(128);
    let mut ser = serde_json::Serializer::with_formatter(&mut out, SpacedFormatter);
    // Serialising a `Value` into a Vec cannot fail.
    let _ = value.serialize(&mut ser);
    String::from_utf8(out).unwrap_or_default()
}

struct SpacedFormatter;

impl Formatter for SpacedFormatter {
    fn begin_array_value<W: ?Sized + Write>(&mut self, writer: &mut W, first: bool) -> io::Result<()> {
        if first { Ok(()) } else { writer.write_all(b", ") }
    }
    fn begin_object_key<W: ?Sized + Write>(&mut self, writer: &mut W, first: bool) -> io::Result<()> {
        if first { Ok(()) } else { writer.write_all(b", ") }
    }
    fn begin_object_value<W: ?Sized + Write>(&mut self, writer: &mut W) -> io::Result<()> {
        writer.write_all(b": ")
    }
    fn write_f64<W: ?Sized + Write>(&mut self, writer: &mut W, value: f64) -> io::Result<()> {
        CompactFormatter.write_f64(writer, value)
    }
}

/// What a renderer returns: text is final; a value goes through the
/// default renderer (docs/semantics.md §11 rule 3).
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
pub enum Rendered {
    /// The final text.
    Text(String),
    /// A value for the default renderer (`null` for nothing).
    Value(serde_json::Value),
}

/// Turns a successful result into the model's text. An `Err` becomes
/// `Tool error: result rendering failed: <message>`.
pub type Renderer =
    std::sync::Arc<dyn Fn(&super::ToolOutput, &super::CallContext) -> Result<Rendered, String> + Send + Sync>;

/// The default renderer: text verbatim, JSON through [`render_json`].
pub fn render_default(output: &super::ToolOutput) -> String {
    match output {
        super::ToolOutput::Text(t) => t.clone(),
        super::ToolOutput::Json(v) => render_json(v),
        super::ToolOutput::Parts(parts) => super::render_parts(parts),
    }
}
