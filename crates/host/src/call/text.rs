//! Every string the model can read that the host writes itself, in one place
//! (docs/semantics.md §5, §7, §13 and D8). Each one is pinned by a test in
//! `tests/all/outcomes.rs`; change one only together with the docs.

/// `n` with its digits grouped by commas, as the reference prints counts:
/// `1,234,567`.
///
/// ```
/// assert_eq!(lovia_host::call::text::thousands(5_242_880), "5,242,880");
/// ```
pub fn thousands(n: u64) -> String {
    let digits = n.to_string();
    let mut out = String::with_capacity(digits.len() + digits.len() / 3);
    for (i, c) in digits.chars().enumerate() {
        if i > 0 && (digits.len() - i).is_multiple_of(3) {
            out.push(',');
        }
        out.push(c);
    }
    out
}

/// The prefix of every execution error: `Tool error: <detail>`.
pub const TOOL_ERROR_PREFIX: &str = "Tool error: ";

/// `Tool error: <detail>`.
pub fn tool_error(detail: impl std::fmt::Display) -> String {
    format!("{TOOL_ERROR_PREFIX}{detail}")
}

/// A call of a tool the toolset does not have.
pub fn unknown_tool(name: &str) -> String {
    format!("Tool '{name}' is not available.")
}

/// A second handoff in one turn.
pub fn handoff_not_performed(target: &str) -> String {
    format!(
        "Handoff not performed: this turn already transferred to '{target}'. Only the first handoff in a turn takes effect."
    )
}

/// Arguments that do not parse in a reply cut off at the token limit.
pub fn incomplete_arguments(name: &str) -> String {
    format!(
        "Tool {name} arguments are incomplete: the response was cut off at the output token limit (finish_reason=length) mid-call."
    )
}

/// A tool that calls tools (code mode's `run_code`), called from inside one.
pub fn nested_not_callable(name: &str) -> String {
    format!("Tool {name} cannot be called from inside a program.")
}

/// A resumed program whose call `id` of `tool` asks for something other
/// than what the journal holds under its id (tool `before`, or other arguments).
pub fn journal_mismatch(id: &str, tool: &str, before: &str) -> String {
    let what =
        if tool == before { format!("{before} with other arguments") } else { format!("{before} before, {tool} now") };
    format!(
        "This program was resumed after its host stopped, and its call {id} is not the one it made before ({what}). The program was stopped rather than act on a different history; the calls it made before are not made again."
    )
}

/// A call of a program that is being stopped because of its journal (a
/// resumed call differed from the journal's, or the journal is full): none acts.
pub fn journal_diverged(id: &str) -> String {
    format!("This program is being stopped (see its other calls' errors); its call {id} was not made.")
}

/// A program stopped because its run's journal would pass `limit` bytes.
pub fn journal_full(limit: usize) -> String {
    format!(
        "This program was stopped: the results of its calls passed {} bytes, the most a run keeps so that a resumed program does not repeat its calls.",
        thousands(limit as u64)
    )
}

/// A call the approver denied.
pub fn not_approved(name: &str) -> String {
    format!("Tool {name} was not approved.")
}

/// A call whose approval check itself failed (denied, fail closed).
pub fn approval_check_failed(name: &str) -> String {
    format!("Tool {name} was not approved (approval check failed).")
}

/// A renderer that failed on a successful result.
pub fn rendering_failed(message: &str) -> String {
    tool_error(format_args!("result rendering failed: {message}"))
}

/// The answer to a call that a cancelled run never finished (D8).
pub const RUN_CANCELLED: &str = "Tool error: run cancelled";

/// The answer to a call left unrun when the run's budget tripped (D8).
pub const NOT_RUN_BUDGET: &str = "Tool error: not run: budget exceeded";
