//! `read_file` and `view_image`: readers, parallel, asking when the read is "ask".

use super::{blocking, int_arg, io_failure, object, ok, optional_int, path_approval, str_arg};
use crate::config::Op;
use crate::{Session, text};
use cap_std::fs::{OpenOptions, OpenOptionsExt};
use lovia_host::{ContentPart, Failure, Tool, ToolOutput};
use serde_json::json;
use std::io::Read;
use std::sync::Arc;

/// Bytes searched for a NUL to call a file binary.
const BINARY_PROBE: usize = 1024;
/// Characters examined for replacement characters to call a file not UTF-8.
const UTF8_PROBE: usize = 4096;

const READ_DESCRIPTION: &str = "Read a UTF-8 text file in the workspace.
- `path` is relative to the workspace root ('.'); absolute paths and `~` reach outside it only where the policy allows.
- `start`/`end` (1-based, inclusive) select lines; without them the whole file is read.
- Returns at most 50,000 characters; page through longer files with start/end.
- Binary files are refused; use view_image for images and the shell for other binary files.";

const IMAGE_DESCRIPTION: &str = "Look at an image file in the workspace.
- Reads jpg, jpeg, png, gif or webp files of at most 5,242,880 bytes.
- `path` is relative to the workspace root ('.').";

/// Opens `place` for reading without blocking on a FIFO or device, and
/// checks it is a regular file.
pub(crate) fn open_file(
    dir: &cap_std::fs::Dir,
    rel: &std::path::Path,
    display: &str,
) -> Result<cap_std::fs::File, Failure> {
    let not_a_file = || text::failure(format!("Not a file: {display}"), None);
    match dir.metadata(rel) {
        Ok(meta) if meta.is_file() => {}
        Ok(_) => return Err(not_a_file()),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Err(not_a_file()),
        Err(e) => return Err(io_failure(display, &e)),
    }
    let mut options = OpenOptions::new();
    options.read(true).custom_flags(rustix::fs::OFlags::NONBLOCK.bits() as i32);
    let file = dir.open_with(rel, &options).map_err(|e| io_failure(display, &e))?;
    // Swapped for something else since the check: refuse it too.
    match file.metadata() {
        Ok(meta) if meta.is_file() => Ok(file),
        _ => Err(not_a_file()),
    }
}

/// Reads at most `limit` bytes; returns them and the file's size.
pub(crate) fn read_prefix(file: cap_std::fs::File, limit: u64, display: &str) -> Result<(Vec<u8>, u64), Failure> {
    let size = file.metadata().map(|m| m.len()).unwrap_or(0);
    let mut bytes = Vec::new();
    file.take(limit).read_to_end(&mut bytes).map_err(|e| io_failure(display, &e))?;
    Ok((bytes, size))
}

/// The text of `bytes`, or the binary / not-UTF-8 failure.
pub(crate) fn decode(bytes: &[u8], display: &str) -> Result<String, Failure> {
    if bytes[..bytes.len().min(BINARY_PROBE)].contains(&0) {
        return Err(text::failure(format!("Binary file: {display}"), Some(text::BINARY_HINT)));
    }
    let decoded = String::from_utf8_lossy(bytes);
    let probe: Vec<char> = decoded.chars().take(UTF8_PROBE).collect();
    let replaced = probe.iter().filter(|c| **c == char::REPLACEMENT_CHARACTER).count();
    if replaced * 10 > probe.len() {
        return Err(text::failure(format!("Not UTF-8 text: {display}"), Some(text::NOT_UTF8_HINT)));
    }
    Ok(decoded.into_owned())
}

