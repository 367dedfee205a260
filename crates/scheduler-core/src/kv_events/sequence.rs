//! Sequence numbers of one publisher's stream: in order, a gap, or a restart.
//!
//! vLLM numbers the batches of each publisher 0, 1, 2, ... and keeps the last ones for
//! replay. A subscriber that sees the numbers jump has lost batches (a slow-joiner drop, a
//! network blip, the publisher's high-water mark): it asks the replay socket for them, and if
//! they are gone its picture of the endpoint is wrong and must be dropped. A number going back
//! means the publisher restarted (a new engine, an empty cache). [`SequenceTracker`] tells
//! the three apart; what to do about each is the subscriber's business.
//!
//! ```
//! use shepherd_scheduler_core::kv_events::{SequenceTracker, SequenceVerdict};
//!
//! let mut seq = SequenceTracker::new();
//! assert_eq!(seq.observe(0), SequenceVerdict::First);
//! assert_eq!(seq.observe(1), SequenceVerdict::InOrder);
//! assert_eq!(seq.observe(4), SequenceVerdict::Gap { from: 2, to: 4 }); // 2 and 3 are missing
//! assert_eq!(seq.observe(5), SequenceVerdict::InOrder);
//! assert_eq!(seq.observe(0), SequenceVerdict::Restarted); // the publisher started over
//! assert_eq!(seq.expected(), Some(1));
//! ```

/// What one sequence number says about the stream. See the [module docs](self).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SequenceVerdict {
    /// The first number seen (since the tracker was made or [reset](SequenceTracker::reset)).
    First,
    /// The number expected next.
    InOrder,
    /// Batches `from..to` were missed; this one is `to`.
    Gap {
        /// The first missing number.
        from: u64,
        /// The number just seen (one past the last missing).
        to: u64,
    },
    /// The number went back: the publisher restarted.
    Restarted,
}

/// Tracks the sequence numbers of one publisher. See the [module docs](self).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct SequenceTracker {
    next: Option<u64>,
}

impl SequenceTracker {
    /// A tracker that has seen nothing.
    pub fn new() -> Self {
        SequenceTracker::default()
    }

    /// The number expected next, once one was seen.
    pub fn expected(&self) -> Option<u64> {
        self.next
    }

    /// Records `seq` and says how it relates to what came before.
    pub fn observe(&mut self, seq: u64) -> SequenceVerdict {
        let verdict = match self.next {
            None => SequenceVerdict::First,
            Some(next) if seq == next => SequenceVerdict::InOrder,
            Some(next) if seq > next => SequenceVerdict::Gap {
                from: next,
                to: seq,
            },
            Some(_) => SequenceVerdict::Restarted,
        };
        self.next = Some(seq.saturating_add(1));
        verdict
    }

    /// Sets the number expected next (after a replay filled everything before it).
    pub fn expect(&mut self, next: u64) {
        self.next = Some(next);
    }

    /// Forgets everything (the next number is [`First`](SequenceVerdict::First) again).
    pub fn reset(&mut self) {
        self.next = None;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_stream_with_losses_and_restarts_is_classified() {
        let mut t = SequenceTracker::new();
        let seen: Vec<SequenceVerdict> = [7, 8, 9, 12, 13, 3, 4, 4].map(|s| t.observe(s)).into();
        use SequenceVerdict::*;
        assert_eq!(
            seen,
            vec![
                First,
                InOrder,
                InOrder,
                Gap { from: 10, to: 12 },
                InOrder,
                Restarted,
                InOrder,
                Restarted
            ]
        );
        t.reset();
        assert_eq!(t.observe(100), First);
        t.expect(200);
        assert_eq!(t.observe(200), InOrder);
        assert_eq!(
            t.observe(u64::MAX),
            Gap {
                from: 201,
                to: u64::MAX
            }
        );
        assert_eq!(t.expected(), Some(u64::MAX));
    }
}
