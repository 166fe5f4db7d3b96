//! `ask_human` over MCP (docs/mcp.md, "Questions"): the question goes to the
//! client whose call asks it, as a form elicitation. On 2025-11-25 it is an
//! `elicitation/create` request in the middle of the call; on 2026-07-28 the
//! call answers `input_required`, and the retry brings the answer back with a
//! sealed request state bound to the call, as an approval does (approve.rs).
//!
//! The options are an enum the client shows as choices (titled with their
//! descriptions), a multi-select is an array of that enum, and a question
//! without options is one free-text field. What comes back is the client's
//! input: an answer outside the options is refused, never passed on.

use crate::approve::{Approval, StateRefused, States};
use lovia_host::call::BoxFuture;
use lovia_host::human::{HumanChannel, HumanError, MAX_ANSWER_CHARS, Question, ask_human};
use lovia_host::{CallContext, Tool};
use rmcp::model::{
    ElicitRequest, ElicitRequestParams, ElicitResult, ElicitationAction, ElicitationSchema, InputRequest,
    InputRequests, InputRequiredResult, InputResponses,
};
use rmcp::service::ServiceError;
use serde_json::{Value, json};
use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

/// The key of the question in an `input_required` result.
pub(crate) const QUESTION_KEY: &str = "question";

/// The field of the form that carries the answer.
const ANSWER_FIELD: &str = "answer";

/// How long a question waits for its answer unless set: 600 s, as in
/// `lovia serve`.
pub const DEFAULT_QUESTION_TIMEOUT: Duration = Duration::from_secs(600);

/// The questions of one MCP server: the `ask_human` tool it serves
/// ([`tool`](Self::tool)) asks the client of the call that asks. Give the
/// same value to [`McpOptions::questions`](crate::McpOptions::questions).
///
/// ```
/// use lovia_host::{ExecSettings, Executor, ToolSource, Toolset};
/// use lovia_mcp::{McpOptions, McpQuestions, McpServer};
/// # fn main() -> Result<(), Box<dyn std::error::Error>> {
/// let questions = McpQuestions::new();
/// let mut tools = Toolset::new();
/// tools.add(ToolSource::AgentTools, [questions.tool()])?;
/// let mut options = McpOptions::default();
/// options.questions = Some(questions);
/// let server = McpServer::with_options(Executor::new(tools, ExecSettings::default()), options)?;
/// assert_eq!(server.tools()[0].name, "ask_human");
/// # Ok(())
/// # }
/// ```
pub struct McpQuestions {
    timeout: Duration,
    /// The calls of `ask_human` running now, by call id, with how their
    /// client is asked.
    calls: Mutex<HashMap<String, Arc<QuestionCall>>>,
}

impl std::fmt::Debug for McpQuestions {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("McpQuestions").field("timeout", &self.timeout).finish_non_exhaustive()
    }
}

impl McpQuestions {
    /// Questions that wait [`DEFAULT_QUESTION_TIMEOUT`] for their answer.
    pub fn new() -> Arc<Self> {
        Self::with_timeout(DEFAULT_QUESTION_TIMEOUT)
    }

    /// Questions that wait `timeout` (on 2026-07-28, the life of the
    /// request state) for their answer.
    pub fn with_timeout(timeout: Duration) -> Arc<Self> {
        Arc::new(Self { timeout, calls: Mutex::new(HashMap::new()) })
    }

    /// The `ask_human` tool over these questions.
    pub fn tool(self: &Arc<Self>) -> Tool {
        ask_human(self.clone())
    }

    /// Registers a call before it runs; the guard removes it.
    pub(crate) fn register(self: &Arc<Self>, call_id: &str, call: Arc<QuestionCall>) -> Registered {
        self.calls.lock().unwrap_or_else(|p| p.into_inner()).insert(call_id.to_owned(), call);
        Registered { questions: self.clone(), call_id: call_id.to_owned() }
    }

    fn call(&self, call_id: &str) -> Option<Arc<QuestionCall>> {
        self.calls.lock().unwrap_or_else(|p| p.into_inner()).get(call_id).cloned()
    }
}

/// Removes a call's registration when the call ends, however it ends.
pub(crate) struct Registered {
    questions: Arc<McpQuestions>,
    call_id: String,
}

