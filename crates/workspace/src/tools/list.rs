//! `list_files`: the entries of a directory, or with a pattern the matching
//! entries of its subtree. Symlinks are shown, never followed.

use super::{blocking, bool_arg, int_arg, io_failure, object, ok, optional_int, path_approval, str_arg};
use crate::config::Op;
use crate::{Session, text};
use cap_std::fs::Dir;
use globset::{Glob, GlobMatcher};
use lovia_host::{Failure, Tool};
use serde_json::json;
use std::path::{Component, Path};
use std::sync::Arc;

const DESCRIPTION: &str = "List files and directories in the workspace.
- `path` (default '.', the workspace root) is the directory to list.
- Without `pattern`, lists the directory's own entries; with a glob `pattern` (e.g. `*.rs`, `src/**/*.toml`), lists the matching entries of its whole subtree.
- Hidden entries (names starting with '.') are left out unless `include_hidden` is true.
- At most `max_results` entries (default 500, at most 1000); prefer grep_files to search contents.";

/// A glob filter over paths relative to the listed directory: a pattern
/// without `/` matches the entry's name at any depth.
pub(crate) struct Filter {
    glob: GlobMatcher,
    by_name: bool,
}

impl Filter {
    /// Compiles `pattern`, refusing `..`.
    pub(crate) fn new(pattern: &str) -> Result<Filter, Failure> {
        if Path::new(pattern).components().any(|c| c == Component::ParentDir) {
            return Err(text::failure(
                format!(
                    "Invalid glob pattern: '{pattern}' ('..' is not supported; pass the directory as path= instead)"
                ),
                None,
            ));
        }
        let glob = Glob::new(pattern)
            .map_err(|e| text::failure(format!("Invalid glob pattern: '{pattern}' ({})", e.kind()), None))?
            .compile_matcher();
        Ok(Filter { glob, by_name: !pattern.contains('/') })
    }

    /// Whether the entry at `rel` (named `name`) matches.
    pub(crate) fn matches(&self, rel: &Path, name: &str) -> bool {
        if self.by_name { self.glob.is_match(name) } else { self.glob.is_match(rel) }
    }
}

/// One entry met by a walk.
pub(crate) struct Entry {
    /// Relative to the walked directory.
    pub(crate) rel: std::path::PathBuf,
    pub(crate) name: String,
    pub(crate) kind: Kind,
}

pub(crate) enum Kind {
    Dir,
    File(u64),
    Symlink(String),
    Other,
}

/// Walks `dir` in name order, depth first, descending only when `recurse`
/// (never through symlinks), skipping hidden names unless `hidden`.
/// `visit` returns false to stop; at most `budget` entries are visited.
pub(crate) fn walk(
    dir: &Dir,
    recurse: bool,
    hidden: bool,
    budget: usize,
    visit: &mut dyn FnMut(&Dir, Entry) -> bool,
) -> std::io::Result<()> {
    let mut budget = budget;
    walk_in(dir, Path::new(""), recurse, hidden, &mut budget, visit).map(|_| ())
}

fn walk_in(
    dir: &Dir,
    prefix: &Path,
    recurse: bool,
    hidden: bool,
    budget: &mut usize,
    visit: &mut dyn FnMut(&Dir, Entry) -> bool,
) -> std::io::Result<bool> {
    let mut entries: Vec<_> = dir.entries()?.filter_map(Result::ok).collect();
    entries.sort_by_key(|e| e.file_name());
    for entry in entries {
        if *budget == 0 {
            return Ok(false);
        }
        *budget -= 1;
        let name = entry.file_name().to_string_lossy().into_owned();
        if !hidden && name.starts_with('.') {
            continue;
        }
        let rel = prefix.join(&name);
        let Ok(file_type) = entry.file_type() else { continue };
        let kind = if file_type.is_symlink() {
            Kind::Symlink(dir.read_link_contents(&name).map(|t| t.to_string_lossy().into_owned()).unwrap_or_default())
        } else if file_type.is_dir() {
            Kind::Dir
        } else if file_type.is_file() {
            Kind::File(entry.metadata().map(|m| m.len()).unwrap_or(0))
        } else {
            Kind::Other
        };
        let is_dir = matches!(kind, Kind::Dir);
        if !visit(dir, Entry { rel: rel.clone(), name: name.clone(), kind }) {
            return Ok(false);
        }
        if recurse && is_dir {
            let Ok(sub) = dir.open_dir(&name) else { continue };
            if !walk_in(&sub, &rel, recurse, hidden, budget, visit)? {
                return Ok(false);
            }
        }
    }
    Ok(true)
}

