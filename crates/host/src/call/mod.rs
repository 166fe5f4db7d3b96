//! The call vocabulary every layer shares: the call's context, the tool's
//! spec, what a call returns, how it failed, and the strings the model reads.
//! A leaf: it depends on no other module of the crate.

mod cancel;
mod content;
mod context;
mod fence;
mod kind;
mod nested;
mod outcome;
mod output;
mod render;
mod spec;
pub mod text;
mod truncate;

pub use cancel::{CancelToken, FENCE_ENDED};
pub use content::{
    ContentPart, IMAGE_TYPES, LINK_SCHEMES, MAX_CONTENT_PARTS, MAX_LINK_NAME_BYTES, MAX_MIME_TYPE_BYTES, MAX_URI_BYTES,
    looks_like, render_parts,
};
pub use context::{CallContext, LogLevel, LogSink, ProgressSink};
pub use fence::{Fence, LeaseToken};
pub use kind::ErrorKind;
pub use nested::{NestedCalls, NestedResult, NestedStopped};
pub use outcome::{CallOutcome, Failure, is_valid_error_kind};
pub use output::{BoxFuture, ToolOutput};
pub use render::{Rendered, Renderer, render_default, render_json};
pub use spec::{ApprovalMode, MAX_TITLE_BYTES, ToolHints, ToolSpec, is_valid_name};
pub use truncate::{DEFAULT_MAX_OUTPUT_CHARS, truncate};
