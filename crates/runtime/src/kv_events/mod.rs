//! Subscriptions to the model servers' KV-cache events, for the precise prefix-cache
//! producers of the policy in force (`precise-prefix-cache-producer`,
//! `precise-prefix-cache-scorer`).
//!
//! For each such producer and each endpoint, a task subscribes (a ZeroMQ SUB over Shepherd's
//! own bounded ZMTP, [`crate::zmtp`]) to the endpoint's publisher — `tcp://<endpoint ip>:<socketPort>`, or the address
//! its `shepherd.dev/kv-events-endpoint` label names — and, when a replay socket is known,
//! asks it for what was missed. With `kvEventsConfig.zmqEndpoint`, Shepherd also binds a SUB
//! socket that servers connect to, each naming itself in its topic `kv@<ip[:port]>@<model>`.
//! Batches are decoded with the core's codec and applied to the producer's
//! [`PreciseIndex`](shepherd_scheduler_core::kv_events::PreciseIndex); an endpoint's entries
//! are dropped, counted and logged whenever they could be wrong: after a reconnection (then
//! rebuilt from the replay buffer), a gap that no replay filled, a publisher restart.
//! Subscriptions follow the endpoint set and config reloads.
//!
//! Every peer is bounded by the producer's `kvEventsConfig` limits
//! ([`KvEventLimits`]): a frame or message over
//! `maxMessageBytes` is refused at its header and the peer disconnected (counted, logged at
//! most every few seconds), a handshake must end within `handshakeTimeout`, the bound socket
//! takes at most `maxConnections` peers, and a replay answer over `maxReplayBytes` or
//! `maxReplayBatches` is abandoned. [`KvEventStats`] is exported on
//! `/metrics`; the index's own counters come with the producer's metrics. `docs/kv-events.md`
//! describes the whole path and what to configure on vLLM.

mod apply;
mod bound;
mod manager;
mod replay;
mod stats;
mod subscriber;

pub(crate) use manager::KvEventsManager;
pub use stats::KvEventStats;

use shepherd_scorers::producers::KvEventLimits;

/// The ZMTP connection bounds of `limits`.
fn zmtp_limits(limits: &KvEventLimits) -> crate::zmtp::Limits {
    crate::zmtp::Limits {
        max_message_bytes: limits.max_message_bytes,
        handshake_timeout: limits.handshake_timeout,
        ..crate::zmtp::Limits::default()
    }
}
