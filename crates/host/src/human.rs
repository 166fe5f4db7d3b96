//! `ask_human`: the factory of the tool that asks a person a question
//! through a [`HumanChannel`] (docs/applications.md, "Asking a person").

use crate::call::BoxFuture;
use crate::{CallContext, Failure, Tool, ToolOutput};
use serde::{Deserialize, Serialize};
use serde_json::{Value, json};
use std::sync::Arc;

/// The tool's name unless set: `ask_human`.
pub const ASK_HUMAN: &str = "ask_human";
/// The longest question, in characters: 4,000.
pub const MAX_QUESTION_CHARS: usize = 4_000;
/// The longest answer a channel passes on, in characters: 8,000 (longer
/// ones are cut).
pub const MAX_ANSWER_CHARS: usize = 8_000;

const DESCRIPTION: &str = "Ask the person you are working for a question and wait for the answer.
- Ask only when you cannot go on without their decision or knowledge.
- `options` offers 2-4 choices (a short label and an optional description); without options the person answers in their own words.
- `multi_select` lets them pick several options; the answer then lists the chosen labels, one per line.";

/// A question as a person sees it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[non_exhaustive]
pub struct Question {
    /// The call that asks it.
    pub call_id: String,
    /// The question.
    pub question: String,
    /// The choices, if any (2 to 4, labels unique).
    pub options: Option<Vec<QuestionOption>>,
    /// Whether several options may be chosen (never without options).
    pub multi_select: bool,
}

/// One choice of a [`Question`].
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[non_exhaustive]
pub struct QuestionOption {
    /// The label, on one line; the answer names it.
    pub label: String,
    /// More about it, on one line (may be empty).
    #[serde(default)]
    pub description: String,
}

/// Why a question got no answer. The model reads `Tool error: <this>`.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum HumanError {
    /// The question was withdrawn, with the reason the model reads.
    #[error("{0}")]
    Cancelled(String),
    /// Nobody is there to ask any more.
    #[error("human channel is closed")]
    Closed,
}

/// Where questions go: a chat's client, a console, an MCP client, a
/// terminal. `ask` returns the answer text (several chosen labels joined
/// by a newline).
///
/// ```
/// use lovia_host::{CallContext, call::BoxFuture};
/// use lovia_host::human::{HumanChannel, HumanError, Question};
/// #[derive(Debug)]
/// struct AlwaysYes;
/// impl HumanChannel for AlwaysYes {
///     fn ask<'a>(&'a self, _q: &'a Question, _ctx: &'a CallContext) -> BoxFuture<'a, Result<String, HumanError>> {
///         Box::pin(async { Ok("yes".to_owned()) })
///     }
/// }
/// let tool = lovia_host::human::ask_human(std::sync::Arc::new(AlwaysYes));
/// assert_eq!(tool.name(), "ask_human");
/// ```
pub trait HumanChannel: Send + Sync + std::fmt::Debug {
    /// Asks `question` and waits for the answer.
    fn ask<'a>(&'a self, question: &'a Question, ctx: &'a CallContext) -> BoxFuture<'a, Result<String, HumanError>>;
}

/// What `ask_human` is, for a listing that shows the tool where nobody can
/// be asked (a service's tool list: the tool exists in its chats).
pub fn ask_human_spec() -> crate::ToolSpec {
    /// A channel with nobody behind it; the spec is all that is used.
    #[derive(Debug)]
    struct Nobody;
    impl HumanChannel for Nobody {
        fn ask<'a>(&'a self, _: &'a Question, _: &'a CallContext) -> BoxFuture<'a, Result<String, HumanError>> {
            Box::pin(async { Err(HumanError::Closed) })
        }
    }
    ask_human(Arc::new(Nobody)).spec().clone()
}

/// `ask_human` as a capability of a door: `tool` (the door makes it, over
/// whoever answers there), needing a person who answers.
pub fn ask_human_capability(tool: Tool) -> crate::capability::ToolList {
    crate::capability::ToolList::new(ASK_HUMAN, crate::ToolSource::AgentTools, vec![tool])
        .needing(crate::capability::Needs::NOTHING.questions())
}

/// The `ask_human` tool over `channel`: not parallel (at most one open
/// question per run), never retried.
pub fn ask_human(channel: Arc<dyn HumanChannel>) -> Tool {
    let tool = Tool::builder(ASK_HUMAN)
        .description(DESCRIPTION)
        // Asks a person (outside the system) and changes nothing; asking
        // again asks again.
        .hints(crate::ToolHints::stated(true, false, false, true))
        .parameters(json!({
            "type": "object",
            "properties": {
                "question": {"type": "string", "minLength": 1, "maxLength": MAX_QUESTION_CHARS, "description": "The question."},
                "options": {
                    "anyOf": [
                        {
                            "type": "array",
                            "minItems": 2,
                            "maxItems": 4,
                            "items": {
                                "type": "object",
                                "properties": {
                                    "label": {"type": "string", "minLength": 1, "maxLength": 200, "pattern": "^[^\\r\\n]+$"},
                                    "description": {"type": "string", "default": "", "maxLength": 1000, "pattern": "^[^\\r\\n]*$"}
                                },
                                "required": ["label"],
                                "additionalProperties": false
                            }
                        },
                        {"type": "null"}
                    ],
                    "default": null,
                    "description": "2-4 choices, or null for a free answer."
                },
                "multi_select": {"type": "boolean", "default": false, "description": "Whether several options may be chosen."}
            },
            "required": ["question"],
            "additionalProperties": false
        }))
        .invoke(move |args: Value, ctx: CallContext| {
            let channel = channel.clone();
            async move {
                let question = parse(&args, &ctx.call_id)?;
                match channel.ask(&question, &ctx).await {
                    Ok(answer) => Ok(ToolOutput::Text(answer.chars().take(MAX_ANSWER_CHARS).collect())),
                    Err(e) => Err(Failure::Tool { message: e.to_string(), hint: None, kind: None }),
                }
            }
        })
        .unwrap_or_else(|e| unreachable!("ask_human builds: {e}"));
    tool.with_parallel(false).with_retries(0)
}

/// The question of checked arguments: labels unique, and `multi_select`
/// forced off without options.
fn parse(args: &Value, call_id: &str) -> Result<Question, Failure> {
    let options: Option<Vec<QuestionOption>> = match args.get("options") {
        None | Some(Value::Null) => None,
        Some(list) => {
            Some(serde_json::from_value(list.clone()).map_err(|e| Failure::InvalidArguments(format!("options: {e}")))?)
        }
    };
    if let Some(options) = &options {
        let mut labels: Vec<&str> = options.iter().map(|o| o.label.as_str()).collect();
        labels.sort_unstable();
        if let Some(pair) = labels.windows(2).find(|w| w[0] == w[1]) {
            return Err(Failure::InvalidArguments(format!(
                "options: the label '{}' is given twice; labels must be unique",
                pair[0]
            )));
        }
    }
    let multi_select = options.is_some() && args.get("multi_select").and_then(Value::as_bool).unwrap_or(false);
    Ok(Question {
        call_id: call_id.to_owned(),
        question: args.get("question").and_then(Value::as_str).unwrap_or_default().to_owned(),
        options,
        multi_select,
    })
}
