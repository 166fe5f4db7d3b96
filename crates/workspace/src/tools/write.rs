//! `write_file` and `edit_file`: mutators, so barriers. Both write
//! atomically under the path's lock (`fs::write_atomic`).

use super::read::{decode_strict, open_file, read_prefix};
use super::{blocking, bool_arg, io_failure, object, ok, path_approval, str_arg};
use crate::config::Op;
use crate::fs::write_atomic;
use crate::{Session, text};
use lovia_host::Tool;
use serde_json::json;
use std::sync::Arc;

const WRITE_DESCRIPTION: &str = "Create or overwrite a file in the workspace with `content`.
- `path` is relative to the workspace root; missing parent directories are created.
- `create_only` refuses to overwrite an existing file.
- The write is atomic: readers see the old or the new content, never a mix.
- To change part of a file, prefer edit_file.";

const EDIT_DESCRIPTION: &str = "Replace an exact span of text in a file in the workspace.
- `old` must match the file's text exactly (whitespace matters) and, unless `replace_all` is true, exactly once.
- Read the file first; include enough surrounding lines in `old` to make it unique.
- `new` replaces it; the write is atomic.";

pub(crate) fn write_file(session: &Arc<Session>) -> Tool {
    let s = session.clone();
    Tool::builder("write_file")
        .description(WRITE_DESCRIPTION)
        // Writing the same content again changes nothing more.
        .hints(lovia_host::ToolHints::stated(false, true, true, false))
        .parameters(object(
            json!({
                "path": {"type": "string", "description": "The file, relative to the workspace root."},
                "content": {"type": "string", "description": "The whole new content."},
                "create_only": {"type": "boolean", "default": false, "description": "Fail if the file exists."},
            }),
            &["path", "content"],
        ))
        .invoke(move |args, ctx| {
            let s = s.clone();
            async move {
                let target = s.target(str_arg(&args, "path", ""), &[Op::Write], &ctx)?;
                if target.abs == s.paths.root() {
                    return Err(text::failure("Cannot write to the workspace root as a file.", None));
                }
                let content = str_arg(&args, "content", "").to_owned();
                if let Some(bounds) = &s.bounds {
                    bounds.check_room(content.len() as u64).await?;
                }
                let create_only = bool_arg(&args, "create_only");
                let place = s.files.place(&target.abs).map_err(|e| io_failure(&target.display, &e))?;
                let session = s.clone();
                blocking(move || {
                    let p = &target.display;
                    session.files.locked(&target.abs, || {
                        let exists = match place.dir.symlink_metadata(&place.rel) {
                            Ok(meta) if meta.is_dir() => {
                                return Err(text::failure(format!("Is a directory: {p}"), None));
                            }
                            Ok(_) => true,
                            Err(_) => false,
                        };
                        if exists && create_only {
                            return ok(text::ALREADY_EXISTS);
                        }
                        write_atomic(&place, content.as_bytes()).map_err(|e| io_failure(p, &e))?;
                        let verb = if exists { "updated" } else { "created" };
                        ok(format!("{verb} {p} ({} bytes)", content.len()))
                    })
                })
                .await
            }
        })
        .expect("write_file's schema is valid")
        .with_parallel(false)
        .with_retries(0)
        .with_approval(path_approval(session, &[Op::Write], "."))
}

pub(crate) fn edit_file(session: &Arc<Session>) -> Tool {
    let s = session.clone();
    Tool::builder("edit_file")
        .description(EDIT_DESCRIPTION)
        // A repeated edit finds the text already replaced (or replaces it again).
        .hints(lovia_host::ToolHints::stated(false, true, false, false))
        .parameters(object(
            json!({
                "path": {"type": "string", "description": "The file, relative to the workspace root."},
                "old": {"type": "string", "description": "The exact text to replace."},
                "new": {"type": "string", "description": "The replacement."},
                "replace_all": {"type": "boolean", "default": false, "description": "Replace every occurrence."},
            }),
            &["path", "old", "new"],
        ))
        .invoke(move |args, ctx| {
            let s = s.clone();
            async move {
                let target = s.target(str_arg(&args, "path", ""), &[Op::Write, Op::Read], &ctx)?;
                let old = str_arg(&args, "old", "").to_owned();
                let new = str_arg(&args, "new", "").to_owned();
                if old.is_empty() {
                    return ok(text::OLD_EMPTY);
                }
                let replace_all = bool_arg(&args, "replace_all");
                if let Some(bounds) = &s.bounds {
                    bounds.check_room(new.len().saturating_sub(old.len()) as u64).await?;
                }
                let place = s.files.place(&target.abs).map_err(|e| io_failure(&target.display, &e))?;
                let session = s.clone();
                blocking(move || {
                    let p = &target.display;
                    let limit = session.limits.read_bytes;
                    session.files.locked(&target.abs, || {
                        let file = open_file(&place.dir, &place.rel, p)?;
                        let (bytes, size) = read_prefix(file, limit, p)?;
                        if size > limit {
                            return ok(text::EDIT_TOO_LARGE);
                        }
                        let Some(current) = decode_strict(bytes) else { return ok(text::EDIT_NOT_UTF8) };
                        if old == new {
                            return ok(format!("{p}: no change (old text == new text)"));
                        }
                        let count = current.matches(old.as_str()).count();
                        if count == 0 {
                            return ok(text::OLD_NOT_FOUND);
                        }
                        if count > 1 && !replace_all {
                            return ok(text::old_ambiguous(count));
                        }
                        let (edited, replaced) = if replace_all {
                            (current.replace(old.as_str(), &new), count)
                        } else {
                            (current.replacen(old.as_str(), &new, 1), 1)
                        };
                        write_atomic(&place, edited.as_bytes()).map_err(|e| io_failure(p, &e))?;
                        let noun = if replaced == 1 { "replacement" } else { "replacements" };
                        ok(format!("edited {p} ({replaced} {noun})"))
                    })
                })
                .await
            }
        })
        .expect("edit_file's schema is valid")
        .with_parallel(false)
        .with_retries(0)
        .with_approval(path_approval(session, &[Op::Write, Op::Read], "."))
}
