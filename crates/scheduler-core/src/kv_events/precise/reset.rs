//! Why an endpoint's precise entries were dropped.

use std::fmt;

/// Why an endpoint's precise entries were dropped: each means the picture Shepherd had of that
/// server's cache could be wrong, and a wrong picture is worse than none.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum ResetReason {
    /// The engine said so (`AllBlocksCleared`).
    Cleared,
    /// Batches were lost and the replay could not return them.
    Gap,
    /// The publisher's sequence went back: the engine restarted with an empty cache.
    Restarted,
    /// More blocks than the engine can hold: removals were missed.
    Overflow,
    /// The connection to the publisher broke; whatever happened meanwhile is unknown.
    Disconnected,
}

impl ResetReason {
    /// Every reason, for exporting one counter each.
    pub const ALL: [ResetReason; 5] = [
        ResetReason::Cleared,
        ResetReason::Gap,
        ResetReason::Restarted,
        ResetReason::Overflow,
        ResetReason::Disconnected,
    ];

    /// The metric label.
    pub fn label(self) -> &'static str {
        match self {
            ResetReason::Cleared => "cleared",
            ResetReason::Gap => "gap",
            ResetReason::Restarted => "restarted",
            ResetReason::Overflow => "overflow",
            ResetReason::Disconnected => "disconnected",
        }
    }

    pub(crate) fn slot(self) -> usize {
        self as usize
    }
}

impl fmt::Display for ResetReason {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.label())
    }
}
