//! [`DynamicTools`]: a source whose tool list may change during a run (an
//! MCP server's). The runner asks it between turns and rebuilds the run's
//! tool table when the list changed (docs/semantics.md §20).

use super::{Tool, ToolSource};
use crate::call::BoxFuture;

/// Tools whose list may change between turns.
pub trait DynamicTools: Send + Sync + std::fmt::Debug {
    /// The source the name-conflict message names.
    fn source(&self) -> ToolSource;
    /// The tools as last listed.
    fn tools(&self) -> Vec<Tool>;
    /// Brings the list up to date; true when it changed since the last call.
    /// Called before each model turn; a failure keeps the old list.
    fn refresh(&self) -> BoxFuture<'_, bool>;
}
