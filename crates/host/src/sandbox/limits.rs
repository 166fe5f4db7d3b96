//! Limits of one call. Every limit has a default, and every default is finite.

use std::time::Duration;

/// Limits applied to every call's store.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CallLimits {
    /// Linear memory of the instance, in bytes. Default: 64 MiB. Growing past
    /// it traps, and the model sees `Tool error: out of memory (limit 64 MiB)`.
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
