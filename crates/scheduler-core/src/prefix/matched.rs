//! The outcome of a lookup: how many leading blocks each endpoint holds.

use crate::endpoint::EndpointId;

/// How many leading blocks of one request each endpoint is believed to hold.
///
/// Reusable: [`PrefixIndex::match_into`](super::PrefixIndex::match_into) clears and refills it,
/// keeping its allocations.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct PrefixMatch {
    pub(super) total: usize,
    /// Endpoints holding at least the first block, sorted by id.
    pub(super) matched: Vec<(EndpointId, usize)>,
    /// Walk scratch: tags still matching.
    pub(super) active: Vec<u32>,
}

impl PrefixMatch {
    /// An empty match.
    pub fn new() -> Self {
        PrefixMatch::default()
    }

    pub(super) fn reset(&mut self, total: usize) {
        self.total = total;
        self.matched.clear();
        self.active.clear();
    }

    /// Sets the match to `total` blocks of which each `(endpoint, blocks)` of `matched` holds
    /// the given leading blocks (for a producer that decides matches itself, such as
    /// `burst-prefix-cache-producer`); entries are sorted by endpoint, and counts capped at
    /// `total`.
    ///
    /// ```
    /// use shepherd_scheduler_core::endpoint::EndpointId;
    /// use shepherd_scheduler_core::prefix::PrefixMatch;
    ///
    /// let mut found = PrefixMatch::new();
    /// found.set(16, [(EndpointId(3), 16)]);
    /// assert_eq!(found.matched_blocks(EndpointId(3)), 16);
    /// assert_eq!(found.score(EndpointId(2)), 0.0);
    /// ```
    pub fn set(&mut self, total: usize, matched: impl IntoIterator<Item = (EndpointId, usize)>) {
        self.reset(total);
        self.matched.extend(
            matched
                .into_iter()
                .filter(|(_, blocks)| *blocks > 0)
                .map(|(id, blocks)| (id, blocks.min(total))),
        );
        self.matched.sort_unstable_by_key(|m| m.0);
        self.matched.dedup_by_key(|m| m.0);
    }

    /// Blocks in the request (the denominator of every score).
    pub fn total_blocks(&self) -> usize {
        self.total
    }

    /// Endpoints holding at least the first block, with their matched block counts, by id.
    pub fn matches(&self) -> &[(EndpointId, usize)] {
        &self.matched
    }

    /// Leading blocks of the request that `endpoint` holds.
    pub fn matched_blocks(&self, endpoint: EndpointId) -> usize {
        self.matched
            .binary_search_by_key(&endpoint, |m| m.0)
            .map_or(0, |i| self.matched[i].1)
    }

    /// The longest match over all endpoints.
    pub fn longest(&self) -> usize {
        self.matched.iter().map(|m| m.1).max().unwrap_or(0)
    }

    /// `matched / total` for `endpoint`, in `[0, 1]` (0 when the request has no full block).
    pub fn score(&self, endpoint: EndpointId) -> f64 {
        if self.total == 0 {
            0.0
        } else {
            self.matched_blocks(endpoint) as f64 / self.total as f64
        }
    }
}
