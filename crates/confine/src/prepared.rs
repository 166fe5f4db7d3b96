//! What `apply` hands back: the child's pids cgroup, kept until the child
//! and everything it started are gone.

use crate::cgroup::ChildCgroup;
use crate::{ConfineError, ProcessLimit};

/// The part of a confinement that outlives the spawn: the child's own pids
/// cgroup, if this machine has one (see [`Prepared::process_limit`]).
///
/// Keep it as long as the child runs. Dropping it never kills anything: it
/// removes the cgroup if it is empty, and otherwise leaves the removal to a
/// later [`crate::Confinement::apply`] of this process, once the cgroup has
/// emptied. The descriptors the child needs (the Landlock ruleset, the
/// cgroup's `cgroup.procs`) belong to the command itself, so dropping this
/// before the spawn does not weaken the confinement.
#[derive(Debug)]
pub struct Prepared {
    pub(crate) cgroup: Option<ChildCgroup>,
    pub(crate) process_limit: ProcessLimit,
}

impl Prepared {
    /// How the process limit is enforced for this child.
    pub fn process_limit(&self) -> &ProcessLimit {
        &self.process_limit
    }

    /// The pids in the child's cgroup now (the child and everything it
    /// started, also processes that left its process group), or `None`
    /// without a pids cgroup.
    pub fn processes(&self) -> Result<Option<Vec<u32>>, ConfineError> {
        self.cgroup.as_ref().map(ChildCgroup::processes).transpose()
    }

    /// How many times the child or a descendant failed to start a process
    /// because of the process limit, or `None` without a pids cgroup: a
    /// host can tell the model that a command ran into the limit.
    pub fn process_limit_hits(&self) -> Result<Option<u64>, ConfineError> {
        self.cgroup.as_ref().map(ChildCgroup::limit_hits).transpose()
    }

    /// Sends `SIGKILL` to every process in the child's cgroup, wherever it
    /// moved in the process tree or to which group; without a pids cgroup,
    /// does nothing (use [`crate::kill_group`]).
    pub fn kill_all(&self) -> Result<(), ConfineError> {
        match &self.cgroup {
            Some(cgroup) => cgroup.kill_all(),
            None => Ok(()),
        }
    }
}
