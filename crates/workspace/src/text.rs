//! Every string the model reads from the workspace tools, in one place. A
//! failure reaches the model as `Tool error: <message>` and, with a hint,
//! `\n  hint: <hint>`; a soft failure is a successful result the model retries.

use lovia_host::Failure;

/// A tool failure with an optional hint.
pub(crate) fn failure(message: impl Into<String>, hint: Option<&str>) -> Failure {
    Failure::Tool { message: message.into(), hint: hint.map(str::to_owned), kind: None }
}

/// A tool was called without a workspace: for a runner that knows its
/// agent has none configured.
pub fn no_workspace() -> Failure {
    failure(
        "No workspace is configured for this run.",
        Some(
            "The user can give this agent a workspace to enable file tools: --workspace DIR (lovia run, lovia mcp), a [tenants.workspace] table (lovia serve), or Workspace::builder(\"path/to/root\") in Rust.",
        ),
    )
}

// The hints below are read by the model and relayed to a person, so they
// name the settings each door really has: `--mode` (lovia run, lovia mcp),
// `mode` in `[tenants.workspace]` (lovia serve), and the builder in Rust.
pub(crate) const OUTSIDE_HINT: &str = "Access beyond the workspace root is controlled by the workspace's policy, which only the user can change: a less restrictive mode (--mode trusted, or mode = \"trusted\" in [tenants.workspace]) or, in Rust, Workspace::builder(..).readable(..) / .writable(..). Otherwise work within the workspace.";
pub(crate) const WRITE_MODE_HINT: &str = "This workspace is read-only. The user can allow writes with --mode coding (or mode = \"coding\" in [tenants.workspace]), or, in Rust, a writable rule.";
/// The hint of a full shared storage bound (`bounds.rs`).
pub(crate) const STORAGE_FULL_HINT: &str =
    "Delete files you no longer need (with the shell, or by overwriting them with less), then try again.";
/// The hint when every shared command place is taken.
pub(crate) const COMMANDS_BUSY_HINT: &str =
    "Wait for a running command to finish, or stop a background process with kill_process, then try again.";
pub(crate) const COMMAND_DENIED: &str = "Command denied by workspace policy.";
pub(crate) const COMMAND_DENIED_HINT: &str = "The command (or a path it references) is denied by the workspace's policy, which only the user can change (a less restrictive mode, or in Rust a command rule). Use another command, or work within the workspace.";
pub(crate) const BINARY_HINT: &str =
    "read_file handles UTF-8 text only; inspect binary content via the shell (file, xxd, sqlite3, ...).";
pub(crate) const NOT_UTF8_HINT: &str =
    "the file likely uses a legacy encoding (e.g. GBK); convert it via the shell, e.g. iconv -f gbk -t utf-8.";
pub(crate) const IMAGE_TYPE_HINT: &str = "view_image reads jpg, jpeg, png, gif, or webp files.";
pub(crate) const IMAGE_SIZE_HINT: &str =
    "Downscale or crop it first (e.g. via the shell: convert in.png -resize 50% out.png), then view the smaller copy.";
pub(crate) const READ_PAGES_HINT: &str = "Use start/end to read the rest in pages.";
pub(crate) const SHELL_FILTER_HINT: &str = "Re-run with a filter (e.g. pipe through grep/head) for more.";
pub(crate) const NO_PROCESSES_HINT: &str =
    "Background processes do not survive a session restart; re-run the command with background=true to start it again.";

pub(crate) const OLD_EMPTY: &str = "old must not be empty; read the file and provide an exact span";
pub(crate) const OLD_NOT_FOUND: &str =
    "old text not found; read the file again and retry with the exact text (whitespace matters)";
pub(crate) const EDIT_NOT_UTF8: &str =
    "file is not valid UTF-8; cannot edit safely (use the shell for binary/encoded files)";
pub(crate) const EDIT_TOO_LARGE: &str = "file is too large to edit safely; use the shell for very large files";
pub(crate) const ALREADY_EXISTS: &str = "file already exists; retry without create_only to overwrite";
pub(crate) const DROPPED: &str = "[... earlier output dropped: only the newest output is kept between reads ...]";

/// `old text matched N times; …`
pub(crate) fn old_ambiguous(n: usize) -> String {
    format!(
        "old text matched {n} times; include more surrounding context to make it unique, or pass replace_all=true to replace every occurrence"
    )
}

/// The clip notice after `limit` of `len` characters.
pub(crate) fn clip_notice(limit: usize, len: usize, hint: &str) -> String {
    format!("\n[... truncated: showing {limit} of {len} chars. {hint}]")
}

/// `1,234,567`: the host's grouping, which the executor's truncation notice uses too.
pub(crate) use lovia_host::call::text::thousands;

/// A file name as one line of a listing: control characters (a newline,
/// a carriage return, an escape) are written as `\n`, `\r`, `\u{1b}`, so
/// that a name cannot forge a line or a terminal sequence; other names are
/// shown as they are.
pub(crate) fn escape_name(name: &str) -> std::borrow::Cow<'_, str> {
    if !name.chars().any(char::is_control) {
        return std::borrow::Cow::Borrowed(name);
    }
    let mut out = String::with_capacity(name.len() + 8);
    for c in name.chars() {
        if c.is_control() { out.extend(c.escape_default()) } else { out.push(c) }
    }
    std::borrow::Cow::Owned(out)
}

/// The first `n` characters of `s`.
pub(crate) fn first_chars(s: &str, n: usize) -> &str {
    match s.char_indices().nth(n) {
        Some((i, _)) => &s[..i],
        None => s,
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn names_with_control_characters_are_escaped() {
        assert_eq!(super::escape_name("plain name.txt"), "plain name.txt");
        assert_eq!(super::escape_name("a\nb.txt: 1: forged"), "a\\nb.txt: 1: forged");
        assert_eq!(super::escape_name("\u{1b}[2Jx\r"), "\\u{1b}[2Jx\\r");
    }

    #[test]
    fn thousands_groups_digits() {
        assert_eq!(super::thousands(5_242_880), "5,242,880");
        assert_eq!(super::thousands(999), "999");
        assert_eq!(super::thousands(1000), "1,000");
    }
}
