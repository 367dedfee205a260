//! Several active picker replicas sharing their in-flight load (the `replicas` section).
//!
//! Each replica counts exactly the requests it sent; the others' are invisible to it, so with
//! R replicas each sees about 1/R of every server's load from Shepherd's own counts. With a
//! `replicas` section each replica sends its per-endpoint counts (requests, prompt tokens,
//! pending prefill tokens) to every peer every interval over UDP ([`wire`]: small, idempotent
//! datagrams, only from configured peer addresses), and stores the sum of the peers' last
//! reports on its endpoints
//! ([`Endpoint::set_peer_load`](shepherd_scheduler_core::endpoint::Endpoint::set_peer_load)),
//! which the load-aware scorers, the adaptive controller and the concurrency detector read
//! with their own counts. Nothing waits on the exchange: a pick reads atomics. A lost
//! datagram costs one interval; a peer silent for the expiry is forgotten; a restarted peer
//! draws a new id, and its previous self expires; a replica shutting down sends an empty
//! report so its load vanishes at once. `docs/replicas.md` has the deployment side.

mod exchange;
mod stats;
mod table;
pub mod wire;

pub(crate) use exchange::LoadExchange;
pub use stats::ReplicaStats;