pub(crate) fn read_file(session: &Arc<Session>) -> Tool {
    let s = session.clone();
    Tool::builder("read_file")
        .description(READ_DESCRIPTION)
        .hints(super::reads())
        .parameters(object(
            json!({
                "path": {"type": "string", "description": "The file, relative to the workspace root."},
                "start": optional_int("First line to read (1-based).", 1, None),
                "end": optional_int("Last line to read (inclusive).", 1, None),
            }),
            &["path"],
        ))
        .invoke(move |args, ctx| {
            let s = s.clone();
            async move {
                let target = s.target(str_arg(&args, "path", ""), &[Op::Read], &ctx)?;
                let (start, end) = (int_arg(&args, "start"), int_arg(&args, "end"));
                if let (Some(a), Some(b)) = (start, end)
                    && b < a
                {
                    return Err(text::failure("end must be >= start.", None));
                }
                let place = s.files.place(&target.abs).map_err(|e| io_failure(&target.display, &e))?;
                let limits = s.limits.clone();
                blocking(move || {
                    let p = &target.display;
                    let file = open_file(&place.dir, &place.rel, p)?;
                    let (bytes, size) = read_prefix(file, limits.read_bytes, p)?;
                    let text = decode(&bytes, p)?;
                    if text.is_empty() {
                        return ok(format!("{p} (empty file)"));
                    }
                    let lines: Vec<&str> = text.lines().collect();
                    let n = lines.len();
                    let first = usize::try_from(start.unwrap_or(1)).unwrap_or(usize::MAX);
                    if first > n {
                        return ok(format!("{p}: start line {first} is past the last line ({n})."));
                    }
                    let last = end.map_or(n, |e| usize::try_from(e).unwrap_or(usize::MAX).min(n));
                    let body = lines[first - 1..last].join("\n");
                    let len = body.chars().count();
                    let mut out = format!("{p} (lines {first}-{last} of {n})\n");
                    if len > limits.read_chars {
                        out.push_str(text::first_chars(&body, limits.read_chars));
                        out.push_str(&text::clip_notice(limits.read_chars, len, text::READ_PAGES_HINT));
                    } else {
                        out.push_str(&body);
                    }
                    if size > limits.read_bytes {
                        out.push_str(&format!(
                            "\n[... file cut: only its first {} of {} bytes were read.]",
                            text::thousands(limits.read_bytes),
                            text::thousands(size)
                        ));
                    }
                    ok(out)
                })
                .await
            }
        })
        .expect("read_file's schema is valid")
        .with_approval(path_approval(session, &[Op::Read], "."))
}

/// The MIME type of an image path, by its extension.
fn image_type(path: &str) -> Option<&'static str> {
    let ext = path.rsplit_once('.')?.1.to_ascii_lowercase();
    match ext.as_str() {
        "jpg" | "jpeg" => Some("image/jpeg"),
        "png" => Some("image/png"),
        "gif" => Some("image/gif"),
        "webp" => Some("image/webp"),
        _ => None,
    }
}

pub(crate) fn view_image(session: &Arc<Session>) -> Tool {
    let s = session.clone();
    Tool::builder("view_image")
        .description(IMAGE_DESCRIPTION)
        .hints(super::reads())
        .parameters(object(
            json!({"path": {"type": "string", "description": "The image, relative to the workspace root."}}),
            &["path"],
        ))
        .invoke(move |args, ctx| {
            let s = s.clone();
            async move {
                let target = s.target(str_arg(&args, "path", ""), &[Op::Read], &ctx)?;
                let p = target.display.clone();
                let Some(mime) = image_type(&p) else {
                    return Err(text::failure(
                        format!("Not a supported image type: '{p}'"),
                        Some(text::IMAGE_TYPE_HINT),
                    ));
                };
                let place = s.files.place(&target.abs).map_err(|e| io_failure(&p, &e))?;
                let limit = s.limits.image_bytes;
                blocking(move || {
                    let file = open_file(&place.dir, &place.rel, &p)?;
                    let size = file.metadata().map(|m| m.len()).unwrap_or(0);
                    if size > limit {
                        return Err(text::failure(
                            format!("{p} is {} bytes (limit {} bytes).", text::thousands(size), text::thousands(limit)),
                            Some(text::IMAGE_SIZE_HINT),
                        ));
                    }
                    let (data, _) = read_prefix(file, limit, &p)?;
                    if !lovia_host::call::looks_like(mime, &data) {
                        return Err(text::failure(format!("{p} is not a valid {mime} file."), None));
                    }
                    Ok(ToolOutput::Parts(vec![
                        ContentPart::Text { text: p.clone() },
                        ContentPart::Image { mime_type: mime.to_owned(), data },
                    ]))
                })
                .await
            }
        })
        .expect("view_image's schema is valid")
        .with_approval(path_approval(session, &[Op::Read], "."))
}

/// The text of `bytes` when it is valid UTF-8.
pub(crate) fn decode_strict(bytes: Vec<u8>) -> Option<String> {
    String::from_utf8(bytes).ok()
}
