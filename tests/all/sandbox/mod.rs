//! The sandbox: limits, grants, the store, and plugins that attack the host.

mod grants;
mod hostile;
mod limits;
mod network;
mod store;
mod warm;
