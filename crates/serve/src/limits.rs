//! The service-wide bounds and timings of the config, in the units the
//! handlers use, with the config's floors applied once here.

use crate::{ConnectionLimits, ServeConfig};
use std::time::Duration;

/// The service-wide bounds and timings (each one's default is in
/// [`ServeConfig`]).
pub(crate) struct ServiceLimits {
    /// How long an approval waits for its decision (`approval_timeout_secs`).
    pub(crate) approval_timeout: Duration,
    /// How long an `ask_human` question waits for its answer (`question_timeout_secs`, at least 1 s).
    pub(crate) question_timeout: Duration,
    /// Silence on an SSE stream before a keep-alive comment (`sse_keep_alive_secs`, at least 1 s).
    pub(crate) sse_keep_alive: Duration,
    /// The largest upload (`max_plugin_bytes`).
    pub(crate) max_plugin_bytes: usize,
    /// How long a request body may take to arrive (`body_read_timeout_secs`, at least 1 s).
    pub(crate) body_read_timeout: Duration,
    /// The listener's bounds (`max_connections` and the rest).
    pub(crate) connections: ConnectionLimits,
    /// How often a shared store is read again for others' changes (`poll_interval_ms`).
    pub(crate) poll_interval: Duration,
    /// How long a run's lease lasts after its last renewal (`run_lease_ms`).
    pub(crate) lease: Duration,
    /// How often this replica renews its leases (`lease_renew_ms`).
    pub(crate) lease_renew: Duration,
}

impl ServiceLimits {
    pub(crate) fn from_config(config: &ServeConfig) -> Self {
        let secs = |s: u64| Duration::from_secs(s.max(1));
        let millis = |ms: u64| Duration::from_millis(ms.max(1));
        Self {
            approval_timeout: Duration::from_secs(config.approval_timeout_secs),
            question_timeout: secs(config.question_timeout_secs),
            sse_keep_alive: secs(config.sse_keep_alive_secs),
            max_plugin_bytes: config.max_plugin_bytes,
            body_read_timeout: secs(config.body_read_timeout_secs),
            connections: ConnectionLimits {
                max_connections: config.max_connections,
                max_connections_per_ip: config.max_connections_per_ip,
                max_connections_per_ipv6_48: config.max_connections_per_ipv6_48,
                idle_timeout: secs(config.idle_connection_secs),
                first_byte_timeout: secs(config.first_byte_secs),
                head_timeout: secs(config.request_head_secs),
                authenticated_reserve_percent: config.authenticated_connections_percent,
            },
            poll_interval: millis(config.poll_interval_ms),
            lease: Duration::from_millis(config.run_lease_ms),
            lease_renew: millis(config.lease_renew_ms),
        }
    }
}
