//! How a slot encodes the holders of its block.
//!
//! A cold slot holds up to two holder tags inline (`a`, `b`; `b` = 0 when there is one). A hot
//! slot refers to an interned set: `a` is the set id with [`SHARED_BIT`] set and `b` holds the
//! holders' reference bits by position in the sorted set (holders past the 31st share bit 31).
//! A holder tag is `endpoint id + 1`, with [`REF_BIT`] set (inline) when the block was touched
//! again since the endpoint's eviction clock last passed it.

/// Set on an inline holder tag when its block was re-used (a second chance for the clock).
pub(super) const REF_BIT: u32 = 1 << 31;
/// Set on `a` when the slot refers to an interned holder set.
pub(super) const SHARED_BIT: u32 = 1 << 30;
/// Largest endpoint id the index can hold (tags must stay below [`SHARED_BIT`]).
pub(crate) const MAX_ENDPOINT_ID: u32 = SHARED_BIT - 2;

/// The tag of endpoint `id` (without the reference bit).
pub(crate) fn tag_of(id: u32) -> u32 {
    id + 1
}

/// The endpoint id of `tag` (reference bit ignored).
pub(crate) fn id_of(tag: u32) -> u32 {
    (tag & !REF_BIT) - 1
}

/// The reference bit of the holder at `position` of a shared set.
#[inline]
pub(super) fn position_bit(position: usize) -> u32 {
    1 << position.min(31)
}

/// Reference bits after a holder is inserted at `position` (later holders move up one).
pub(super) fn bits_after_insert(bits: u32, position: usize) -> u32 {
    if position >= 31 {
        return bits;
    }
    let below = (1u32 << position) - 1;
    (bits & below) | ((bits & !below) << 1) | (bits & (1 << 31))
}

/// Reference bits after the holder at `position` leaves (later holders move down one).
pub(super) fn bits_after_remove(bits: u32, position: usize) -> u32 {
    if position >= 31 {
        return bits;
    }
    let below = (1u32 << position) - 1;
    (bits & below) | ((bits >> 1) & !below) | (bits & (1 << 31))
}

/// The holders of one block, as a lookup sees them.
#[derive(Debug, Clone, Copy)]
pub(crate) enum Holders<'a> {
    /// Up to two tags (0 means none), reference bits cleared.
    Inline(u32, u32),
    /// An interned set (its id and sorted bare tags).
    Shared(u32, &'a [u32]),
}

impl Holders<'_> {
    /// Whether the (bare) `tag` holds the block.
    #[inline]
    pub(crate) fn contains(&self, tag: u32) -> bool {
        match *self {
            Holders::Inline(a, b) => a == tag || b == tag,
            Holders::Shared(_, list) => list.binary_search(&tag).is_ok(),
        }
    }

    /// Equal for two blocks with the same holders in the same representation (different
    /// values may still be equal sets).
    #[inline]
    pub(crate) fn signature(&self) -> u64 {
        match *self {
            Holders::Inline(a, b) => (u64::from(a) << 32) | u64::from(b),
            Holders::Shared(id, _) => u64::from(id | SHARED_BIT) << 32,
        }
    }

    /// Calls `f` with every bare tag.
    pub(crate) fn for_each(&self, mut f: impl FnMut(u32)) {
        match *self {
            Holders::Inline(a, b) => {
                if a != 0 {
                    f(a);
                }
                if b != 0 {
                    f(b);
                }
            }
            Holders::Shared(_, list) => list.iter().for_each(|&t| f(t)),
        }
    }
}
