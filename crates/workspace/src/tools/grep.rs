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
use std::time::Instant;

/// The compiled size a pattern may reach; the regex crate matches in
/// linear time, and this bounds its memory.
const REGEX_SIZE_LIMIT: usize = 1 << 20;

const DESCRIPTION: &str = "Search file contents in the workspace with a regular expression.
- `pattern` is a regular expression (Rust regex syntax); `ignore_case` makes it case-insensitive.
- `path` (default '.') is a file or a directory searched recursively; `glob` (e.g. `*.py`) filters the files.
- Hidden files and directories are skipped unless `include_hidden` is true; binary files and files over 5,000,000 bytes are skipped.
- One search reads at most 50,000,000 bytes in all and runs at most 10 seconds; past either it stops and says so.
- Returns `path:line: text` lines, at most `max_matches` (default 100, at most 1000), each cut at 400 characters.";

/// Greps one file's text into `out`; false once `max` matches are exceeded.
fn grep_text(text_of: &str, shown: &str, regex: &Regex, line_chars: usize, max: usize, out: &mut Vec<String>) -> bool {
    let shown = text::escape_name(shown);
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

/// What one search may still read, and until when.
struct Budget {
    bytes_left: u64,
    deadline: Instant,
    /// Set when the search stopped for the budget.
    spent: bool,
}

impl Budget {
    fn new(limits: &crate::config::Limits) -> Self {
        Budget { bytes_left: limits.grep_total_bytes, deadline: Instant::now() + limits.grep_time, spent: false }
    }

    /// Whether there is budget left for another file.
    fn left(&mut self) -> bool {
        if self.bytes_left == 0 || Instant::now() >= self.deadline {
            self.spent = true;
        }
        !self.spent
    }
}

/// The bytes at the start of a file that decide whether it is binary: a NUL
/// among them skips it, read no further.
const SNIFF_BYTES: u64 = 1024;

/// The text of a file to search, or `None` when it is skipped (too large,
/// binary, or past the search's budget). What is read is charged to
/// `budget`.
fn searchable(mut file: cap_std::fs::File, max_bytes: u64, budget: &mut Budget) -> Option<String> {
    if file.metadata().ok()?.len() > max_bytes || !budget.left() {
        return None;
    }
    let mut bytes = Vec::new();
    (&mut file).take(SNIFF_BYTES.min(budget.bytes_left)).read_to_end(&mut bytes).ok()?;
    budget.bytes_left -= bytes.len() as u64;
    if bytes.contains(&0) {
        return None;
    }
    let rest = max_bytes.saturating_sub(bytes.len() as u64).min(budget.bytes_left);
    let before = bytes.len();
    (&mut file).take(rest).read_to_end(&mut bytes).ok()?;
    budget.bytes_left -= (bytes.len() - before) as u64;
    Some(String::from_utf8_lossy(&bytes).into_owned())
}

pub(crate) fn grep_files(session: &Arc<Session>) -> Tool {
    let s = session.clone();
    Tool::builder("grep_files")
        .description(DESCRIPTION)
        .hints(super::reads())
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
                    let mut budget = Budget::new(&limits);
                    let complete = match place.dir.metadata(&place.rel) {
                        Ok(meta) if meta.is_file() => {
                            let file = open_file(&place.dir, &place.rel, p)?;
                            match searchable(file, limits.grep_file_bytes, &mut budget) {
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
                                let Some(t) = searchable(file, limits.grep_file_bytes, &mut budget) else {
                                    // Past the budget, the walk stops; a skipped file does not stop it.
                                    return !budget.spent;
                                };
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
                    let stopped = budget.spent.then(|| {
                        format!(
                            "… (stopped after reading {} bytes or {} s, this search's budget; narrow the path or glob)",
                            text::thousands(limits.grep_total_bytes),
                            limits.grep_time.as_secs()
                        )
                    });
                    if out.is_empty() {
                        return ok(stopped.map_or_else(|| "(no matches)".to_owned(), |s| format!("(no matches)\n{s}")));
                    }
                    if let Some(stopped) = stopped {
                        out.push(stopped);
                    } else if !complete {
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
