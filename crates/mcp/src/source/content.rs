//! An MCP server's `tools/call` result as the text a model reads
//! (docs/semantics.md §20): text inlined, an image or audio described by
//! contract 0.2's projection (`[image: <mime>, <size>]`), a resource link
//! as `[resource link: <uri>]`, an embedded text resource inlined and an
//! embedded binary one described. Nothing is dropped without a word.

use base64::Engine;
use base64::engine::general_purpose::STANDARD;
use lovia_host::ContentPart;
use rmcp::model::{CallToolResult, ContentBlock, ResourceContents};

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
        // The reference describes audio as it does an image.
        ContentBlock::Audio(a) => media(&a.mime_type, &a.data),
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
            "hello\n[image: image/png, 5 B]\n[image: audio/wav, 5 B]\n[resource link: file:///r.txt]\ninline note\n[resource: mem://blob, application/pdf, 2.0 KB]"
        );
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
