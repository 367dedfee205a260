//! Explanations: one [`TickRecord`] per tick, kept in a bounded [`TickHistory`].
//!
//! ```
//! use shepherd_adaptive::record::TickHistory;
//!
//! let history = TickHistory::new(2);
//! assert!(history.latest().is_none());
//! assert_eq!(history.capacity(), 2);
//! assert_eq!(serde_json::to_string(&history).unwrap(), "[]");
//! ```

use std::collections::VecDeque;

use serde::{Serialize, Serializer};

use crate::detector::Reading;
use crate::mode::Mode;
use crate::sample::EndpointSample;

/// What one tick saw, decided, and why.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct TickRecord {
    /// Index of the tick (0 for the first).
    pub tick: u64,
    /// When it ran, in nanoseconds since the clock's origin.
    pub at_nanos: u64,
    /// The inputs, per endpoint.
    pub endpoints: Vec<EndpointSample>,
    /// The detector's reading: nCVs and the raw signal.
    pub reading: Reading,
    /// Whether the tick held the previous state (every endpoint stale).
    pub held: bool,
    /// r, the smoothed signal after this tick.
    pub smoothed: f64,
    /// The mode before this tick.
    pub previous_mode: Mode,
    /// The mode after this tick.
    pub mode: Mode,
    /// The Distribution share of the budget after this tick.
    pub distribution_share: f64,
    /// The weights after this tick, in the profile's scorer order.
    pub weights: Vec<f64>,
    /// Whether the weights differ from the previous tick's.
    pub weights_changed: bool,
    /// Why the weights are what they are (and what changed, if anything).
    pub reason: String,
}

impl TickRecord {
    /// Whether this tick switched modes.
    pub fn mode_changed(&self) -> bool {
        self.mode != self.previous_mode
    }

    /// The raw signal, when there was one.
    pub fn signal(&self) -> Option<f64> {
        self.reading.signal
    }
}

/// A bounded ring of the most recent [`TickRecord`]s, oldest first. Serializes as a list.
#[derive(Debug, Clone, PartialEq)]
pub struct TickHistory {
    capacity: usize,
    records: VecDeque<TickRecord>,
}

impl TickHistory {
    /// An empty ring keeping at most `capacity` records (at least 1).
    pub fn new(capacity: usize) -> Self {
        let capacity = capacity.max(1);
        TickHistory {
            capacity,
            records: VecDeque::with_capacity(capacity.min(4096)),
        }
    }

    /// Appends a record, dropping the oldest when full.
    pub fn push(&mut self, record: TickRecord) {
        if self.records.len() == self.capacity {
            self.records.pop_front();
        }
        self.records.push_back(record);
    }

    /// The newest record.
    pub fn latest(&self) -> Option<&TickRecord> {
        self.records.back()
    }

    /// The records, oldest first.
    pub fn iter(&self) -> impl DoubleEndedIterator<Item = &TickRecord> + ExactSizeIterator {
        self.records.iter()
    }

    /// Records kept.
    pub fn len(&self) -> usize {
        self.records.len()
    }

    /// Whether no record is kept.
    pub fn is_empty(&self) -> bool {
        self.records.is_empty()
    }

    /// Most records kept.
    pub fn capacity(&self) -> usize {
        self.capacity
    }
}

impl Serialize for TickHistory {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.collect_seq(self.records.iter())
    }
}

impl<'a> IntoIterator for &'a TickHistory {
    type Item = &'a TickRecord;
    type IntoIter = std::collections::vec_deque::Iter<'a, TickRecord>;
    fn into_iter(self) -> Self::IntoIter {
        self.records.iter()
    }
}
