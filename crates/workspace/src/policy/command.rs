//! The command verdict: a command is split into segments, each segment is
//! judged by the decider and the command rules, and the paths the command
//! names (its redirections and path-like words) are judged as reads or
//! writes. The most restrictive decision wins.

use crate::config::{CommandDecider, CommandRule, Decision, Op};

/// A path a command names, and what it does with it.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub(crate) struct PathClaim {
    /// The path as written (quotes removed).
    pub(crate) path: String,
    /// Read or write.
    pub(crate) op: Op,
}

/// Splits `command` on `||`, `&&`, `;`, newlines, `|` and a background `&`,
/// outside quotes. The `&` of `2>&1`, `>&`, `&>` and `<&` is a redirection,
/// not a split. Empty segments are dropped.
pub(crate) fn split_segments(command: &str) -> Vec<String> {
    let chars: Vec<char> = command.chars().collect();
    let mut segments = Vec::new();
    let mut current = String::new();
    let (mut single, mut double) = (false, false);
    let mut i = 0;
    let cut = |current: &mut String, segments: &mut Vec<String>| {
        let s = current.trim();
        if !s.is_empty() {
            segments.push(s.to_owned());
        }
        current.clear();
    };
    while i < chars.len() {
        let c = chars[i];
        let next = chars.get(i + 1).copied();
        if single {
            single = c != '\'';
            current.push(c);
        } else if c == '\\' {
            current.push(c);
            if let Some(n) = next {
                current.push(n);
                i += 1;
            }
        } else if double {
            double = c != '"';
            current.push(c);
        } else {
            match c {
                '\'' => {
                    single = true;
                    current.push(c);
                }
                '"' => {
                    double = true;
                    current.push(c);
                }
                ';' | '\n' => cut(&mut current, &mut segments),
                '|' => {
                    // `||`, and bash's `|&` (a pipe of both streams), are one operator.
                    if matches!(next, Some('|') | Some('&')) {
                        i += 1;
                    }
                    cut(&mut current, &mut segments);
                }
                '&' if next == Some('&') => {
                    i += 1;
                    cut(&mut current, &mut segments);
                }
                '&' => {
                    let prev = if i > 0 { Some(chars[i - 1]) } else { None };
                    if matches!(prev, Some('>') | Some('<')) || next == Some('>') {
                        current.push(c);
                    } else {
                        cut(&mut current, &mut segments);
                    }
                }
                _ => current.push(c),
            }
        }
        i += 1;
    }
    cut(&mut current, &mut segments);
    segments
}

/// The words of a segment with quotes removed, and whether each word was
/// an operator token; `None` when the quotes do not balance.
fn words(segment: &str) -> Option<Vec<String>> {
    let mut words = Vec::new();
    let mut word = String::new();
    let mut started = false;
    let (mut single, mut double) = (false, false);
    let mut chars = segment.chars().peekable();
    while let Some(c) = chars.next() {
        if single {
            if c == '\'' {
                single = false;
            } else {
                word.push(c);
            }
        } else if double {
            match c {
                '"' => double = false,
                '\\' => {
                    if let Some(n) = chars.next() {
                        word.push(n);
                    }
                }
                _ => word.push(c),
            }
        } else {
            match c {
                '\'' => {
                    single = true;
                    started = true;
                }
                '"' => {
                    double = true;
                    started = true;
                }
                '\\' => {
                    if let Some(n) = chars.next() {
                        word.push(n);
                    }
                    started = true;
                }
                c if c.is_whitespace() => {
                    if started || !word.is_empty() {
                        words.push(std::mem::take(&mut word));
                    }
                    started = false;
                }
                _ => word.push(c),
            }
        }
    }
    if single || double {
        return None;
    }
    if started || !word.is_empty() {
        words.push(word);
    }
    Some(words)
}

/// Device paths a command may name freely.
const FREE_DEVICES: [&str; 9] = [
    "/dev/null",
    "/dev/zero",
    "/dev/stdin",
    "/dev/stdout",
    "/dev/stderr",
    "/dev/tty",
    "/dev/random",
    "/dev/urandom",
    "-",
];

