//! lovia-confine: kernel confinement of a child process, for the shell that
//! a model drives and for MCP servers started as commands.
//!
//! [`Confinement::apply`] installs on a command, before it is spawned:
//!
//! - a **Landlock** ruleset (ABI 6, enforced in full or refused): the system
//!   directories read-only, the paths granted read-only or read-write,
//!   nothing else; TCP bind and connect denied unless the network is
//!   granted; signals and abstract unix sockets scoped to the child's own
//!   tree;
//! - a **seccomp** filter: no socket family but unix without the network
//!   (UDP and raw sockets need no `connect`, so Landlock alone would let them
//!   out), and none of the privileged calls a root child would otherwise
//!   keep (modules, mounts, namespaces, clocks, raising its rlimits, …);
//! - **rlimits** on CPU seconds, address space, file size and open files,
//!   and a **pids cgroup** of its own for the process count (rlimits cannot
//!   bound a root fork bomb);
//! - a **new session and process group**, so [`kill_group`] ends the child
//!   and every process it started.
//!
//! Everything that allocates is done in the parent; between fork and exec
//! the child only makes system calls. The promises, and what is not
//! promised, are in docs/confinement.md.

mod cgroup;
mod child;
mod confinement;
mod error;
mod kill;
mod limits;
mod prepared;
mod privileges;
mod ruleset;
mod seccomp;
mod supervisor;
mod view;

/// docs/confinement.md, whose Rust snippet rustdoc compiles as a doctest
/// of this crate, so that it cannot drift from the API.
#[cfg(doctest)]
#[doc = include_str!("../../../docs/confinement.md")]
mod confinement_doc {}

pub use cgroup::ProcessLimit;
pub use confinement::Confinement;
pub use error::ConfineError;
pub use kill::kill_group;
pub use limits::Limits;
pub use prepared::Prepared;
