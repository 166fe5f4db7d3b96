//! The default renderer of JSON results (spec §11): `", "` and `": "`
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
