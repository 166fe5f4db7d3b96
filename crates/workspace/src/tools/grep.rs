//! `grep_files`: a regular expression over the lines of a file or of the
//! files of a subtree, in name order. Large and binary files are skipped.

use super::list::{Filter, Kind, walk};
use super::read::open_file;
use super::{blocking, bool_arg, int_arg, io_failure, object, ok, optional_int, path_approval, str_arg};
use crate::config::Op;
use crate::{Session, text};
use lovia_host::Tool;
use regex::{Regex, RegexBuilder};
use serde_json::json;
use std::io::Read;
use std::path::PathBuf;
use std::sync::Arc;

/// The compiled size a pattern may reach; the regex crate matches in
/// linear time, and this bounds its memory.
const REGEX_SIZE_LIMIT: usize = 1 << 20;

const DESCRIPTION: &str = "Search file contents in the workspace with a regular expression.
- `pattern` is a regular expression (Rust regex syntax); `ignore_case` makes it case-insensitive.
- `path` (default '.') is a file or a directory searched recursively; `glob` (e.g. `*.py`) filters the files.
- Hidden files and directories are skipped unless `include_hidden` is true; binary files and files over 5,000,000 bytes are skipped.
- Returns `path:line: text` lines, at most `max_matches` (default 100, at most 1000), each cut at 400 characters.";

/// Greps one file's text into `out`; false once `max` matches are exceeded.
fn grep_text(text_of: &str, shown: &str, regex: &Regex, line_chars: usize, max: usize, out: &mut Vec<String>) -> bool {
    for (i, line) in text_of.lines().enumerate() {
        if regex.is_match(line) {
            if out.len() == max {
                return false;
            }
            out.push(format!("{shown}:{}: {}", i + 1, text::first_chars(line.trim(), line_chars)));
        }
    }
    true
}

/// The text of a file to search, or `None` when it is skipped.
fn searchable(mut file: cap_std::fs::File, max_bytes: u64) -> Option<String> {
    if file.metadata().ok()?.len() > max_bytes {
        return None;
    }
    let mut bytes = Vec::new();
    (&mut file).take(max_bytes).read_to_end(&mut bytes).ok()?;
    if bytes[..bytes.len().min(1024)].contains(&0) {
        return None;
    }
    Some(String::from_utf8_lossy(&bytes).into_owned())
}

pub(crate) fn grep_files(session: &Arc<Session>) -> Tool {
    let s = session.clone();
    Tool::builder("grep_files")
        .description(DESCRIPTION)
        .parameters(object(
            json!({
                "pattern": {"type": "string", "description": "A regular expression."},
                "path": {"type": "string", "default": ".", "description": "A file or directory, relative to the workspace root."},
                "glob": {"anyOf": [{"type": "string"}, {"type": "null"}], "default": null, "description": "Only files matching this glob, e.g. *.py."},
                "ignore_case": {"type": "boolean", "default": false, "description": "Case-insensitive matching."},
                "include_hidden": {"type": "boolean", "default": false, "description": "Search names starting with '.'."},
                "max_matches": optional_int("Most matching lines to return (default 100).", 1, Some(1000)),
            }),
            &["pattern"],
        ))
        .invoke(move |args, ctx| {
            let s = s.clone();
            async move {
                let regex = RegexBuilder::new(str_arg(&args, "pattern", ""))
                    .case_insensitive(bool_arg(&args, "ignore_case"))
                    .size_limit(REGEX_SIZE_LIMIT)
                    .build()
                    .map_err(|e| text::failure(format!("Invalid regular expression: {e}"), None))?;
                let filter = match args.get("glob").and_then(|g| g.as_str()) {
                    Some(g) => Some(Filter::new(g)?),
                    None => None,
                };
                let target = s.target(str_arg(&args, "path", "."), &[Op::Read], &ctx)?;
                let max = int_arg(&args, "max_matches").map_or(s.limits.grep_matches, |m| m as usize);
                let hidden = bool_arg(&args, "include_hidden");
                let place = s.files.place(&target.abs).map_err(|e| io_failure(&target.display, &e))?;
                let limits = s.limits.clone();
                blocking(move || {
                    let p = target.display.as_str();
                    let mut out = Vec::new();
                    let complete = match place.dir.metadata(&place.rel) {
                        Ok(meta) if meta.is_file() => {
                            let file = open_file(&place.dir, &place.rel, p)?;
                            match searchable(file, limits.grep_file_bytes) {
                                Some(t) => grep_text(&t, p, &regex, limits.grep_line_chars, max, &mut out),
                                None => true,
                            }
                        }
                        Ok(meta) if meta.is_dir() => {
                            let dir = place.dir.open_dir(&place.rel).map_err(|e| io_failure(p, &e))?;
                            let prefix = if p == "." { PathBuf::new() } else { PathBuf::from(p) };
                            let mut complete = true;
                            walk(&dir, true, hidden, limits.walk_entries, &mut |parent, entry| {
                                if !matches!(entry.kind, Kind::File(_))
                                    || filter.as_ref().is_some_and(|f| !f.matches(&entry.rel, &entry.name))
                                {
                                    return true;
                                }
                                let Ok(file) = open_file(parent, std::path::Path::new(&entry.name), &entry.name) else {
                                    return true;
                                };
                                let Some(t) = searchable(file, limits.grep_file_bytes) else { return true };
                                let shown = prefix.join(&entry.rel);
                                complete = grep_text(&t, &shown.to_string_lossy(), &regex, limits.grep_line_chars, max, &mut out);
                                complete
                            })
                            .map_err(|e| io_failure(p, &e))?;
                            complete
                        }
                        Ok(_) => return Err(text::failure(format!("Not a file or directory: {p}"), None)),
                        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
                            return Err(text::failure(format!("Not a file or directory: {p}"), None));
                        }
                        Err(e) => return Err(io_failure(p, &e)),
                    };
                    if out.is_empty() {
                        return ok("(no matches)");
                    }
                    if !complete {
                        out.push(format!("… (truncated at {max} matches; narrow the search or raise max_matches)"));
                    }
                    ok(out.join("\n"))
                })
                .await
            }
        })
        .expect("grep_files' schema is valid")
        .with_approval(path_approval(session, &[Op::Read], "."))
}
