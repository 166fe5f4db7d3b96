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

/// What a segment does to the working directory of the segments after it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Chdir {
    /// Nothing: it is not `cd`, `pushd` or `popd`.
    Stays,
    /// `cd DIR` or `pushd DIR` with a literal `DIR`.
    To(String),
    /// A change the policy cannot follow: `cd` alone (home), `cd -`,
    /// `popd`, or a target with an expansion in it.
    Unknown,
}

/// Whether a word holds an expansion the policy cannot evaluate: a
/// variable, a command substitution.
pub(crate) fn has_expansion(word: &str) -> bool {
    word.contains('$') || word.contains('`')
}

/// The words of the command a segment runs: after `VAR=value`
/// assignments, with the `(` or `{` of a group taken off the first.
fn command_words(segment: &str) -> Vec<String> {
    let Some(words) = words(segment) else { return Vec::new() };
    let mut words: Vec<String> = words
        .into_iter()
        .skip_while(|w| {
            w.split_once('=').is_some_and(|(name, _)| {
                !name.is_empty() && name.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'_')
            })
        })
        .collect();
    if let Some(first) = words.first_mut() {
        *first = first.trim_start_matches(['(', '{']).to_owned();
        if first.is_empty() {
            words.remove(0);
        }
    }
    words
}

/// What `segment` does to the working directory.
pub(crate) fn chdir(segment: &str) -> Chdir {
    let words = command_words(segment);
    match words.first().map(String::as_str) {
        Some("cd" | "pushd") => {
            let targets: Vec<&String> =
                words[1..].iter().filter(|w| !w.starts_with('-') || w.as_str() == "-").collect();
            match targets.as_slice() {
                [target] if target.as_str() != "-" && !has_expansion(target) => {
                    Chdir::To(target.trim_end_matches([')', '}']).to_owned())
                }
                _ => Chdir::Unknown,
            }
        }
        Some("popd") => Chdir::Unknown,
        _ => Chdir::Stays,
    }
}

/// Shells that run a string given with `-c`.
const SHELLS: [&str; 7] = ["sh", "bash", "dash", "zsh", "ksh", "ash", "busybox"];

/// Whether `segment` runs text the policy cannot read, so that where it
/// writes cannot be known: a command substitution (`$(…)`, backquotes), a
/// process substitution, `eval`, `source` or `.`, or a shell given `-c`.
pub(crate) fn opaque(segment: &str) -> bool {
    let mut single = false;
    let chars: Vec<char> = segment.chars().collect();
    for (i, &c) in chars.iter().enumerate() {
        let next = chars.get(i + 1).copied();
        if c == '\'' {
            single = !single;
        } else if !single && (c == '`' || (matches!(c, '$' | '<' | '>') && next == Some('('))) {
            return true;
        }
    }
    let words = command_words(segment);
    let program = words.first().map(|w| w.rsplit('/').next().unwrap_or(w));
    match program {
        Some("eval" | "source" | ".") => true,
        Some(shell) if SHELLS.contains(&shell) => {
            words[1..].iter().any(|w| w.starts_with('-') && !w.starts_with("--") && w.contains('c'))
        }
        Some("env" | "exec" | "nohup" | "timeout" | "nice" | "xargs" | "sudo" | "command") => {
            // A wrapper: what it runs is judged as if written alone.
            let rest =
                words[1..].iter().skip_while(|w| w.starts_with('-') || w.contains('=') || w.parse::<f64>().is_ok());
            let rest: Vec<&str> = rest.map(String::as_str).collect();
            !rest.is_empty() && opaque(&rest.join(" "))
        }
        _ => false,
    }
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

    #[test]
    fn a_working_directory_change_is_followed_or_unknown() {
        assert_eq!(chdir("cd /etc"), Chdir::To("/etc".into()));
        assert_eq!(chdir("pushd -q sub"), Chdir::To("sub".into()));
        assert_eq!(chdir("(cd ../x"), Chdir::To("../x".into()));
        assert_eq!(chdir("CDPATH= cd /tmp"), Chdir::To("/tmp".into()));
        for unknown in ["cd", "cd -", "cd $HOME", "cd `pwd`/..", "popd", "cd a b"] {
            assert_eq!(chdir(unknown), Chdir::Unknown, "{unknown}");
        }
        assert_eq!(chdir("echo cd /etc"), Chdir::Stays);
    }

    #[test]
    fn text_the_policy_cannot_read_is_opaque() {
        for opaque_segment in [
            "echo $(cat f) > x",
            "echo `id`",
            "diff <(ls a) b",
            "eval \"$CMD\"",
            "source ./env.sh",
            ". ./env.sh",
            "sh -c 'echo x > /etc/f'",
            "bash -ec 'x'",
            "/bin/bash -c x",
            "env FOO=1 sh -c x",
            "timeout 5 bash -c x",
            "nohup eval x",
        ] {
            assert!(opaque(opaque_segment), "{opaque_segment}");
        }
        for plain in ["echo '$(not run)'", "sh script.sh", "bash --version", "ls -c", "make", "echo $HOME"] {
            assert!(!opaque(plain), "{plain}");
        }
    }
}
