//! Limits of one call. Every limit has a default, and every default is finite.

use std::time::Duration;
use wasmtime::{ResourceLimiter, StoreLimits, StoreLimitsBuilder};

/// Limits applied to every call's store.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct CallLimits {
    /// Linear memory of the instance, in bytes: the sum over all of its
    /// linear memories (a component may define several). Default: 64 MiB.
    /// Growing past it traps, and the model sees `Tool error: out of memory
    /// (limit 64 MiB)`.
    pub memory_bytes: usize,
    /// Wall-clock ceiling of one attempt, even when the tool declares no
    /// timeout. Default: 60 s.
    pub max_wall_clock: Duration,
    /// Bytes of the guest's stderr kept, the last ones written (panic
    /// messages come from here); earlier bytes are dropped. Default: 64 KiB.
    pub stderr_bytes: usize,
    /// Bytes of the guest's stdout kept, the last ones written; a guest may
    /// print any amount. Default: 64 KiB.
    pub stdout_bytes: usize,
    /// Progress messages and log lines accepted per call; later ones are
    /// dropped. Default: 1,000.
    pub events_per_call: u32,
    /// Bytes of one progress message or log line; longer ones are cut. Default: 4 KiB.
    pub event_bytes: usize,
    /// Bytes of a result crossing the boundary; a larger one is an error
    /// result, `result too large`. Default: 4 MiB.
    pub result_bytes: usize,
    /// Fuel (deterministic CPU) one call may burn: `CPU budget exhausted`
    /// past it. Default: none. Takes effect only on a host created with
    /// [`crate::HostConfig::fuel_metering`].
    pub fuel: Option<u64>,
}

crate::setters::setters!(CallLimits {
    with_memory_bytes => memory_bytes: usize,
    with_max_wall_clock => max_wall_clock: Duration,
    with_stderr_bytes => stderr_bytes: usize,
    with_stdout_bytes => stdout_bytes: usize,
    with_events_per_call => events_per_call: u32,
    with_event_bytes => event_bytes: usize,
    with_result_bytes => result_bytes: usize,
    with_fuel => fuel: Option<u64>,
});

impl Default for CallLimits {
    fn default() -> Self {
        Self {
            memory_bytes: 64 << 20,
            max_wall_clock: Duration::from_secs(60),
            stderr_bytes: 64 << 10,
            stdout_bytes: 64 << 10,
            events_per_call: 1_000,
            event_bytes: 4 << 10,
            result_bytes: 4 << 20,
            fuel: None,
        }
    }
}

impl CallLimits {
    /// The memory limit in MiB, as the model-facing message prints it.
    pub fn memory_mib(&self) -> usize {
        self.memory_bytes >> 20
    }
}

/// A memory would grow past the instance's limit.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
#[error("memory limit of the instance exceeded: {wanted} bytes in all its memories, the limit is {limit}")]
pub(crate) struct MemoryLimitExceeded {
    /// Bytes all linear memories of the instance would take together.
    pub(crate) wanted: usize,
    /// [`CallLimits::memory_bytes`].
    pub(crate) limit: usize,
}

/// The resource limiter of one store (one component instance): the memory
/// limit applies to the sum of its linear memories, not to each one, so a
/// component defining several memories cannot multiply it. Counts of
/// instances, tables and memories and table sizes are wasmtime's
/// `StoreLimits`.
pub(crate) struct InstanceLimiter {
    memory_limit: usize,
    /// Bytes of all the store's linear memories. Memories live as long as
    /// the store, so the sum never shrinks.
    memory_total: usize,
    /// True once a growth was refused without a trap: past the memory's own
    /// declared maximum (the guest saw -1), or allowed here but failed in the
    /// host. An allocator that then aborts has run out of memory.
    pub(crate) growth_refused: bool,
    others: StoreLimits,
}

impl InstanceLimiter {
    pub(crate) fn new(memory_limit: usize) -> Self {
        let others = StoreLimitsBuilder::new().trap_on_grow_failure(true).instances(16).tables(16).memories(4).build();
        Self { memory_limit, memory_total: 0, growth_refused: false, others }
    }

    /// Bytes of the store's linear memories now (they never shrink).
    pub(crate) fn memory_bytes(&self) -> usize {
        self.memory_total
    }
}

impl ResourceLimiter for InstanceLimiter {
    fn memory_growing(&mut self, current: usize, desired: usize, maximum: Option<usize>) -> wasmtime::Result<bool> {
        if maximum.is_some_and(|max| desired > max) {
            self.growth_refused = true;
            return Ok(false);
        }
        // `current` is already in the total (0 when the memory is created).
        let wanted = self.memory_total.saturating_sub(current).saturating_add(desired);
        if wanted > self.memory_limit {
            // Trap at once, as `trap_on_grow_failure` does: a guest whose
            // allocator saw -1 would abort with a less precise message.
            return Err(wasmtime::Error::new(MemoryLimitExceeded { wanted, limit: self.memory_limit }));
        }
        self.memory_total = wanted;
        Ok(true)
    }