impl Drop for Registered {
    fn drop(&mut self) {
        self.questions.calls.lock().unwrap_or_else(|p| p.into_inner()).remove(&self.call_id);
    }
}

/// One `tools/call` of `ask_human`: how its client is asked, the exact call
/// a request state is bound to, and what this round answers instead of a
/// result.
pub(crate) struct QuestionCall {
    pub(crate) approval: Arc<Approval>,
    pub(crate) tool: String,
    pub(crate) arguments: String,
    pub(crate) outcome: Mutex<Option<RoundOutcome>>,
}

/// What a 2026-07-28 round answers instead of the tool's result.
pub(crate) enum RoundOutcome {
    /// The question, as `input_required`.
    Asked(InputRequiredResult),
    /// The client declared no form elicitation.
    NoElicitation,
    /// The request state it brought back does not open.
    State(StateRefused),
}

impl QuestionCall {
    fn set(&self, outcome: RoundOutcome) {
        *self.outcome.lock().unwrap_or_else(|p| p.into_inner()) = Some(outcome);
    }

    /// What this round answers instead of a result, if anything.
    pub(crate) fn take(&self) -> Option<RoundOutcome> {
        self.outcome.lock().unwrap_or_else(|p| p.into_inner()).take()
    }

    /// What a request state of this question binds: the tenant and the call
    /// exactly as it was made.
    fn binding(&self, states: &States) -> Vec<u8> {
        json!(["lovia-mcp question v1", states.tenant(), self.tool, self.arguments]).to_string().into_bytes()
    }
}

/// Why a question got no answer, as the model reads it.
const NO_FORM: &str = "the MCP client cannot show a question: it declared no form elicitation";
/// A program's question on 2026-07-28, where asking would run the program again.
const NESTED_ROUND_TRIP: &str =
    "a program cannot ask on this MCP revision (2026-07-28): call ask_human directly, outside run_code";
const DECLINED: &str = "the person declined to answer";
const DISMISSED: &str = "the person dismissed the question without answering";
const ASKED: &str = "the question went to the MCP client as input_required";

/// The form that asks `question`: the question is the message; the answer
/// is one field, an enum of the option labels (an array of them for a
/// multi-select) or free text.
pub(crate) fn form(question: &Question) -> ElicitRequestParams {
    let choices = |options: &[lovia_host::human::QuestionOption]| -> Vec<Value> {
        options
            .iter()
            .map(|o| {
                let title = if o.description.is_empty() {
                    o.label.clone()
                } else {
                    format!("{} — {}", o.label, o.description)
                };
                json!({"const": o.label, "title": title})
            })
            .collect()
    };
    let answer = match &question.options {
        None => json!({"type": "string", "title": "Your answer", "minLength": 1, "maxLength": MAX_ANSWER_CHARS}),
        Some(options) if question.multi_select => json!({
            "type": "array",
            "title": "Your choices",
            "minItems": 1,
            "maxItems": options.len(),
            "items": {"anyOf": choices(options)},
        }),
        Some(options) => json!({"type": "string", "title": "Your choice", "oneOf": choices(options)}),
    };
    let schema = json!({"type": "object", "properties": {ANSWER_FIELD: answer}, "required": [ANSWER_FIELD]});
    let requested_schema = match schema {
        Value::Object(object) => ElicitationSchema::from_json_schema(object).unwrap_or_else(|e| {
            // The shapes above are the spec's; a parse failure would be a bug
            // here, and an empty form still lets the person decline.
            tracing::error!(error = %e, "the question form does not parse");
            ElicitationSchema::new(Default::default())
        }),
        _ => ElicitationSchema::new(Default::default()),
    };
    ElicitRequestParams::FormElicitationParams { meta: None, message: question.question.clone(), requested_schema }
}

