//! What a successful tool call returns before rendering.

use serde_json::Value;
use std::future::Future;
use std::pin::Pin;

/// A boxed future, as trait objects return them.
pub type BoxFuture<'a, T> = Pin<Box<dyn Future<Output = T> + Send + 'a>>;

/// A successful result before rendering.
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
pub enum ToolOutput {
    /// Shown to the model verbatim.
    Text(String),
    /// Rendered by the tool's, the agent's or the default renderer.
    Json(Value),
    /// Content parts (contract 0.2): their own rendering. Renderers are
    /// bypassed; the model reads the projection and the parts travel on with
    /// the result (docs/semantics.md §11).
    Parts(Vec<super::ContentPart>),
}
