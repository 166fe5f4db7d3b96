//! The call vocabulary every layer shares: the call's context, the tool's
//! spec, what a call returns, how it failed, and the strings the model reads.
//! A leaf: it depends on no other module of the crate.

mod cancel;
mod context;
mod kind;
mod outcome;
mod output;
mod render;
mod spec;
pub mod text;
mod truncate;

pub use cancel::CancelToken;
pub use context::{CallContext, ProgressSink};
pub use kind::ErrorKind;
pub use outcome::{CallOutcome, Failure};
pub use output::{BoxFuture, ToolOutput};
pub use render::{Rendered, Renderer, render_default, render_json};
pub use spec::{ApprovalMode, ToolHints, ToolSpec, is_valid_name};
pub use truncate::{DEFAULT_MAX_OUTPUT_CHARS, truncate};