fn skipped(target: &str) -> bool {
    target.is_empty()
        || target.bytes().all(|b| b.is_ascii_digit())
        || FREE_DEVICES.contains(&target)
        || target.starts_with("/dev/fd/")
        || target.contains("://")
}

/// The redirection operators, longest first, and what their target is.
const REDIRECTIONS: [(&str, Op); 8] = [
    ("&>>", Op::Write),
    ("&>", Op::Write),
    (">>", Op::Write),
    (">|", Op::Write),
    (">&", Op::Write),
    ("<&", Op::Read),
    (">", Op::Write),
    ("<", Op::Read),
];

/// The path claims of one segment: redirection targets (writes for `>`,
/// `>>`, `&>`, `&>>`, `>&`, `>|`; reads for `<`), and every other word
/// that contains `/` or `.` or starts with `~` (reads; `--x=v` gives `v`).
/// Fd numbers, `-`, heredocs, the free devices, `/dev/fd/*` and URLs are
/// skipped; unbalanced quotes give no claims.
pub(crate) fn path_claims(segment: &str) -> Vec<PathClaim> {
    let Some(words) = words(segment) else { return Vec::new() };
    let mut claims = Vec::new();
    let mut pending: Option<Op> = None;
    let mut heredoc = false;
    for word in &words {
        if heredoc {
            heredoc = false;
            continue;
        }
        if let Some(op) = pending.take() {
            if !skipped(word) {
                claims.push(PathClaim { path: word.clone(), op });
            }
            continue;
        }
        // A leading fd number belongs to the operator (`2>`, `2>>`).
        let body = word.trim_start_matches(|c: char| c.is_ascii_digit());
        if body.starts_with("<<") {
            // `<<EOF`, `<<-EOF`, `<<<word`: the delimiter or the string is no path.
            heredoc = body.trim_start_matches(['<', '-']).is_empty();
            continue;
        }
        if let Some((op_text, op)) = REDIRECTIONS.iter().find(|(o, _)| body.starts_with(o)) {
            let target = &body[op_text.len()..];
            if target.is_empty() {
                pending = Some(*op);
            } else if !skipped(target) {
                claims.push(PathClaim { path: target.to_owned(), op: *op });
            }
            continue;
        }
        let value = match word.strip_prefix("--").and_then(|w| w.split_once('=')) {
            Some((_, v)) => v,
            None => word.as_str(),
        };
        if (value.contains('/') || value.contains('.') || value.starts_with('~')) && !skipped(value) {
            claims.push(PathClaim { path: value.to_owned(), op: Op::Read });
        }
    }
    claims
}

/// Whether `segment` starts with `prefix` at a word boundary, whitespace collapsed.
fn prefix_matches(segment: &str, prefix: &str) -> bool {
    let seg: Vec<&str> = segment.split_whitespace().collect();
    let pre: Vec<&str> = prefix.split_whitespace().collect();
    !pre.is_empty() && seg.len() >= pre.len() && seg[..pre.len()] == pre[..]
}

/// The verdict of one segment: the decider first, then the first matching
/// rule, then `default`.
pub(crate) fn segment_decision(
    segment: &str,
    decider: Option<&CommandDecider>,
    rules: &[CommandRule],
    default: Decision,
) -> Decision {
    if let Some(decision) = decider.and_then(|d| d(segment)) {
        return decision;
    }
    rules.iter().find(|r| prefix_matches(segment, &r.prefix)).map_or(default, |r| r.decision)
}

/// The verdict of the command text alone (no path claims): the most
/// restrictive of its segments; deny when there is no shell.
pub(crate) fn command_decision(
    command: &str,
    decider: Option<&CommandDecider>,
    rules: &[CommandRule],
    default: Option<Decision>,
) -> Decision {
    let Some(default) = default else { return Decision::Deny };
    split_segments(command).iter().map(|s| segment_decision(s, decider, rules, default)).max().unwrap_or(default)
}

#[cfg(test)]
mod tests {
    use super::*;
    use Decision::*;

    fn rules() -> Vec<CommandRule> {
        vec![CommandRule::new("git", Allow), CommandRule::new("rm -rf", Deny), CommandRule::new("git push", Deny)]
    }

