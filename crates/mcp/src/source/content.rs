//! An MCP server's `tools/call` result as the text a model reads
//! (docs/semantics.md §20): text inlined, an image described by contract
//! 0.2's projection (`[image: <mime>, <size>]`), audio the same way as
//! `[audio: <mime>, <size>]`, a resource link as `[resource link: <uri>]`,
//! an embedded text resource inlined and an embedded binary one described.
//! Nothing is dropped without a word. A result with an image lovia can
//! carry stays content parts, so that a client of lovia's own MCP server or
//! API gets the image, not only its description.

use base64::Engine;
use base64::engine::general_purpose::STANDARD;
use lovia_host::{ContentPart, ToolOutput};
use rmcp::model::{CallToolResult, ContentBlock, ResourceContents};

/// The tool's output for `result`: content parts when it holds an image
/// that a component could return too (an allowed raster type), every other
/// block a text part of [`result_text`]'s line; otherwise that text. The
/// model reads the same text either way.
pub(crate) fn result_output(result: &CallToolResult) -> ToolOutput {
    let image = |block: &ContentBlock| match block {
        ContentBlock::Image(i) => {
            let data = STANDARD.decode(i.data.as_bytes()).ok()?;
            let part = ContentPart::Image { mime_type: i.mime_type.clone(), data };
            part.problem().is_none().then_some(part)
        }
        _ => None,
    };
    if result.is_error == Some(true) || !result.content.iter().any(|b| image(b).is_some()) {
        return ToolOutput::Text(result_text(result));
    }
    let parts = result
        .content
        .iter()
        .map(|block| image(block).unwrap_or_else(|| ContentPart::Text { text: block_text(block) }))
        .collect();
    ToolOutput::Parts(parts)
}

/// The text a model reads for `result`: its parts one per line (empty text
/// parts left out, as [`lovia_host::render_parts`] does); with no content,
/// the structured content as JSON. An `isError` result reads
/// `[tool error] <text>`, or `[tool error]` when the text is empty.
pub(crate) fn result_text(result: &CallToolResult) -> String {
    let mut text = result.content.iter().map(block_text).filter(|t| !t.is_empty()).collect::<Vec<_>>().join("\n");
    if result.content.is_empty()
        && let Some(structured) = &result.structured_content
    {
        text = structured.to_string();
    }
    if result.is_error == Some(true) {
        return if text.is_empty() { "[tool error]".to_owned() } else { format!("[tool error] {text}") };
    }
    text
}

/// One block's text.
fn block_text(block: &ContentBlock) -> String {
    match block {
        ContentBlock::Text(t) => t.text.clone(),
        ContentBlock::Image(i) => media(&i.mime_type, &i.data),
        // Described as an image is, under its own label.
        ContentBlock::Audio(a) => format!("[audio: {}", media(&a.mime_type, &a.data).trim_start_matches("[image: ")),
        ContentBlock::ResourceLink(link) => format!("[resource link: {}]", link.uri),
        ContentBlock::Resource(embedded) => match &embedded.resource {
            ResourceContents::TextResourceContents { text, .. } => text.clone(),
            ResourceContents::BlobResourceContents { uri, mime_type, blob, .. } => {
                let mime = mime_type.as_deref().unwrap_or("application/octet-stream");
                format!("[resource: {uri}, {mime}, {}]", decoded_size(blob))
            }
            _ => "[unsupported resource]".to_owned(),
        },
        // A block a newer protocol adds: said, not dropped.
        _ => "[unsupported content]".to_owned(),
    }
}

/// `[image: <mime>, <size>]`, through contract 0.2's own projection so the
/// two never differ. Undecodable base64 counts its text's length.
fn media(mime_type: &str, data: &str) -> String {
    let bytes = STANDARD.decode(data.as_bytes()).unwrap_or_else(|_| data.as_bytes().to_vec());
    ContentPart::Image { mime_type: mime_type.to_owned(), data: bytes }.model_text()
}

/// A blob's size as the projection writes sizes.
fn decoded_size(blob: &str) -> String {
    let n = STANDARD.decode(blob.as_bytes()).map_or(blob.len(), |b| b.len());
    // The projection's size text, taken from an image part of that size.
    let described = ContentPart::Image { mime_type: String::new(), data: vec![0; n] }.model_text();
    described.trim_start_matches("[image: , ").trim_end_matches(']').to_owned()
}

#[cfg(test)]
mod tests {
    use super::*;
    use rmcp::model::Resource;
    use serde_json::json;

    fn result(content: Vec<ContentBlock>, is_error: Option<bool>) -> CallToolResult {
        let mut r = CallToolResult::success(content);
        r.is_error = is_error;
        r
    }

    #[test]
    fn every_block_is_text() {
        let png = STANDARD.encode([0u8; 5]);
        let link = ContentBlock::ResourceLink(Resource::new("file:///r.txt", "r"));
        let r = result(
            vec![
                ContentBlock::text("hello"),
                ContentBlock::text(""),
                ContentBlock::image(png.clone(), "image/png"),
                ContentBlock::audio(png, "audio/wav"),
                link,
                ContentBlock::embedded_text("mem://note", "inline note"),
                ContentBlock::resource(ResourceContents::BlobResourceContents {
                    uri: "mem://blob".into(),
                    mime_type: Some("application/pdf".into()),
                    blob: STANDARD.encode(vec![1u8; 2048]),
                    meta: None,
                }),
            ],
            None,
        );
        assert_eq!(
            result_text(&r),
            "hello\n[image: image/png, 5 B]\n[audio: audio/wav, 5 B]\n[resource link: file:///r.txt]\ninline note\n[resource: mem://blob, application/pdf, 2.0 KB]"
        );
    }

    #[test]
    fn a_result_with_a_raster_image_stays_parts_that_read_the_same() {
        let png = STANDARD.encode(b"\x89PNG\r\n\x1a\n0000");
        let r = result(vec![ContentBlock::text("chart:"), ContentBlock::image(png, "image/png")], None);
        let ToolOutput::Parts(parts) = result_output(&r) else { panic!("parts") };
        assert_eq!(parts[0], ContentPart::Text { text: "chart:".into() });
        assert!(
            matches!(&parts[1], ContentPart::Image { mime_type, data } if mime_type == "image/png" && data.len() == 12)
        );
        assert_eq!(lovia_host::render_parts(&parts), result_text(&r));
        // An SVG is not carried as an image: it stays its description.
        let svg = result(vec![ContentBlock::image(STANDARD.encode("<svg/>"), "image/svg+xml")], None);
        assert!(matches!(result_output(&svg), ToolOutput::Text(t) if t == "[image: image/svg+xml, 6 B]"));
        let failed = result(vec![ContentBlock::image(STANDARD.encode(b"\x89PNG"), "image/png")], Some(true));
        assert!(matches!(result_output(&failed), ToolOutput::Text(_)));
    }

    #[test]
    fn is_error_is_marked_and_empty_error_is_bare() {
        assert_eq!(result_text(&result(vec![ContentBlock::text("boom")], Some(true))), "[tool error] boom");
        assert_eq!(result_text(&result(vec![], Some(true))), "[tool error]");
        let mut structured = result(vec![], None);
        structured.structured_content = Some(json!({"n": 1}));
        assert_eq!(result_text(&structured), r#"{"n":1}"#);
    }
}
