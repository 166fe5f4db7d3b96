//! The docs cannot drift from the program unnoticed: every `lovia` command
//! line in README.md and docs/ names a command that exists and flags that
//! command takes, and every TOML example parses as the config it shows
//! (unknown keys are errors in every config, so a renamed key fails here).

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::process::Command;

fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

/// README.md and every page of docs/, with their text.
fn pages() -> Vec<(String, String)> {
    let mut names = vec![root().join("README.md")];
    let mut docs: Vec<PathBuf> = std::fs::read_dir(root().join("docs"))
        .expect("docs/")
        .map(|e| e.expect("an entry").path())
        .filter(|p| p.extension().is_some_and(|x| x == "md"))
        .collect();
    docs.sort();
    names.extend(docs);
    names
        .into_iter()
        .map(|p| {
            let name = p.strip_prefix(root()).unwrap_or(&p).display().to_string();
            (name, std::fs::read_to_string(&p).expect("read a page"))
        })
        .collect()
}

/// A page's code: each fenced block (with its language) and each inline
/// code span (language `inline`).
fn code(text: &str) -> Vec<(String, String)> {
    let mut out = Vec::new();
    let mut fence: Option<(String, Vec<&str>)> = None;
    for line in text.lines() {
        let trimmed = line.trim_start();
        if let Some(lang) = trimmed.strip_prefix("```") {
            match fence.take() {
                Some((lang, lines)) => out.push((lang, lines.join("\n"))),
                None => fence = Some((lang.trim().to_owned(), Vec::new())),
            }
            continue;
        }
        match &mut fence {
            Some((_, lines)) => lines.push(line),
            None => {
                for (i, span) in line.split('`').enumerate() {
                    if i % 2 == 1 {
                        out.push(("inline".to_owned(), span.to_owned()));
                    }
                }
            }
        }
    }
    out
}

/// `lovia <args>`'s help text, or `None` when it is not a command.
fn help(cache: &mut HashMap<String, Option<String>>, command: &str) -> Option<String> {
    cache
        .entry(command.to_owned())
        .or_insert_with(|| {
            let mut args: Vec<&str> = command.split_whitespace().collect();
            args.push("--help");
            let out = Command::new(env!("CARGO_BIN_EXE_lovia")).args(&args).output().expect("run lovia");
            out.status.success().then(|| String::from_utf8_lossy(&out.stdout).into_owned())
        })
        .clone()
}

/// The flags of a command line: `--name` tokens, not inside quotes.
fn flags(rest: &str) -> Vec<String> {
    let mut out = Vec::new();
    let mut quote = None;
    for word in rest.split_whitespace() {
        let starts_quoted = quote.is_none() && (word.starts_with('\'') || word.starts_with('"'));
        if let Some(q) = quote {
            if word.ends_with(q) {
                quote = None;
            }
            continue;
        }
        if starts_quoted {
            let q = word.chars().next().unwrap_or('\'');
            if !(word.len() > 1 && word.ends_with(q)) {
                quote = Some(q);
            }
            continue;
        }
        let word = word.trim_start_matches(['[', '(']);
        if let Some(name) = word.strip_prefix("--") {
            let name: String = name.chars().take_while(|c| c.is_ascii_alphanumeric() || *c == '-').collect();
            if name.starts_with(|c: char| c.is_ascii_lowercase()) {
                out.push(format!("--{name}"));
            }
        }
    }
    out
}

/// The `lovia` command lines of a piece of code: each line (joined over
/// `\` continuations) split at `&&`, `||`, `;` and `|`, whose first word,
/// after environment assignments and a `$ ` prompt, is `lovia` or a path
/// ending in it.
fn command_lines(code: &str) -> Vec<String> {
    let joined = code.replace("\\\n", " ");
    let mut out = Vec::new();
    for line in joined.lines() {
        for part in line.split("&&").flat_map(|p| p.split("||")).flat_map(|p| p.split([';', '|'])) {
            let mut words = part.split_whitespace().peekable();
            if words.peek() == Some(&"$") {
                words.next();
            }
            while words.peek().is_some_and(|w| w.contains('=') && !w.starts_with('-')) {
                words.next();
            }
            match words.next() {
                Some(first) if first == "lovia" || first.ends_with("/lovia") => {
                    out.push(words.collect::<Vec<_>>().join(" "));
                }
                _ => {}
            }
        }
    }
    out
}

