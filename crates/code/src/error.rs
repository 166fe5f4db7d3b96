//! Why code mode could not be set up. A program's own failures are tool
//! results, never these.

/// Why the engine or the `run_code` tool could not be made.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum CodeModeError {
    /// The engine component did not compile or link.
    #[error("the code-mode engine did not load: {reason}")]
    Engine {
        /// Wasmtime's reason.
        reason: String,
    },
    /// The tools' TypeScript declarations are over [`crate::CodeLimits::max_declaration_chars`].
    #[error("the TypeScript declarations of the {tools} tools are {chars} characters; the limit is {limit}")]
    DeclarationsTooLong {
        /// How many tools were declared.
        tools: usize,
        /// Their size.
        chars: usize,
        /// The limit.
        limit: usize,
    },
    /// The tool could not be built (a limit out of range).
    #[error("the run_code tool: {0}")]
    Tool(#[from] lovia_host::InvalidTool),
}
