//! The replay window of one sender: which (epoch, sequence) pairs were taken in.
//!
//! A datagram of a later epoch than the window's starts a new window (the sender restarted:
//! its epoch is the time it started); one of an earlier epoch is refused (an old run's
//! datagram replayed). A new window starts at the first sequence number it takes in: every
//! number below it counts as seen (a recording of the run's earlier datagrams is refused).
//! Within the epoch, a sequence number above the highest seen moves the window up; one at or
//! below the window's floor ([`WINDOW`] below the highest), or already seen inside it, is
//! refused. A window is a few words: one per configured peer, whatever
//! arrives.
//!
//! ```
//! use shepherd_runtime::replicas::window::{Replay, ReplayWindow};
//!
//! let mut w = ReplayWindow::default();
//! assert_eq!(w.admit(100, 5), Ok(()));
//! assert_eq!(w.admit(100, 4), Err(Replay::Seen)); // before the window opened
//! assert_eq!(w.admit(100, 7), Ok(()));
//! assert_eq!(w.admit(100, 6), Ok(()));        // reordered: still inside the window
//! assert_eq!(w.admit(100, 6), Err(Replay::Seen));
//! assert_eq!(w.admit(99, 50), Err(Replay::OldEpoch));
//! assert_eq!(w.admit(200, 1), Ok(()));        // the sender restarted
//! assert_eq!(w.admit(100, 4), Err(Replay::OldEpoch));
//! ```

/// Sequence numbers remembered below the highest one seen.
pub const WINDOW: u64 = 1024;
const WORDS: usize = (WINDOW / 64) as usize;

/// Why a datagram is a replay.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum Replay {
    /// From a run of the sender older than the one taken in last.
    #[error("from an earlier run of the sender")]
    OldEpoch,
    /// At or below the window's floor.
    #[error("below the replay window")]
    BelowWindow,
    /// Already taken in.
    #[error("already received")]
    Seen,
}

/// One sender's window: its epoch, the highest sequence taken in, and which of the
/// [`WINDOW`] numbers below it were.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ReplayWindow {
    /// `None` before the first datagram.
    epoch: Option<u64>,
    top: u64,
    /// Bit `i` (word `i / 64`, bit `i % 64`): whether `top - i` was taken in.
    seen: [u64; WORDS],
}

impl ReplayWindow {
    /// Takes in `(epoch, seq)` if it is new, or says why not. Call it only for an
    /// authenticated datagram: a forged one must not move the window.
    pub fn admit(&mut self, epoch: u64, seq: u64) -> Result<(), Replay> {
        match self.epoch {
            Some(current) if epoch < current => return Err(Replay::OldEpoch),
            Some(current) if epoch == current => {}
            _ => {
                self.epoch = Some(epoch);
                self.top = seq;
                self.seen = [u64::MAX; WORDS];
                return Ok(());
            }
        }
        if seq > self.top {
            self.shift(seq - self.top);
            self.top = seq;
            self.seen[0] |= 1;
            return Ok(());
        }
        // Numbers below the first one of the window stay seen (`seen` started full).
        let back = self.top - seq;
        if back >= WINDOW {
            return Err(Replay::BelowWindow);
        }
        let (word, bit) = ((back / 64) as usize, back % 64);
        if self.seen[word] & (1 << bit) != 0 {
            return Err(Replay::Seen);
        }
        self.seen[word] |= 1 << bit;
        Ok(())
    }

    /// The epoch taken in last, if any.
    pub fn epoch(&self) -> Option<u64> {
        self.epoch
    }

    /// Moves every bit `by` places up (older), dropping what falls out of the window.
    fn shift(&mut self, by: u64) {
        if by >= WINDOW {
            self.seen = [0; WORDS];
            return;
        }
        let (words, bits) = ((by / 64) as usize, (by % 64) as u32);
        for i in (0..WORDS).rev() {
            let from = i.checked_sub(words);
            let high = from.map_or(0, |f| self.seen[f]);
            let low = from
                .and_then(|f| f.checked_sub(1))
                .map_or(0, |f| self.seen[f]);
            self.seen[i] = if bits == 0 {
                high
            } else {
                (high << bits) | (low >> (64 - bits))
            };
        }
    }
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeSet;

    use proptest::prelude::*;

    use super::*;

    #[test]
    fn the_floor_moves_with_the_top() {
        let mut w = ReplayWindow::default();
        assert_eq!(w.admit(1, 3000), Ok(()));
        assert_eq!(w.admit(1, 2999), Err(Replay::Seen));
        assert_eq!(w.admit(1, 5000), Ok(()));
        assert_eq!(w.admit(1, 5000 - WINDOW + 1), Ok(()));
        assert_eq!(w.admit(1, 5000 - WINDOW), Err(Replay::BelowWindow));
        assert_eq!(w.admit(1, 5065), Ok(()));
        // 5000 is 65 below the top now: remembered across the word boundary.
        assert_eq!(w.admit(1, 5000), Err(Replay::Seen));
        assert_eq!(w.admit(1, 4999), Ok(()));
        assert_eq!(w.admit(1, 4999), Err(Replay::Seen));
        assert_eq!(w.admit(1, 5000 + 10 * WINDOW), Ok(()));
        assert_eq!(w.admit(1, 5065), Err(Replay::BelowWindow));
        assert_eq!(w.epoch(), Some(1));
    }

    proptest! {
        /// Against a model that remembers everything: the window never admits a pair twice,
        /// never an older epoch, nor a number below the one its epoch opened with, and refuses
        /// a new pair only for one of those reasons or below its floor.
        #[test]
        fn never_admits_twice(ops in proptest::collection::vec((0u64..3, 0u64..3000), 1..400)) {
            let mut w = ReplayWindow::default();
            let mut taken = BTreeSet::new();
            let mut epoch: Option<u64> = None;
            let mut top = 0u64;
            let mut opened = 0u64;
            for (e, s) in ops {
                let result = w.admit(e, s);
                let fresh = !taken.contains(&(e, s));
                match result {
                    Ok(()) => {
                        prop_assert!(fresh, "({e}, {s}) admitted twice");
                        prop_assert!(epoch.is_none_or(|c| e >= c));
                        if epoch != Some(e) {
                            top = s;
                            opened = s;
                        }
                        prop_assert!(s >= opened);
                        epoch = Some(e);
                        top = top.max(s);
                        taken.insert((e, s));
                    }
                    Err(Replay::OldEpoch) => prop_assert!(epoch.is_some_and(|c| e < c)),
                    Err(Replay::Seen) => prop_assert!(!fresh || (epoch == Some(e) && s < opened)),
                    Err(Replay::BelowWindow) => {
                        prop_assert_eq!(epoch, Some(e));
                        prop_assert!(top - s >= WINDOW);
                    }
                }
            }
        }
    }
}