#[test]
fn every_command_and_flag_the_docs_name_exists() {
    let mut cache = HashMap::new();
    let global = help(&mut cache, "").expect("lovia --help");
    let mut wrong = Vec::new();
    let mut checked = 0;
    for (page, text) in pages() {
        for (lang, code) in code(&text) {
            // Output shown to the reader (`text`), not commands to run.
            if !matches!(lang.as_str(), "" | "sh" | "bash" | "console" | "inline") {
                continue;
            }
            for line in command_lines(&code) {
                // A word of letters (`lovia mcp: …` is a log line, `lovia = …` a manifest's).
                let is_word = |s: &&str| s.chars().all(|c| c.is_ascii_lowercase() || c == '-') && !s.starts_with('-');
                let Some(sub) = line.split_whitespace().next().filter(is_word) else { continue };
                // `lovia serve --hash-key` and the like: the flags of the command named.
                let Some(sub_help) = help(&mut cache, sub) else {
                    wrong.push(format!("{page}: `lovia {sub}` is not a command: {line}"));
                    continue;
                };
                for flag in flags(&line) {
                    checked += 1;
                    let known = |h: &str| {
                        h.match_indices(&flag).any(|(at, _)| {
                            !h[at + flag.len()..].starts_with(|c: char| c.is_ascii_alphanumeric() || c == '-')
                        })
                    };
                    if !known(&sub_help) && !known(&global) {
                        wrong.push(format!("{page}: `lovia {sub}` has no {flag}: {line}"));
                    }
                }
            }
        }
    }
    assert!(wrong.is_empty(), "the docs name what does not exist:\n{}", wrong.join("\n"));
    assert!(checked > 100, "only {checked} flags were found: the scan is broken");
}

/// What a TOML example is, by its first table or key.
fn kind_of(toml: &str) -> &'static str {
    let first = toml.lines().map(str::trim).find(|l| !l.is_empty() && !l.starts_with('#')).unwrap_or_default();
    if toml.contains("[[tenants]]") || first.starts_with("listen") {
        "serve"
    } else if first.starts_with("[[tenants.") {
        "tenant"
    } else if first.starts_with("[[mcp_servers]]") {
        "mcp_servers"
    } else if first.starts_with("needs_approval") {
        "mcp_server_keys"
    } else if first.starts_with("[lib]") || first.starts_with("[package]") {
        "cargo"
    } else {
        "plugin"
    }
}

#[derive(serde::Deserialize)]
#[serde(deny_unknown_fields)]
#[allow(dead_code, reason = "parsed to check the keys, not read")]
struct ServersFile {
    mcp_servers: Vec<lovia_mcp::source::McpServerConfig>,
}

#[test]
fn every_toml_example_in_the_docs_parses_as_its_config() {
    let mut wrong = Vec::new();
    let mut checked = 0;
    for (page, text) in pages() {
        for (lang, toml) in code(&text) {
            if lang != "toml" {
                continue;
            }
            checked += 1;
            let parsed = match kind_of(&toml) {
                "serve" => toml::from_str::<lovia_serve::ServeConfig>(&toml).map(drop),
                "tenant" => toml::from_str::<lovia_serve::ServeConfig>(&format!(
                    "[[tenants]]\nname = \"t\"\napi_keys = []\n{toml}"
                ))
                .map(drop),
                "mcp_servers" => toml::from_str::<ServersFile>(&toml).map(drop),
                "mcp_server_keys" => {
                    toml::from_str::<ServersFile>(&format!("[[mcp_servers]]\nname = \"s\"\ncommand = \"c\"\n{toml}"))
                        .map(drop)
                }
                "cargo" => toml::from_str::<toml::Table>(&toml).map(drop),
                _ => toml::from_str::<lovia_host::plugin::config::PluginConfig>(&toml).map(drop),
            };
            if let Err(e) = parsed {
                wrong.push(format!("{page}: a {} example does not parse: {}\n{toml}", kind_of(&toml), e.message()));
            }
        }
    }
    assert!(wrong.is_empty(), "{}", wrong.join("\n\n"));
    assert!(checked >= 8, "only {checked} TOML examples were found: the scan is broken");
}