    fn memory_grow_failed(&mut self, error: wasmtime::Error) -> wasmtime::Result<()> {
        // Allowed above, yet the host could not grow it: out of memory too.
        self.growth_refused = true;
        Err(error)
    }

    fn table_growing(&mut self, current: usize, desired: usize, maximum: Option<usize>) -> wasmtime::Result<bool> {
        self.others.table_growing(current, desired, maximum)
    }

    fn table_grow_failed(&mut self, error: wasmtime::Error) -> wasmtime::Result<()> {
        self.others.table_grow_failed(error)
    }

    fn instances(&self) -> usize {
        self.others.instances()
    }

    fn tables(&self) -> usize {
        self.others.tables()
    }

    fn memories(&self) -> usize {
        self.others.memories()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::call::{CallContext, Failure};
    use crate::sandbox::{Grants, SandboxState, StoreSpec, classify, new_store};
    use crate::{Host, HostConfig};
    use wasmtime::Store;
    use wasmtime::component::{Component, Linker};

    /// A component of two core instances, each defining its own memory of
    /// `pages` 64 KiB pages.
    fn two_memories(pages: u32) -> Vec<u8> {
        wat::parse_str(format!(
            r#"(component
                (core module $a (memory (export "m") {pages}))
                (core module $b (memory (export "m") {pages}))
                (core instance (instantiate $a))
                (core instance (instantiate $b)))"#
        ))
        .expect("valid WAT")
    }

    async fn instantiate_in_a_call_store(host: &Host, component: &Component) -> (wasmtime::Result<()>, Failure) {
        let (limits, grants) = (CallLimits::default(), Grants::default());
        let spec = StoreSpec {
            plugin: "two-memories".into(),
            digest: "".into(),
            guest_logs: &host.guest_logs,
            store_namespace: "two-memories".into(),
            tool: "none".into(),
            call: CallContext::default(),
            limits: &limits,
            timeout: None,
            fuel: None,
            grants: &grants,
            ticker: &host.sync_runtime.ticker,
            session_store: None,
            cpu: None,
        };
        let mut store = new_store(&host.engine, spec);
        match Linker::<SandboxState>::new(&host.engine).instantiate_async(&mut store, component).await {
            Ok(_) => (Ok(()), Failure::Trap("none".into())),
            Err(err) => {
                let failure = classify(&err, &store);
                (Err(err), failure)
            }
        }
    }

    #[tokio::test]
    async fn the_memory_limit_is_the_sum_over_all_memories_of_an_instance() {
        let host = Host::new(HostConfig { pool_slots: 2, ..HostConfig::default() }).expect("host");
        // 2 × 40 MiB: each memory is under the 64 MiB limit, their sum is not.
        let big = Component::new(&host.engine, two_memories(640)).expect("compile");
        let (result, failure) = instantiate_in_a_call_store(&host, &big).await;
        let err = result.expect_err("80 MiB in one instance");
        let want = "memory limit of the instance exceeded: 83886080 bytes in all its memories, the limit is 67108864";
        assert!(err.chain().any(|c| c.to_string() == want), "{err:?}");
        assert_eq!(failure, Failure::OutOfMemory { limit_mib: 64 }, "what the model reads");

        // A per-memory limit, what the sandbox had before, lets the same instance take 80 MiB.
        let mut per_memory = Store::new(&host.engine, StoreLimitsBuilder::new().memory_size(64 << 20).build());
        per_memory.limiter(|l| l);
        Linker::new(&host.engine).instantiate_async(&mut per_memory, &big).await.expect("each memory fits alone");

        // 2 × 30 MiB fits under the sum.
        let small = Component::new(&host.engine, two_memories(480)).expect("compile");
        let (result, _) = instantiate_in_a_call_store(&host, &small).await;
        result.expect("60 MiB in all fits");
    }

    #[test]
    fn growing_one_memory_counts_the_others() {
        let mut limiter = InstanceLimiter::new(100);
        assert!(limiter.memory_growing(0, 40, None).expect("first memory"));
        assert!(limiter.memory_growing(0, 40, None).expect("second memory"));
        assert!(limiter.memory_growing(40, 60, None).expect("80 → 100 in all"));
        let err = limiter.memory_growing(60, 61, None).expect_err("101 in all");
        assert_eq!(
            err.to_string(),
            "memory limit of the instance exceeded: 101 bytes in all its memories, the limit is 100"
        );
        assert!(!limiter.memory_growing(40, 50, Some(45)).expect("past the memory's own maximum"));
    }
}