    fn verdict(command: &str) -> Decision {
        command_decision(command, None, &rules(), Some(Ask))
    }

    #[test]
    fn compound_commands_take_the_most_restrictive_segment() {
        assert_eq!(verdict("git status"), Allow);
        for sep in ["; ", " && ", " || ", " | ", " & ", "\n"] {
            assert_eq!(verdict(&format!("git status{sep}rm -rf /")), Deny, "{sep:?}");
        }
        assert_eq!(verdict("git status; ls"), Ask);
    }

    #[test]
    fn fd_redirections_do_not_split() {
        assert_eq!(split_segments("git status 2>&1"), ["git status 2>&1"]);
        assert_eq!(verdict("git status 2>&1"), Allow);
        assert_eq!(split_segments("make &> log"), ["make &> log"]);
        assert_eq!(split_segments("cat <&3"), ["cat <&3"]);
        assert_eq!(split_segments("a |& b"), ["a", "b"]);
        assert_eq!(split_segments("sleep 5 &"), ["sleep 5"]);
    }

    #[test]
    fn quotes_do_not_split() {
        assert_eq!(split_segments("echo 'a; rm -rf /' && git log"), ["echo 'a; rm -rf /'", "git log"]);
        assert_eq!(split_segments(r#"echo "x | y""#), [r#"echo "x | y""#]);
    }

    #[test]
    fn rules_match_at_a_word_boundary_and_the_first_wins() {
        assert_eq!(verdict("git push origin"), Allow, "`git` comes first");
        let rules = vec![CommandRule::new("git push", Deny), CommandRule::new("git", Allow)];
        assert_eq!(command_decision("git push origin", None, &rules, Some(Ask)), Deny);
        assert_eq!(command_decision("git pushx", None, &rules, Some(Ask)), Allow);
        assert_eq!(command_decision("gitk", None, &rules, Some(Ask)), Ask);
        assert_eq!(command_decision("git   push  x", None, &rules, Some(Ask)), Deny);
    }

    #[test]
    fn the_decider_is_final_and_no_shell_denies() {
        let decider: CommandDecider = std::sync::Arc::new(|s: &str| s.starts_with("ls").then_some(Allow));
        assert_eq!(command_decision("ls -l", Some(&decider), &[CommandRule::new("ls", Deny)], Some(Ask)), Allow);
        assert_eq!(command_decision("cat x", Some(&decider), &[], Some(Ask)), Ask);
        assert_eq!(command_decision("true", None, &[], None), Deny);
    }

    fn claims(segment: &str) -> Vec<(String, Op)> {
        path_claims(segment).into_iter().map(|c| (c.path, c.op)).collect()
    }

    #[test]
    fn path_claims_of_redirections_and_words() {
        assert_eq!(claims("echo hi > out.txt"), [("out.txt".into(), Op::Write)]);
        assert_eq!(claims("echo hi >>/tmp/log"), [("/tmp/log".into(), Op::Write)]);
        assert_eq!(claims("make &>build.log 2>&1"), [("build.log".into(), Op::Write)]);
        assert_eq!(claims("cmd >| f"), [("f".into(), Op::Write)]);
        assert_eq!(claims("sort < in.txt"), [("in.txt".into(), Op::Read)]);
        assert_eq!(claims("cat ~/.ssh/id_rsa"), [("~/.ssh/id_rsa".into(), Op::Read)]);
        assert_eq!(claims("tool --config=/etc/app.toml"), [("/etc/app.toml".into(), Op::Read)]);
        assert_eq!(claims("cmd 2>/dev/null >&2 < /dev/stdin"), []);
        assert_eq!(claims("cat /dev/fd/3 - "), []);
        assert_eq!(claims("curl https://example.com/a.txt"), []);
        assert_eq!(claims("cat <<EOF"), []);
        assert_eq!(claims("cat <<< hello.txt"), []);
        assert_eq!(claims("echo 'unbalanced > /etc/x"), []);
        assert_eq!(claims("git status"), []);
        assert_eq!(claims("echo \"a b/c\""), [("a b/c".into(), Op::Read)]);
    }
}
