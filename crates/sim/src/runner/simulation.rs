//! The simulator's own settings for a policy: the `simulation` section of its config.
//!
//! | setting | default | meaning |
//! |---|---|---|
//! | `kvEventDelayMs` | 1 | from an engine step's end to its KV-cache events being applied by the router's precise indexes (policies with a precise producer) |
//! | `replicaLoadSyncMs` | — (off) | picker replicas exchange their in-flight counts this often: each replica's endpoints then carry the others' counts as of the last exchange ([`Endpoint::set_peer_load`]); only with several replicas. 0: before every pick (a bound no network exchange reaches) |
//! | `replicaIndexSync` | `false` | with `replicaLoadSyncMs`: each pick's approximate-index insert (the request's block keys on the picked server) also reaches the other replicas, one period later |
//! | `replicaMediumDelayUs` | 0 | with `replicaLoadSyncMs`: what the medium adds to every exchange, in microseconds (a load snapshot reaches the others this much after it is taken, a delta this much after its period): 0 for the direct exchange's datagrams, a Redis stream's write-to-read delivery for the Redis medium |
//!
//! [`Endpoint::set_peer_load`]: shepherd_scheduler_core::endpoint::Endpoint::set_peer_load

use shepherd_scheduler_core::config::EndpointPickerConfig;

use super::NS;
use crate::error::SimError;

pub use crate::policy::SIMULATION_SECTION;

/// Default time from an engine step's end to its events being applied by the router: 1 ms
/// (a ZeroMQ message over the data-center network and its decoding).
pub const DEFAULT_KV_EVENT_DELAY_MS: f64 = 1.0;

/// A policy's `simulation` settings, in nanoseconds.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) struct SimulationSettings {
    pub(super) kv_event_delay_ns: u64,
    pub(super) replica_load_sync_ns: Option<u64>,
    pub(super) replica_index_sync: bool,
    pub(super) replica_medium_delay_ns: u64,
}

impl SimulationSettings {
    /// The settings of `config` (the defaults without a section), or why they are invalid.
    pub(super) fn from_config(
        policy: &str,
        config: &EndpointPickerConfig,
    ) -> Result<Self, SimError> {
        let mut settings = SimulationSettings {
            kv_event_delay_ns: ms_to_ns(DEFAULT_KV_EVENT_DELAY_MS),
            replica_load_sync_ns: None,
            replica_index_sync: false,
            replica_medium_delay_ns: 0,
        };
        let Some(section) = config.other.get(SIMULATION_SECTION) else {
            return Ok(settings);
        };
        let bad = |field: &str, reason: &str| SimError::Input {
            file: format!("<policy {policy}>"),
            line: 0,
            field: format!("{SIMULATION_SECTION}.{field}"),
            reason: reason.into(),
        };
        let object = section
            .as_object()
            .ok_or_else(|| bad("", "the section must be a map"))?;
        for (key, value) in object {
            let ms = |positive: bool| {
                value
                    .as_f64()
                    .filter(|v| v.is_finite() && (*v > 0.0 || (!positive && *v == 0.0)))
                    .map(ms_to_ns)
                    .ok_or_else(|| {
                        bad(
                            key,
                            if positive {
                                "must be a number of milliseconds above 0"
                            } else {
                                "must be a number of milliseconds, at least 0"
                            },
                        )
                    })
            };
            match key.as_str() {
                "kvEventDelayMs" => settings.kv_event_delay_ns = ms(false)?,
                "replicaLoadSyncMs" => settings.replica_load_sync_ns = Some(ms(false)?),
                "replicaMediumDelayUs" => {
                    settings.replica_medium_delay_ns = value
                        .as_f64()
                        .filter(|v| v.is_finite() && *v >= 0.0)
                        .map(|us| (us * 1e3).round() as u64)
                        .ok_or_else(|| bad(key, "must be a number of microseconds, at least 0"))?;
                }
                "replicaIndexSync" => {
                    settings.replica_index_sync = value
                        .as_bool()
                        .ok_or_else(|| bad(key, "must be true or false"))?;
                }
                other => return Err(bad(other, "unknown setting")),
            }
        }
        Ok(settings)
    }
}

fn ms_to_ns(ms: f64) -> u64 {
    (ms * NS / 1e3).round() as u64
}
