//! [`CachedPrefix`]: what an affinity scorer believes each candidate already caches of this
//! request's prompt, handed to the rest of the cycle.
//!
//! An affinity scorer (the prefix-cache scorer) publishes, during its `score` step, how many
//! of the request's prompt tokens each candidate probably holds in its KV cache. Two readers
//! use it:
//!
//! - the [`Scheduler`](crate::scheduler::Scheduler), which counts the picked endpoint's
//!   *pending prefill* (`prompt tokens − cached tokens`) in the request's
//!   [`InFlightGuard`](crate::endpoint::InFlightGuard);
//! - load scorers listed after the publisher (the prefill-load scorer), which add this
//!   request's uncached tokens to each candidate's pending prefill.
//!
//! When nobody published, every prompt token counts as uncached.
//!
//! ```
//! use shepherd_scheduler_core::endpoint::EndpointId;
//! use shepherd_scheduler_core::plugin::{CachedPrefix, Extensions};
//!
//! let mut extensions = Extensions::default();
//! assert_eq!(CachedPrefix::uncached_tokens_in(&extensions, EndpointId(1), 1000), 1000);
//!
//! CachedPrefix::publish(&mut extensions, [(EndpointId(1), 768), (EndpointId(2), 0)]);
//! assert_eq!(CachedPrefix::uncached_tokens_in(&extensions, EndpointId(1), 1000), 232);
//! assert_eq!(CachedPrefix::uncached_tokens_in(&extensions, EndpointId(2), 1000), 1000);
//! // An estimate larger than the prompt is capped: at least nothing is left to prefill.
//! assert_eq!(CachedPrefix::uncached_tokens_in(&extensions, EndpointId(1), 500), 0);
//! ```

use super::Extensions;
use crate::endpoint::EndpointId;

/// Estimated cached prompt tokens per candidate for the current request (a cycle
/// [`Extensions`] entry).
///
/// Endpoints without an entry are believed to cache nothing. When several scorers publish,
/// the largest estimate per endpoint wins.
#[derive(Debug, Clone, Default)]
pub struct CachedPrefix {
    /// `(endpoint, cached tokens)`, sorted by endpoint.
    entries: Vec<(EndpointId, u64)>,
    /// Bit `id mod 64` set for every endpoint with an entry: most candidates of a pick hold
    /// none of the prompt, and this answers them without searching `entries`.
    present: u64,
    /// The estimates again, indexed by endpoint id, for ids below [`DENSE_IDS`] (0: none),
    /// once a reader asked for them ([`CachedPrefix::indexed`]): a candidate's estimate in one
    /// read, whatever order candidates come in. Kept across cycles (only the recorded slots
    /// are zeroed), so a steady pick allocates nothing; a cycle no reader indexes pays nothing.
    dense: Vec<u64>,
    /// Whether `dense` holds this cycle's estimates.
    indexed: bool,
}

/// Endpoint ids below this are also indexed densely (ids are dense and reused, so this is a
/// pool size; 32 KiB of `u64`s at most).
const DENSE_IDS: usize = 4096;

impl PartialEq for CachedPrefix {
    fn eq(&self, other: &Self) -> bool {
        // `dense` repeats `entries`.
        self.entries == other.entries && self.present == other.present
    }
}

impl Eq for CachedPrefix {}

/// `endpoint`'s bit in [`CachedPrefix::present`].
#[inline]
fn bit(endpoint: EndpointId) -> u64 {
    1 << (endpoint.0 % 64)
}

impl CachedPrefix {
    /// Merges `estimates` (`(endpoint, cached prompt tokens)`) into the cycle's
    /// `CachedPrefix`, creating it if needed; for an endpoint already present the larger
    /// estimate is kept.
    pub fn publish(
        extensions: &mut Extensions,
        estimates: impl IntoIterator<Item = (EndpointId, u64)>,
    ) {
        let cached = extensions.get_or_insert_reused(CachedPrefix::default, CachedPrefix::clear);
        for (endpoint, tokens) in estimates {
            cached.record(endpoint, tokens);
        }
    }

    /// Forgets every estimate, keeping the allocation.
    pub fn clear(&mut self) {
        if std::mem::take(&mut self.indexed) {
            for (endpoint, _) in &self.entries {
                if let Some(slot) = self.dense.get_mut(endpoint.0 as usize) {
                    *slot = 0;
                }
            }
        }
        self.entries.clear();
        self.present = 0;
    }

    /// Records `tokens` cached on `endpoint`, keeping the larger of two estimates.
    pub fn record(&mut self, endpoint: EndpointId, tokens: u64) {
        self.present |= bit(endpoint);
        if self.indexed {
            self.index_one(endpoint, tokens);
        }
        // Publishers usually hand endpoints in ascending order: append without searching.
        if self.entries.last().is_none_or(|last| last.0 < endpoint) {
            self.entries.push((endpoint, tokens));
            return;
        }
        match self.entries.binary_search_by_key(&endpoint, |e| e.0) {
            Ok(i) => self.entries[i].1 = self.entries[i].1.max(tokens),
            Err(i) => self.entries.insert(i, (endpoint, tokens)),
        }
    }