/// The answer text of the client's result: the chosen labels (one per line
/// for a multi-select) or the free text. An answer outside the options, or
/// of the wrong shape, is refused.
pub(crate) fn answer_of(question: &Question, result: &ElicitResult) -> Result<String, HumanError> {
    match result.action {
        ElicitationAction::Accept => {}
        ElicitationAction::Decline => return Err(HumanError::Cancelled(DECLINED.into())),
        _ => return Err(HumanError::Cancelled(DISMISSED.into())),
    }
    let given = result.content.as_ref().and_then(|c| c.get(ANSWER_FIELD));
    let bad = |what: String| HumanError::Cancelled(format!("the MCP client's answer was refused: {what}"));
    let Some(options) = &question.options else {
        return match given {
            Some(Value::String(text)) if !text.trim().is_empty() => Ok(text.chars().take(MAX_ANSWER_CHARS).collect()),
            _ => Err(bad("expected a non-empty text".into())),
        };
    };
    let known = |label: &str| options.iter().any(|o| o.label == label);
    let chosen: Vec<&str> = match given {
        Some(Value::String(label)) if !question.multi_select => vec![label.as_str()],
        Some(Value::Array(labels)) if question.multi_select => labels
            .iter()
            .map(|l| l.as_str().ok_or_else(|| bad("a choice is not a text".into())))
            .collect::<Result<_, _>>()?,
        _ => {
            let shape = if question.multi_select { "a list of options" } else { "one option" };
            return Err(bad(format!("expected {shape}")));
        }
    };
    if chosen.is_empty() {
        return Err(bad("no option chosen".into()));
    }
    if let Some(unknown) = chosen.iter().find(|l| !known(l)) {
        let unknown: String = unknown.chars().take(200).collect();
        return Err(bad(format!("'{unknown}' is not one of the options")));
    }
    // Each label once, in the options' order.
    Ok(options
        .iter()
        .filter(|o| chosen.contains(&o.label.as_str()))
        .map(|o| o.label.as_str())
        .collect::<Vec<_>>()
        .join("\n"))
}

impl HumanChannel for McpQuestions {
    fn ask<'a>(&'a self, question: &'a Question, ctx: &'a CallContext) -> BoxFuture<'a, Result<String, HumanError>> {
        Box::pin(async move {
            // A program's question (`<call>/<n>`) is asked through the call
            // that runs the program.
            let nested = ctx.call_id.contains('/');
            let registered = match ctx.call_id.split_once('/') {
                Some((parent, _)) => self.call(parent),
                None => self.call(&ctx.call_id),
            };
            let Some(call) = registered else {
                // Only a call through this server's tools/call is registered.
                return Err(HumanError::Closed);
            };
            match call.approval.as_ref() {
                // On 2026-07-28 asking means the client retries the whole
                // call, which would run the program again from its start.
                Approval::RoundTrip { .. } if nested => Err(HumanError::Cancelled(NESTED_ROUND_TRIP.into())),
                Approval::Elicit { able: false, .. } => Err(HumanError::Cancelled(NO_FORM.into())),
                Approval::Elicit { peer, task, .. } => {
                    let mut asking = form(question);
                    if let Some(task) = task {
                        task.relate(&mut asking);
                        task.input_required("waiting for the person's answer to a question").await;
                    }
                    // Withdrawn if the call is cancelled while the person is asked.
                    let answer = crate::elicit::elicit(peer, asking, self.timeout).await;
                    if let Some(task) = task {
                        task.working().await;
                    }
                    match answer {
                        Ok(result) => answer_of(question, &result),
                        Err(ServiceError::Timeout { .. }) => Err(HumanError::Cancelled(format!(
                            "no answer within {}s — continue without one",
                            self.timeout.as_secs()
                        ))),
                        Err(e) => {
                            tracing::warn!(error = %e, "question not answered");
                            Err(HumanError::Closed)
                        }
                    }
                }
                Approval::RoundTrip { able: false, retry: None, .. } => {
                    call.set(RoundOutcome::NoElicitation);
                    Err(HumanError::Cancelled(NO_FORM.into()))
                }
                Approval::RoundTrip { states, retry: None, .. } => {
                    let state = states.seal(&call.binding(states)).map_err(|e| {
                        tracing::warn!(error = %e, "cannot seal a question");
                        HumanError::Closed
                    })?;
                    let mut requests = InputRequests::new();
                    requests
                        .insert(QUESTION_KEY.to_owned(), InputRequest::Elicitation(ElicitRequest::new(form(question))));
                    call.set(RoundOutcome::Asked(InputRequiredResult::new(Some(requests), Some(state))));
                    // This round's result is replaced by input_required.
                    Err(HumanError::Cancelled(ASKED.into()))
                }
                Approval::RoundTrip { states, retry: Some((state, responses)), .. } => {
                    if let Err(e) = states.open(state, &call.binding(states)).await {
                        tracing::warn!("{e}; the question is not answered");
                        let reason = e.to_string();
                        call.set(RoundOutcome::State(e));
                        return Err(HumanError::Cancelled(reason));
                    }
                    match response(responses.as_ref()) {
                        Some(result) => answer_of(question, &result),
                        None => Err(HumanError::Cancelled(DISMISSED.into())),
                    }
                }
            }
        })
    }
}

