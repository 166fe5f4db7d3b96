//! The path policy: a path is resolved first (`~` expanded, relative to a
//! base, symlinks followed, `..` applied to what it reaches), then the target
//! is judged: denied paths, then the first path rule covering the operation,
//! then the mode's defaults inside and outside the root.

use crate::config::{ConfigError, Decision, Mode, Op, PathRule, WorkspacePolicy};
use globset::{Glob, GlobMatcher};
use std::ffi::OsString;
use std::path::{Component, Path, PathBuf};

/// Symlinks followed while resolving one path, as the kernel's own limit (`ELOOP`).
const MAX_SYMLINK_HOPS: usize = 40;

/// Why a path could not be resolved.
#[derive(Debug, thiserror::Error)]
pub(crate) enum ResolveError {
    /// More symlinks than the kernel would follow.
    #[error("too many levels of symbolic links")]
    Loop,
    /// A component could not be examined (a name too long, no permission).
    #[error("{0}")]
    Io(#[from] std::io::Error),
}

/// Resolves `input` as the policy judges it: `~` is the home directory, a
/// relative path starts at `base`, symlinks are followed and `..` applies to
/// the directory reached. A missing tail is appended as written (with `..`
/// applied lexically), so a file about to be created resolves too.
pub(crate) fn resolve(input: &str, base: &Path, home: Option<&Path>) -> Result<PathBuf, ResolveError> {
    let expanded = match (input.strip_prefix('~'), home) {
        (Some(""), Some(home)) => home.to_path_buf(),
        (Some(rest), Some(home)) if rest.starts_with('/') => home.join(rest.trim_start_matches('/')),
        _ => PathBuf::from(input),
    };
    let full = if expanded.is_absolute() { expanded } else { base.join(expanded) };
    let mut hops = 0;
    walk(Path::new("/"), &full, &mut hops)
}

/// Follows `rest` from the already resolved `start`.
fn walk(start: &Path, rest: &Path, hops: &mut usize) -> Result<PathBuf, ResolveError> {
    let mut current = start.to_path_buf();
    let mut missing = false;
    for component in rest.components() {
        match component {
            Component::RootDir => current = PathBuf::from("/"),
            Component::Prefix(_) | Component::CurDir => {}
            Component::ParentDir => {
                current.pop();
            }
            Component::Normal(name) => {
                let next = current.join(name);
                if missing {
                    current = next;
                    continue;
                }
                match std::fs::symlink_metadata(&next) {
                    Ok(meta) if meta.file_type().is_symlink() => {
                        *hops += 1;
                        if *hops > MAX_SYMLINK_HOPS {
                            return Err(ResolveError::Loop);
                        }
                        let target = std::fs::read_link(&next)?;
                        current = walk(&current, &target, hops)?;
                    }
                    Ok(_) => current = next,
                    Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
                        missing = true;
                        current = next;
                    }
                    // Not a directory on the way: nothing below it exists.
                    Err(e) if e.raw_os_error() == Some(20) => {
                        missing = true;
                        current = next;
                    }
                    Err(e) => return Err(e.into()),
                }
            }
        }
    }
    Ok(current)
}

/// A compiled path pattern.
#[derive(Debug, Clone)]
enum Pattern {
    /// Starts with `/` or `~` (resolved), or contains `/` (relative to the
    /// root): this path and its subtree; globs match the path or an ancestor.
    Anchored { path: PathBuf, glob: Option<GlobMatcher> },
    /// Bare: any segment of the resolved path.
    Segment(GlobMatcher),
}

impl Pattern {
    fn compile(pattern: &str, root: &Path, home: Option<&Path>) -> Result<Pattern, ConfigError> {
        let glob = |text: &str| {
            Glob::new(text)
                .map(|g| g.compile_matcher())
                .map_err(|e| ConfigError::Pattern { pattern: pattern.to_owned(), message: e.to_string() })
        };
        let has_meta = pattern.contains(['*', '?', '[', '{']);
        if pattern.starts_with('/') || pattern.starts_with('~') || pattern.contains('/') {
            let base = if pattern.starts_with('/') || pattern.starts_with('~') { Path::new("/") } else { root };
            let trimmed = pattern.trim_end_matches('/');
            let trimmed = if trimmed.is_empty() { "/" } else { trimmed };
            let path = if has_meta {
                let expanded = resolve_lexically(trimmed, base, home);
                return Ok(Pattern::Anchored { glob: Some(glob(&expanded.to_string_lossy())?), path: expanded });
            } else {
                resolve(trimmed, base, home).unwrap_or_else(|_| resolve_lexically(trimmed, base, home))
            };
            Ok(Pattern::Anchored { path, glob: None })
        } else {
            Ok(Pattern::Segment(glob(pattern)?))
        }
    }

