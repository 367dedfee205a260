//! Several active picker replicas sharing their in-flight load (the `replicas` section).
//!
//! Each replica counts exactly the requests it sent; the others' are invisible to it, so with
//! R replicas each sees about 1/R of every server's load from Shepherd's own counts. With a
//! `replicas` section each replica sends its per-endpoint counts (requests, prompt tokens,
//! pending prefill tokens) to every peer every interval over UDP ([`wire`]: small, idempotent
//! datagrams), and stores the sum of the peers' last reports on its endpoints
//! ([`Endpoint::set_peer_load`](shepherd_scheduler_core::endpoint::Endpoint::set_peer_load)),
//! which the load-aware scorers, the adaptive controller and the concurrency detector read
//! with their own counts. Nothing waits on the exchange: a pick reads atomics. A lost
//! datagram costs one interval; a peer silent for the expiry is forgotten; a restarted peer
//! starts a new epoch, which replaces its previous run at once; a replica shutting down sends
//! an empty report so its load vanishes at once.
//!
//! Every datagram is a [`frame`]: the sender (the address its peers list it under), its epoch
//! (when it started), a sequence number, the payload, and a MAC with the replicas' shared
//! [`key`]. The [`gate`] drops what does not come from a configured peer, does not fit, fails
//! the MAC, or is a replay (a [`window`] per configured peer), counting each reason; and only
//! endpoints of this replica's pool are taken from what passes. Every table is sized by the
//! configuration, never by what arrives. The peers are written out, or found on Kubernetes
//! (the replicas' own Ready pods by label selector, `maxPeers` at most).
//!
//! With an approximate prefix index (no KV events), each replica also sends the block keys its
//! picks recorded since the last interval ([`index_wire`], one datagram set per index, each
//! endpoint's keys once however often it was picked), and records its peers' in its own index:
//! every replica learns every replica's picks one interval late (`indexDeltas: false` turns it
//! off). `docs/replicas.md` has the deployment side.

#[cfg(feature = "runtime")]
mod discovered;
#[cfg(feature = "runtime")]
mod exchange;
pub mod frame;
pub mod gate;
#[cfg(feature = "runtime")]
mod index_sync;
pub mod index_wire;
pub mod key;
#[cfg(feature = "runtime")]
mod peer_slots;
#[cfg(feature = "redis")]
pub mod redis;
#[cfg(feature = "runtime")]
mod stats;
#[cfg(feature = "runtime")]
mod table;
pub mod window;
pub mod wire;

#[cfg(feature = "runtime")]
pub(crate) use discovered::DiscoveredPeers;
#[cfg(feature = "runtime")]
pub(crate) use exchange::LoadExchange;
#[cfg(feature = "runtime")]
pub(crate) use index_sync::IndexSync;
#[cfg(feature = "runtime")]
pub use stats::ReplicaStats;
