//! Runs: an insert records on a shared block how many of the following blocks of its chain had
//! the same holder set, so that a lookup reaching it can skip their probes.

use super::BlockTable;
#[cfg(test)]
use super::holders::Added;
use super::probe::{ABSENT, HOT};
use super::slot::SHARED_BIT;

/// A run of consecutive blocks of one inserted chain that all had the same holder set: the
/// block it is stored on, the `len - 1` blocks after it, ending with the block keyed `end`.
/// Cleared when the block's own set changes; valid while the set's departure count still
/// equals `departures` (no block of the run has left the set).
#[derive(Debug, Clone, Copy, Default)]
pub(crate) struct Run {
    pub(crate) end: u64,
    pub(crate) len: u32,
    departures: u32,
}

impl Run {
    /// The stored form: the end key, then the length and departure count.
    #[inline]
    pub(super) fn pack(self) -> [u64; 2] {
        [
            self.end,
            u64::from(self.len) | (u64::from(self.departures) << 32),
        ]
    }

    /// The run a [`pack`](Self::pack)ed form holds.
    #[inline]
    pub(super) fn unpack(raw: [u64; 2]) -> Run {
        Run {
            end: raw[0],
            len: raw[1] as u32,
            departures: (raw[1] >> 32) as u32,
        }
    }

    /// The run to record on the block keyed `key`, whose set `set` has had `departures`
    /// departures, given what was recorded on the next block of its chain; and what to pass
    /// on to the block before it.
    #[inline]
    pub(super) fn chained(
        key: u64,
        set: u32,
        departures: u32,
        following: Option<Following>,
    ) -> (Run, Following) {
        let (end, len) = match following {
            Some(f) if f.set == set && f.len < u32::MAX => (f.end, f.len + 1),
            _ => (key, 1),
        };
        let run = Run {
            end,
            len,
            departures,
        };
        (run, Following { set, end, len })
    }
}

/// The run recorded on the block after the one being recorded (inserts walk a chain backwards).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Following {
    set: u32,
    end: u64,
    len: u32,
}

impl BlockTable {
    /// [`add`](Self::add), then (the block being one of a whole chain inserted backwards)
    /// records the run of blocks from `key` on that share its holder set; `following` is what
    /// the call for the next block of the chain returned. Blocks with fewer than three holders
    /// have no run. One key at a time, as [`add_stretch`](Self::add_stretch) does for a
    /// stretch (for tests).
    #[cfg(test)]
    pub(crate) fn add_in_chain(
        &mut self,
        key: u64,
        tag: u32,
        following: Option<Following>,
    ) -> (Added, Option<Following>) {
        let (added, hot) = self.add_locating(key, tag);
        (added, self.record_run(hot, key, following))
    }

    /// Records on the block just added (keyed `key`, at `hot` in the hot array when it is
    /// there) the run of blocks from it that share its holder set, given what the call for the
    /// next block of the chain returned; returns what to pass for the block before.
    #[inline]
    pub(super) fn record_run(
        &mut self,
        hot: Option<usize>,
        key: u64,
        following: Option<Following>,
    ) -> Option<Following> {
        let i = hot?;
        let mut hot = self.hot.get(i)?;
        let set = hot.slot.a & !SHARED_BIT;
        let (run, before) = Run::chained(key, set, self.sets.departures(set), following);
        hot.run = run;
        self.hot.set(i, hot);
        Some(before)
    }

    /// The still valid run recorded on the block at `found` (from
    /// [`find_batch`](Self::find_batch)), when longer than the block itself.
    #[inline]
    pub(crate) fn run_at(&self, found: usize) -> Option<Run> {
        if found == ABSENT || found & HOT == 0 {
            return None;
        }
        let hot = self.hot.get(found & !HOT)?;
        let set = hot.slot.a & !SHARED_BIT;
        (hot.run.len > 1 && hot.run.departures == self.sets.departures(set)).then_some(hot.run)
    }
}