    fn matches(&self, abs: &Path) -> bool {
        match self {
            Pattern::Anchored { glob: Some(glob), .. } => abs.ancestors().any(|a| glob.is_match(a)),
            Pattern::Anchored { path, glob: None } => abs.starts_with(path),
            Pattern::Segment(glob) => abs.components().any(|c| match c {
                Component::Normal(name) => glob.is_match(name),
                _ => false,
            }),
        }
    }
}

/// `~` and a base applied without touching the file system.
fn resolve_lexically(input: &str, base: &Path, home: Option<&Path>) -> PathBuf {
    let expanded = match (input.strip_prefix('~'), home) {
        (Some(rest), Some(home)) => home.join(rest.trim_start_matches('/')),
        _ => PathBuf::from(input),
    };
    let full = if expanded.is_absolute() { expanded } else { base.join(expanded) };
    let mut out = PathBuf::from("/");
    for c in full.components() {
        match c {
            Component::ParentDir => {
                out.pop();
            }
            Component::Normal(n) => out.push(n),
            _ => {}
        }
    }
    out
}

/// Why the policy decided as it did; picks the message a denial reads.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Why {
    /// A denied path.
    DeniedPath,
    /// A path rule.
    Rule,
    /// The mode's default inside the root.
    Inside,
    /// The mode's default outside the root.
    Outside,
}

/// A decision and its reason.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Verdict {
    pub(crate) decision: Decision,
    pub(crate) why: Why,
}

/// The compiled path rules of one workspace.
#[derive(Debug, Clone)]
pub(crate) struct PathPolicy {
    root: PathBuf,
    home: Option<PathBuf>,
    mode: Mode,
    denied: Vec<Pattern>,
    rules: Vec<(Pattern, PathRule)>,
}

impl PathPolicy {
    /// Compiles `rules` for the canonical `root`.
    pub(crate) fn new(root: &Path, mode: Mode, rules: &WorkspacePolicy) -> Result<PathPolicy, ConfigError> {
        let home = std::env::var_os("HOME").filter(|h| !h.is_empty()).map(PathBuf::from);
        let compile = |p: &str| Pattern::compile(p, root, home.as_deref());
        Ok(PathPolicy {
            root: root.to_path_buf(),
            mode,
            denied: rules.denied_paths.iter().map(|p| compile(p)).collect::<Result<_, _>>()?,
            rules: rules.path_rules.iter().map(|r| Ok((compile(&r.pattern)?, r.clone()))).collect::<Result<_, _>>()?,
            home,
        })
    }

    /// The canonical root.
    pub(crate) fn root(&self) -> &Path {
        &self.root
    }

    /// The mode.
    pub(crate) fn mode(&self) -> Mode {
        self.mode
    }

    /// Resolves `input` relative to `base`.
    pub(crate) fn resolve(&self, input: &str, base: &Path) -> Result<PathBuf, ResolveError> {
        resolve(input, base, self.home.as_deref())
    }

    /// Whether `abs` is the root or below it.
    pub(crate) fn is_inside(&self, abs: &Path) -> bool {
        abs.starts_with(&self.root)
    }

    /// Judges the resolved `abs` for `op`.
    pub(crate) fn judge(&self, abs: &Path, op: Op) -> Verdict {
        if self.denied.iter().any(|p| p.matches(abs)) {
            return Verdict { decision: Decision::Deny, why: Why::DeniedPath };
        }
        if let Some((_, rule)) = self.rules.iter().find(|(p, r)| r.ops.contains(&op) && p.matches(abs)) {
            return Verdict { decision: rule.decision, why: Why::Rule };
        }
        let (decision, why) = match (self.is_inside(abs), op) {
            (true, Op::Read) => (Decision::Allow, Why::Inside),
            (true, Op::Write) => (self.mode.write(), Why::Inside),
            (false, Op::Read) => (self.mode.read_outside(), Why::Outside),
            (false, Op::Write) => (self.mode.write_outside(), Why::Outside),
        };
        Verdict { decision, why }
    }

    /// Whether any write could be allowed or asked: the bundle leaves the
    /// write tools out otherwise.
    pub(crate) fn may_write(&self) -> bool {
        self.mode.write() != Decision::Deny
            || self.mode.write_outside() != Decision::Deny
            || self.rules.iter().any(|(_, r)| r.ops.contains(&Op::Write) && r.decision != Decision::Deny)
    }

