//! lovia-confine: kernel confinement of a child process, for the shell that
//! a model drives, for MCP servers started as commands and for the import
//! `lovia build` runs. A confined process that is root inside holds no
//! power outside.
//!
//! [`Confinement::apply`] installs on a command, before it is spawned:
//!
//! - **namespaces of its own** (mount, IPC, PID) and a **view** of the file
//!   system holding only the system directories (read-only) and its grants,
//!   every mount `nosuid` and `nodev`;
//! - a **Landlock** ruleset (ABI 6, enforced in full or refused): the system
//!   directories read-only, the paths granted read-only or read-write,
//!   nothing else; TCP bind and connect denied unless the network is
//!   granted; signals and abstract unix sockets scoped to the child's own
//!   tree;
//! - **no capability**: all five sets empty, the secure bits locked;
//! - a **seccomp** filter: no socket family but unix without the network,
//!   no namespace by any call, no set-id mode bits, and none of the
//!   privileged calls (modules, mounts, clocks, raising its rlimits, …);
//! - **rlimits** on CPU seconds, address space, file size and open files,
//!   and a **pids cgroup** of its own for the process count (rlimits cannot
//!   bound a root fork bomb);
//! - a **new session and process group**, so [`kill_group`] ends the child
//!   and every process it started, and a **supervisor** that kills it when
//!   the host dies.
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
mod temp;
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
pub use temp::{temp_dir, temp_dir_in};