    /// Indexes the estimates by endpoint id, so that [`cached_tokens`](Self::cached_tokens)
    /// answers each in one read instead of a search: for a reader asking about every
    /// candidate (a load scorer). Estimates recorded later this cycle are indexed too.
    pub fn indexed(&mut self) -> &Self {
        if !self.indexed {
            self.indexed = true;
            for i in 0..self.entries.len() {
                let (endpoint, tokens) = self.entries[i];
                self.index_one(endpoint, tokens);
            }
        }
        self
    }

    fn index_one(&mut self, endpoint: EndpointId, tokens: u64) {
        let id = endpoint.0 as usize;
        if id < DENSE_IDS {
            if self.dense.len() <= id {
                self.dense.resize(id + 1, 0);
            }
            self.dense[id] = self.dense[id].max(tokens);
        }
    }

    /// Estimated cached prompt tokens on `endpoint` (0 when unknown).
    #[inline]
    pub fn cached_tokens(&self, endpoint: EndpointId) -> u64 {
        if self.present & bit(endpoint) == 0 {
            return 0;
        }
        let id = endpoint.0 as usize;
        if self.indexed && id < DENSE_IDS {
            // An id past the dense table has no entry (indexing grows the table).
            return self.dense.get(id).copied().unwrap_or(0);
        }
        self.entries
            .binary_search_by_key(&endpoint, |e| e.0)
            .map_or(0, |i| self.entries[i].1)
    }

    /// Of a prompt of `prompt_tokens`, the tokens `endpoint` would still have to prefill.
    #[inline]
    pub fn uncached_tokens(&self, endpoint: EndpointId, prompt_tokens: u64) -> u64 {
        prompt_tokens.saturating_sub(self.cached_tokens(endpoint))
    }

    /// [`CachedPrefix::uncached_tokens`] from the cycle's extensions; every prompt token
    /// when nobody published an estimate.
    pub fn uncached_tokens_in(
        extensions: &Extensions,
        endpoint: EndpointId,
        prompt_tokens: u64,
    ) -> u64 {
        extensions.get::<CachedPrefix>().map_or(prompt_tokens, |c| {
            c.uncached_tokens(endpoint, prompt_tokens)
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_largest_estimate_wins() {
        let mut extensions = Extensions::default();
        CachedPrefix::publish(&mut extensions, [(EndpointId(3), 100), (EndpointId(1), 50)]);
        CachedPrefix::publish(&mut extensions, [(EndpointId(3), 20), (EndpointId(2), 70)]);
        let cached = extensions.get::<CachedPrefix>().unwrap();
        assert_eq!(cached.cached_tokens(EndpointId(1)), 50);
        assert_eq!(cached.cached_tokens(EndpointId(2)), 70);
        assert_eq!(cached.cached_tokens(EndpointId(3)), 100);
        assert_eq!(cached.cached_tokens(EndpointId(4)), 0);
    }

    #[test]
    fn uncached_is_prompt_minus_cached_never_negative() {
        let mut cached = CachedPrefix::default();
        cached.record(EndpointId(0), 64);
        assert_eq!(cached.uncached_tokens(EndpointId(0), 100), 36);
        assert_eq!(cached.uncached_tokens(EndpointId(0), 10), 0);
        assert_eq!(cached.uncached_tokens(EndpointId(9), 10), 10);
    }

    proptest::proptest! {
        #[test]
        fn uncached_never_exceeds_the_prompt(
            estimates in proptest::collection::vec((0u32..8, proptest::num::u64::ANY), 0..20),
            prompt in proptest::num::u64::ANY,
            probe in 0u32..9,
        ) {
            // Ids 32 apart: every other one shares a presence bit (id mod 64) with another,
            // and the probe 256 shares one without an entry of its own.
            let estimates: Vec<(u32, u64)> = estimates.iter().map(|&(e, t)| (e * 32, t)).collect();
            let probe = probe * 32;
            let mut extensions = Extensions::default();
            CachedPrefix::publish(
                &mut extensions,
                estimates.iter().map(|&(e, t)| (EndpointId(e), t)),
            );
            let uncached = CachedPrefix::uncached_tokens_in(&extensions, EndpointId(probe), prompt);
            proptest::prop_assert!(uncached <= prompt);
            let best = estimates.iter().filter(|e| e.0 == probe).map(|e| e.1).max().unwrap_or(0);
            proptest::prop_assert_eq!(uncached, prompt.saturating_sub(best));
        }

        #[test]
        fn a_reused_table_answers_as_the_estimates_say(
            rounds in proptest::collection::vec(
                proptest::collection::vec((0u32..12, 0u64..1000), 0..20), 1..4),
        ) {
            // Ids 500 apart: some indexed densely, some (≥ 4096) only searched; each round
            // reuses the table after `clear`, as cycles do.
            let mut cached = CachedPrefix::default();
            for estimates in rounds {
                cached.clear();
                // Indexed before, midway or never (a cycle with no load scorer).
                let index_at = estimates.len() / 2;
                for (i, &(e, t)) in estimates.iter().enumerate() {
                    if i == index_at && e % 2 == 0 {
                        cached.indexed();
                    }
                    cached.record(EndpointId(e * 500), t);
                }
                if estimates.len() % 3 == 1 {
                    cached.indexed();
                }
                for probe in 0..13u32 {
                    let best = estimates.iter().filter(|e| e.0 == probe).map(|e| e.1).max();
                    proptest::prop_assert_eq!(
                        cached.cached_tokens(EndpointId(probe * 500)),
                        best.unwrap_or(0)
                    );
                }
            }
        }
    }
}