    /// How a resolved path is shown to the model: relative to the root
    /// inside it (`.` for the root), absolute outside.
    pub(crate) fn display(&self, abs: &Path) -> String {
        match abs.strip_prefix(&self.root) {
            Ok(rel) if rel.as_os_str().is_empty() => ".".to_owned(),
            Ok(rel) => rel.to_string_lossy().into_owned(),
            Err(_) => abs.to_string_lossy().into_owned(),
        }
    }

    /// The root's last component, the workspace's default name.
    pub(crate) fn root_name(&self) -> OsString {
        self.root.file_name().map(OsString::from).unwrap_or_else(|| OsString::from("/"))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::{Decision::*, Op::*};

    fn policy(mode: Mode, rules: WorkspacePolicy) -> (tempfile::TempDir, PathPolicy) {
        let dir = tempfile::tempdir().expect("tempdir");
        let root = dir.path().canonicalize().expect("canonical");
        let p = PathPolicy::new(&root, mode, &rules).expect("policy");
        (dir, p)
    }

    #[test]
    fn coding_mode_defaults() {
        let (_d, p) = policy(Mode::Coding, WorkspacePolicy::default());
        let inside = p.root().join("inside.txt");
        assert_eq!(p.judge(&inside, Read).decision, Allow);
        assert_eq!(p.judge(&inside, Write).decision, Allow);
        assert_eq!(p.judge(Path::new("/etc/hosts"), Read).decision, Ask);
        assert_eq!(p.judge(Path::new("/tmp/evil.txt"), Write), Verdict { decision: Deny, why: Why::Outside });
    }

    #[test]
    fn the_modes_table() {
        for (mode, write, read_out, write_out) in
            [(Mode::Readonly, Deny, Deny, Deny), (Mode::Coding, Allow, Ask, Deny), (Mode::Trusted, Allow, Allow, Ask)]
        {
            let (_d, p) = policy(mode, WorkspacePolicy::default());
            assert_eq!(p.judge(&p.root().join("a"), Write).decision, write, "{mode:?}");
            assert_eq!(p.judge(Path::new("/etc/x"), Read).decision, read_out, "{mode:?}");
            assert_eq!(p.judge(Path::new("/etc/x"), Write).decision, write_out, "{mode:?}");
        }
    }

    #[test]
    fn denied_paths_come_first_then_the_first_covering_rule() {
        let rules = WorkspacePolicy {
            denied_paths: vec![".env".into()],
            path_rules: vec![
                PathRule::new("secrets/", [Read], Deny),
                PathRule::new("*.env", [Read, Write], Allow),
                PathRule::new("/opt/data", [Read], Allow),
            ],
            ..WorkspacePolicy::default()
        };
        let (_d, p) = policy(Mode::Coding, rules);
        assert_eq!(p.judge(&p.root().join(".env"), Read).why, Why::DeniedPath);
        assert_eq!(p.judge(&p.root().join("sub/.env"), Read).decision, Deny, "bare: any segment");
        assert_eq!(p.judge(&p.root().join("secrets/k"), Read), Verdict { decision: Deny, why: Why::Rule });
        assert_eq!(p.judge(&p.root().join("secrets/k"), Write).decision, Allow, "the rule covers reads only");
        assert_eq!(p.judge(Path::new("/opt/data/x/y"), Read).decision, Allow);
        assert_eq!(p.judge(Path::new("/opt/database"), Read).decision, Ask, "a subtree, not a string prefix");
        assert_eq!(p.judge(Path::new("/x/prod.env"), Write).decision, Allow);
    }

    #[test]
    fn resolution_follows_symlinks_and_dotdot() {
        let (_d, p) = policy(Mode::Coding, WorkspacePolicy::default());
        let root = p.root().to_path_buf();
        std::fs::create_dir(root.join("sub")).expect("mkdir");
        std::os::unix::fs::symlink("/etc", root.join("out")).expect("symlink");
        assert_eq!(p.resolve("sub/../a.txt", &root).expect("resolve"), root.join("a.txt"));
        assert_eq!(p.resolve("out/hosts", &root).expect("resolve"), PathBuf::from("/etc/hosts"));
        assert_eq!(p.resolve("../../../../../../etc/passwd", &root).expect("resolve"), PathBuf::from("/etc/passwd"));
        assert_eq!(p.resolve("new/dir/../f", &root).expect("resolve"), root.join("new/f"));
        std::os::unix::fs::symlink("loop", root.join("loop")).expect("symlink");
        assert!(matches!(p.resolve("loop/x", &root), Err(ResolveError::Loop)));
        assert!(!p.is_inside(&p.resolve("out", &root).expect("resolve")));
    }
}
