//! The load other picker replicas have in flight on an endpoint, as they last reported it.
//!
//! Several active pickers each count only the requests they sent ([`Endpoint::in_flight_requests`]),
//! so each sees a fraction of a server's load and load-aware scorers misjudge it. When the
//! replicas exchange their counts (the runtime's peer sync, or the simulator's), each stores
//! the sum of the others' on the endpoint with [`Endpoint::set_peer_load`], and the scorers
//! that balance load read [`Endpoint::total_in_flight_requests`] and its siblings: the
//! replica's own exact counts plus the peers' last report. Without peers the report is zero
//! and the totals are the replica's own counts.
//!
//! ```
//! use std::sync::Arc;
//! use shepherd_scheduler_core::endpoint::{PeerLoad, Pool};
//!
//! let pool = Pool::new();
//! let endpoint = pool.add("10.0.0.1:8000");
//! let _mine = endpoint.start_request(1_000);
//! endpoint.set_peer_load(PeerLoad { requests: 3, prompt_tokens: 9_000, prefill_tokens: 4_000 });
//! assert_eq!(endpoint.in_flight_requests(), 1); // this replica's own
//! assert_eq!(endpoint.total_in_flight_requests(), 4); // everyone's
//! assert_eq!(endpoint.total_pending_prefill_tokens(), 5_000);
//! ```

use std::sync::atomic::{AtomicU64, Ordering};

use super::Endpoint;

/// What the other replicas have in flight on one endpoint.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct PeerLoad {
    /// Requests in flight.
    pub requests: u64,
    /// Their prompt tokens.
    pub prompt_tokens: u64,
    /// Their uncached prompt tokens whose first token has not come back.
    pub prefill_tokens: u64,
}

/// The stored report.
#[derive(Debug, Default)]
pub(super) struct PeerCells {
    requests: AtomicU64,
    prompt_tokens: AtomicU64,
    prefill_tokens: AtomicU64,
}

impl Endpoint {
    /// Stores what the other replicas have in flight here (replacing the last report).
    pub fn set_peer_load(&self, load: PeerLoad) {
        self.peers.requests.store(load.requests, Ordering::Relaxed);
        self.peers
            .prompt_tokens
            .store(load.prompt_tokens, Ordering::Relaxed);
        self.peers
            .prefill_tokens
            .store(load.prefill_tokens, Ordering::Relaxed);
    }

    /// What the other replicas last reported in flight here (zero without peers).
    pub fn peer_load(&self) -> PeerLoad {
        PeerLoad {
            requests: self.peers.requests.load(Ordering::Relaxed),
            prompt_tokens: self.peers.prompt_tokens.load(Ordering::Relaxed),
            prefill_tokens: self.peers.prefill_tokens.load(Ordering::Relaxed),
        }
    }

    /// Requests in flight here from this replica and its peers.
    #[inline]
    pub fn total_in_flight_requests(&self) -> u64 {
        self.in_flight_requests()
            .saturating_add(self.peer_in_flight_requests())
    }

    /// Requests the other replicas last reported in flight here (zero without peers): with
    /// [`Endpoint::in_flight_requests`], [`Endpoint::total_in_flight_requests`] in two reads
    /// for a caller that needs both.
    #[inline]
    pub fn peer_in_flight_requests(&self) -> u64 {
        self.peers.requests.load(Ordering::Relaxed)
    }

    /// Prompt tokens in flight here from this replica and its peers.
    #[inline]
    pub fn total_in_flight_prompt_tokens(&self) -> u64 {
        self.in_flight_prompt_tokens()
            .saturating_add(self.peers.prompt_tokens.load(Ordering::Relaxed))
    }

    /// Pending prefill tokens here from this replica and its peers.
    #[inline]
    pub fn total_pending_prefill_tokens(&self) -> u64 {
        self.pending_prefill_tokens()
            .saturating_add(self.peers.prefill_tokens.load(Ordering::Relaxed))
    }
}
