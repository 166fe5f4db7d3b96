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
}