/// The client's answer to the question in a retry's responses.
fn response(responses: Option<&InputResponses>) -> Option<ElicitResult> {
    responses.and_then(|r| r.get(QUESTION_KEY)).and_then(|v| serde_json::from_value(v.clone()).ok())
}

#[cfg(test)]
mod tests {
    use super::*;
    use lovia_host::human::QuestionOption;

    fn question(options: Option<&[(&str, &str)]>, multi_select: bool) -> Question {
        let options: Option<Vec<QuestionOption>> = options.map(|o| {
            o.iter()
                .map(|(label, description)| {
                    serde_json::from_value::<QuestionOption>(json!({"label": label, "description": description}))
                        .unwrap_or_else(|e| panic!("option: {e}"))
                })
                .collect()
        });
        serde_json::from_value(json!({
            "call_id": "mcp_1", "question": "Which?", "options": options, "multi_select": multi_select
        }))
        .unwrap_or_else(|e| panic!("question: {e}"))
    }

    fn result(action: &str, answer: Value) -> ElicitResult {
        serde_json::from_value(json!({"action": action, "content": {"answer": answer}}))
            .unwrap_or_else(|e| panic!("result: {e}"))
    }

    #[test]
    fn the_form_is_an_enum_of_the_labels_or_one_text() {
        let single =
            serde_json::to_value(form(&question(Some(&[("Rust", "fast"), ("Go", "")]), false))).unwrap_or_default();
        assert_eq!(single["message"], "Which?");
        assert_eq!(
            single["requestedSchema"]["properties"]["answer"]["oneOf"],
            json!([{"const": "Rust", "title": "Rust — fast"}, {"const": "Go", "title": "Go"}])
        );
        let multi = serde_json::to_value(form(&question(Some(&[("a", ""), ("b", "")]), true))).unwrap_or_default();
        assert_eq!(multi["requestedSchema"]["properties"]["answer"]["type"], "array");
        assert_eq!(multi["requestedSchema"]["properties"]["answer"]["items"]["anyOf"][1]["const"], "b");
        let free = serde_json::to_value(form(&question(None, false))).unwrap_or_default();
        assert_eq!(free["requestedSchema"]["properties"]["answer"]["type"], "string");
        assert_eq!(free["requestedSchema"]["required"], json!(["answer"]));
    }

    #[test]
    fn only_answers_among_the_options_pass() {
        let q = question(Some(&[("a", ""), ("b", ""), ("c", "")]), true);
        assert_eq!(answer_of(&q, &result("accept", json!(["c", "a", "c"]))), Ok("a\nc".into()));
        assert_eq!(
            answer_of(&q, &result("accept", json!(["a", "rm -rf /"]))),
            Err(HumanError::Cancelled(
                "the MCP client's answer was refused: 'rm -rf /' is not one of the options".into()
            ))
        );
        assert!(answer_of(&q, &result("accept", json!("a"))).is_err(), "a multi-select answer is a list");
        let single = question(Some(&[("a", ""), ("b", "")]), false);
        assert_eq!(answer_of(&single, &result("accept", json!("b"))), Ok("b".into()));
        assert_eq!(answer_of(&single, &result("decline", Value::Null)), Err(HumanError::Cancelled(DECLINED.into())));
        assert_eq!(answer_of(&single, &result("cancel", Value::Null)), Err(HumanError::Cancelled(DISMISSED.into())));
        let free = question(None, false);
        assert_eq!(answer_of(&free, &result("accept", json!("blue"))), Ok("blue".into()));
        assert!(answer_of(&free, &result("accept", json!(" "))).is_err());
    }
}
