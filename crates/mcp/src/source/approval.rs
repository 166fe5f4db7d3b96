//! `needs_approval` of an MCP server: a flag, or rules over each call's
//! tool and arguments (docs/mcp.md, "Approval rules").

use serde::de::{self, Deserializer, SeqAccess, Visitor};
use serde::{Deserialize, Serialize, Serializer};
use serde_json::Value;

/// When a server's calls ask for approval.
///
/// In TOML: `needs_approval = true` (every call), `false` (none; the
/// default), or a list of rules, any of which asks:
///
/// ```toml
/// needs_approval = [
///   { tool = "delete_file" },                            # every call of it
///   { tool = "write_file", pointer = "/path", prefix = "/etc" },
///   { pointer = "/force", equals = true },               # any tool
/// ]
/// ```
#[derive(Debug, Clone, Default, PartialEq, Eq)]
#[non_exhaustive]
pub enum ApprovalNeed {
    /// No call asks.
    #[default]
    Never,
    /// Every call asks.
    Always,
    /// A call asks when one of these rules matches it.
    When(Vec<ApprovalRule>),
}

/// One rule: a call matches when its tool is `tool` (when given) and, when
/// a `pointer` is given, its arguments have a value there that equals
/// `equals` and starts with `prefix` (each when given). Values are compared
/// as JSON, exactly: `"true"` is not `true`, and a path is a string (a
/// prefix rule does not resolve `..`; a tool that takes paths should be
/// confined by its sandbox, not by this).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
#[non_exhaustive]
pub struct ApprovalRule {
    /// The tool's raw name (before the prefix). Default: any tool.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tool: Option<String>,
    /// An RFC 6901 JSON pointer into the arguments, such as `/path`.
    /// Default: none (the rule is about the tool alone).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pointer: Option<String>,
    /// The value there that asks. Default: any value (it must be there).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub equals: Option<Value>,
    /// The start of a string there that asks. Default: any.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub prefix: Option<String>,
}

impl ApprovalRule {
    /// What is wrong with the rule, if anything.
    pub(crate) fn problem(&self) -> Option<String> {
        if self.tool.is_none() && self.pointer.is_none() {
            return Some("a needs_approval rule names a `tool`, a `pointer`, or both".into());
        }
        if self.pointer.is_none() && (self.equals.is_some() || self.prefix.is_some()) {
            return Some("a needs_approval rule with `equals` or `prefix` needs the `pointer` they compare".into());
        }
        if let Some(pointer) = &self.pointer
            && !pointer.is_empty()
            && !pointer.starts_with('/')
        {
            return Some(format!(
                "needs_approval pointer {pointer:?} is not a JSON pointer: it is empty or starts with '/', such as \"/path\""
            ));
        }
        None
    }

    /// Whether the call of `tool` with `arguments` matches.
    pub(crate) fn matches(&self, tool: &str, arguments: &Value) -> bool {
        if self.tool.as_deref().is_some_and(|t| t != tool) {
            return false;
        }
        let Some(pointer) = &self.pointer else { return true };
        let Some(value) = arguments.pointer(pointer) else { return false };
        self.equals.as_ref().is_none_or(|e| e == value)
            && self.prefix.as_deref().is_none_or(|p| value.as_str().is_some_and(|s| s.starts_with(p)))
    }
}

impl ApprovalNeed {
    /// Whether a call of `tool` with `arguments` asks.
    pub(crate) fn asks(&self, tool: &str, arguments: &Value) -> bool {
        match self {
            ApprovalNeed::Never => false,
            ApprovalNeed::Always => true,
            ApprovalNeed::When(rules) => rules.iter().any(|r| r.matches(tool, arguments)),
        }
    }
}

impl Serialize for ApprovalNeed {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        match self {
            ApprovalNeed::Never => serializer.serialize_bool(false),
            ApprovalNeed::Always => serializer.serialize_bool(true),
            ApprovalNeed::When(rules) => rules.serialize(serializer),
        }
    }
}

impl<'de> Deserialize<'de> for ApprovalNeed {
    /// A boolean or a list of rules; anything else is an error saying so
    /// (serde's untagged enums would say only "did not match any variant").
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        struct Need;
        impl<'de> Visitor<'de> for Need {
            type Value = ApprovalNeed;
            fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                f.write_str("true, false, or a list of rules such as [{ tool = \"delete_file\" }]")
            }
            fn visit_bool<E: de::Error>(self, v: bool) -> Result<ApprovalNeed, E> {
                Ok(if v { ApprovalNeed::Always } else { ApprovalNeed::Never })
            }
            fn visit_seq<A: SeqAccess<'de>>(self, seq: A) -> Result<ApprovalNeed, A::Error> {
                let rules = Vec::<ApprovalRule>::deserialize(de::value::SeqAccessDeserializer::new(seq))?;
                if let Some(problem) = rules.iter().find_map(ApprovalRule::problem) {
                    return Err(de::Error::custom(problem));
                }
                Ok(ApprovalNeed::When(rules))
            }
        }
        deserializer.deserialize_any(Need)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[derive(Deserialize)]
    struct Server {
        needs_approval: ApprovalNeed,
    }

    fn parse(toml: &str) -> Result<ApprovalNeed, String> {
        toml::from_str::<Server>(toml).map(|s| s.needs_approval).map_err(|e| e.message().to_owned())
    }

    #[test]
    fn flags_and_rules_parse_and_mistakes_are_named() {
        assert_eq!(parse("needs_approval = true"), Ok(ApprovalNeed::Always));
        assert_eq!(parse("needs_approval = false"), Ok(ApprovalNeed::Never));
        let rules =
            parse(r#"needs_approval = [{ tool = "write_file", pointer = "/path", prefix = "/etc" }]"#).expect("rules");
        assert!(rules.asks("write_file", &json!({"path": "/etc/passwd"})));
        assert!(!rules.asks("write_file", &json!({"path": "notes.txt"})));
        assert!(!rules.asks("read_file", &json!({"path": "/etc/passwd"})));
        let unknown = parse(r#"needs_approval = [{ tool = "x", when = 1 }]"#).expect_err("unknown key");
        assert!(
            unknown.contains("unknown field `when`") && unknown.contains("`tool`, `pointer`, `equals`, `prefix`"),
            "{unknown}"
        );
        assert!(parse(r#"needs_approval = "yes""#).expect_err("a string").contains("true, false, or a list of rules"));
        assert!(parse("needs_approval = [{}]").expect_err("empty").contains("names a `tool`, a `pointer`, or both"));
        assert!(
            parse(r#"needs_approval = [{ tool = "x", equals = 1 }]"#)
                .expect_err("no pointer")
                .contains("needs the `pointer`")
        );
        assert!(
            parse(r#"needs_approval = [{ pointer = "path" }]"#)
                .expect_err("bad pointer")
                .contains("not a JSON pointer")
        );
    }

    #[test]
    fn values_compare_exactly_and_a_missing_value_does_not_ask() {
        let rules = ApprovalNeed::When(vec![ApprovalRule {
            tool: None,
            pointer: Some("/force".into()),
            equals: Some(json!(true)),
            prefix: None,
        }]);
        assert!(rules.asks("any", &json!({"force": true})));
        assert!(!rules.asks("any", &json!({"force": "true"})));
        assert!(!rules.asks("any", &json!({})));
    }
}
