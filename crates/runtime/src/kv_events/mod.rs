//! Subscriptions to the model servers' KV-cache events, for the precise prefix-cache
//! producers of the policy in force (`precise-prefix-cache-producer`,
//! `precise-prefix-cache-scorer`).
//!
//! For each such producer and each endpoint, a task subscribes (ZeroMQ SUB, the `zeromq`
//! crate) to the endpoint's publisher — `tcp://<endpoint ip>:<socketPort>`, or the address
//! its `shepherd.dev/kv-events-endpoint` label names — and, when a replay socket is known,
//! asks it for what was missed. With `kvEventsConfig.zmqEndpoint`, Shepherd also binds a SUB
//! socket that servers connect to, each naming itself in its topic `kv@<ip[:port]>@<model>`.
//! Batches are decoded with the core's codec and applied to the producer's
//! [`PreciseIndex`](shepherd_scheduler_core::kv_events::PreciseIndex); an endpoint's entries
//! are dropped, counted and logged whenever they could be wrong: after a reconnection (then
//! rebuilt from the replay buffer), a gap that no replay filled, a publisher restart.
//! Subscriptions follow the endpoint set and config reloads. [`KvEventStats`] is exported on
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
