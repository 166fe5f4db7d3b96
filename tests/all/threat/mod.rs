//! The multi-tenant threat model (docs/security.md): each attack runs as
//! tenant A with a real hostile component or real HTTP, and tenant B's calls
//! keep answering, correctly and within a bound. One module per surface.

mod arguments;
mod instances;
mod logs;
mod mcp;
mod neighbour;
mod sandbox;
pub(crate) mod serve;