pub(crate) fn list_files(session: &Arc<Session>) -> Tool {
    let s = session.clone();
    Tool::builder("list_files")
        .description(DESCRIPTION)
        .hints(super::reads())
        .parameters(object(
            json!({
                "path": {"type": "string", "default": ".", "description": "The directory, relative to the workspace root."},
                "pattern": {"anyOf": [{"type": "string"}, {"type": "null"}], "default": null, "description": "A glob over the subtree, e.g. *.rs."},
                "include_hidden": {"type": "boolean", "default": false, "description": "Include names starting with '.'."},
                "max_results": optional_int("Most entries to return (default 500).", 1, Some(1000)),
            }),
            &[],
        ))
        .invoke(move |args, ctx| {
            let s = s.clone();
            async move {
                let input = str_arg(&args, "path", ".").to_owned();
                let filter = match args.get("pattern").and_then(|p| p.as_str()) {
                    Some(p) => Some(Filter::new(p)?),
                    None => None,
                };
                let target = s.target(&input, &[Op::Read], &ctx)?;
                let max = int_arg(&args, "max_results").map_or(s.limits.list_results, |m| m as usize);
                let hidden = bool_arg(&args, "include_hidden");
                let place = s.files.place(&target.abs).map_err(|e| io_failure(&target.display, &e))?;
                let (budget, name) = (s.limits.walk_entries, s.name.clone());
                blocking(move || {
                    let p = &target.display;
                    let not_a_dir = || {
                        let hint = (input == name).then(|| {
                            format!("'{name}' is the workspace's name, not a path inside it — the root itself is '.'; try list_files('.').")
                        });
                        text::failure(format!("Not a directory: {p}"), hint.as_deref())
                    };
                    let dir = match place.dir.metadata(&place.rel) {
                        Ok(meta) if meta.is_dir() => place.dir.open_dir(&place.rel).map_err(|e| io_failure(p, &e))?,
                        Ok(_) => return Err(not_a_dir()),
                        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Err(not_a_dir()),
                        Err(e) => return Err(io_failure(p, &e)),
                    };
                    let prefix = if p == "." { String::new() } else { format!("{}/", p.trim_end_matches('/')) };
                    let mut lines = Vec::new();
                    let mut truncated = false;
                    walk(&dir, filter.is_some(), hidden, budget, &mut |_, entry| {
                        if filter.as_ref().is_some_and(|f| !f.matches(&entry.rel, &entry.name)) {
                            return true;
                        }
                        if lines.len() == max {
                            truncated = true;
                            return false;
                        }
                        let shown = format!("{prefix}{}", entry.rel.display());
                        let shown = text::escape_name(&shown);
                        lines.push(match entry.kind {
                            Kind::Dir => format!("{shown}/"),
                            Kind::File(len) => format!("{shown}  ({len} bytes)"),
                            Kind::Symlink(target) => format!("{shown}  -> {}", text::escape_name(&target)),
                            Kind::Other => shown.into_owned(),
                        });
                        true
                    })
                    .map_err(|e| io_failure(p, &e))?;
                    if lines.is_empty() {
                        return ok("(no entries)");
                    }
                    if truncated {
                        lines.push(format!("… (truncated at {max} entries; narrow the path/pattern or raise max_results)"));
                    }
                    ok(lines.join("\n"))
                })
                .await
            }
        })
        .expect("list_files' schema is valid")
        .with_approval(path_approval(session, &[Op::Read], "."))
}
