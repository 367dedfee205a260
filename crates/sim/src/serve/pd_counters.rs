//! The prefill/decode counters of one simulated server, which `/metrics` exposes as the
//! `shepherd_sim_*` families: what [`super::sidecar`] and `kv_transfer_params` did.

use std::sync::atomic::{AtomicU64, Ordering};

/// Prefill/decode counters of one server (`shepherd_sim_*` metrics).
#[derive(Debug, Default)]
pub(crate) struct PdCounters {
    /// Requests prefilled here for a remote decode (`do_remote_decode`).
    pub(crate) prefills_for_remote: AtomicU64,
    /// Requests decoded here from a remote prefill (`do_remote_prefill`).
    pub(crate) remote_prefills: AtomicU64,
    /// Prompt tokens whose KV was read from a remote prefill.
    pub(crate) transferred_tokens: AtomicU64,
    /// Requests whose remote prefill failed, served aggregated here.
    pub(crate) fallbacks: AtomicU64,
}

impl PdCounters {
    /// Adds `n` to `counter`.
    pub(crate) fn add(counter: &AtomicU64, n: u64) {
        counter.fetch_add(n, Ordering::Relaxed);
    }
}
