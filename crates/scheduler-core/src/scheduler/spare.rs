//! Per-thread spare buffers, so that a steady-state pick allocates nothing.
//!
//! A pick needs a handful of vectors: its candidates, one score per (scorer, candidate), the
//! totals, the weights in force, the picked indexes, the decision's endpoints, and the cycle's
//! plugin [`Extensions`]. Some live only during the pick, the rest as long as the
//! [`Decision`](crate::decision::Decision) (its breakdown) or its
//! [`RequestHandle`](crate::completion::RequestHandle). Each is taken from the current thread's
//! spare list when the pick needs it and given back, emptied, when its owner is dropped, on
//! whatever thread that happens; the next pick on that thread reuses its allocation.
//!
//! Bounded: a thread keeps at most [`KEPT`] spares of each kind, none longer than
//! [`MAX_LEN`] elements (a larger one is freed), and at most [`KEPT_EXTENSIONS`] extension
//! sets. Nothing is kept when the thread's storage is gone (at thread exit) or busy.
//!
//! ```
//! # use shepherd_scheduler_core::prelude::*;
//! # use std::sync::Arc;
//! let pool = Arc::new(Pool::new());
//! pool.set_members(["10.0.0.1:8000"]);
//! let scheduler = Scheduler::builder(pool).profile(Profile::builder("p").build()).build().unwrap();
//! let request = InferenceRequest::new("r1", "llama", Prompt::Text("hi".into()));
//! // The first pick on a thread allocates its buffers; dropping the decision keeps them for
//! // the next pick on this thread.
//! drop(scheduler.schedule(&request));
//! drop(scheduler.schedule(&request));
//! ```

use std::cell::RefCell;
use std::sync::Arc;
use std::thread::LocalKey;

use crate::endpoint::{Endpoint, EndpointId};
use crate::plugin::{Extensions, Score};

/// Spares of each kind a thread keeps.
pub(crate) const KEPT: usize = 8;

/// Extension sets a thread keeps (they may hold whole plugin scratch structures).
pub(crate) const KEPT_EXTENSIONS: usize = 2;

/// Longest spare vector kept, in elements (a pick over 512 endpoints and 8 scorers needs
/// 4,096 scores).
pub(crate) const MAX_LEN: usize = 1 << 14;

/// A list of spare values of one kind.
type List<T> = RefCell<Vec<T>>;

thread_local! {
    static CANDIDATES: List<Vec<&'static Arc<Endpoint>>> = const { RefCell::new(Vec::new()) };
    static ENDPOINTS: List<Vec<Arc<Endpoint>>> = const { RefCell::new(Vec::new()) };
    static IDS: List<Vec<EndpointId>> = const { RefCell::new(Vec::new()) };
    static SCORES: List<Vec<Score>> = const { RefCell::new(Vec::new()) };
    static FLOATS: List<Vec<f64>> = const { RefCell::new(Vec::new()) };
    static INDEXES: List<Vec<usize>> = const { RefCell::new(Vec::new()) };
    static EXTENSIONS: List<Extensions> = const { RefCell::new(Vec::new()) };
}

/// A spare empty vector from `list`, or a new one.
fn take<T>(list: &'static LocalKey<List<Vec<T>>>) -> Vec<T> {
    list.try_with(|l| l.try_borrow_mut().ok().and_then(|mut l| l.pop()))
        .ok()
        .flatten()
        .unwrap_or_default()
}

/// Keeps `v`'s allocation (emptied) in `list`, when worth it and there is room.
fn give<T>(list: &'static LocalKey<List<Vec<T>>>, mut v: Vec<T>) {
    if v.capacity() == 0 || v.capacity() > MAX_LEN {
        return;
    }
    v.clear();
    let _ = list.try_with(|l| {
        if let Ok(mut l) = l.try_borrow_mut()
            && l.len() < KEPT
        {
            l.push(v);
        }
    });
}

/// A buffer for a pick's candidates (empty).
pub(crate) fn candidates<'s>() -> Vec<&'s Arc<Endpoint>> {
    // `&'static T` coerces to any `&'s T`: the empty spare serves every pick.
    take(&CANDIDATES)
}

/// Gives a pick's candidate buffer back.
#[allow(
    clippy::unnecessary_filter_map,
    reason = "a filter would keep the element type; the map changes its lifetime"
)]
pub(crate) fn give_candidates(mut v: Vec<&Arc<Endpoint>>) {
    v.clear();
    // Emptied, the vector holds no reference: collecting it again reuses its allocation for
    // the longer-lived element type (in-place collection of a vector into one of the same
    // element size).
    let v: Vec<&'static Arc<Endpoint>> = v.into_iter().filter_map(|_| None).collect();
    give(&CANDIDATES, v);
}

/// A buffer for a decision's endpoints (empty).
pub(crate) fn endpoints() -> Vec<Arc<Endpoint>> {
    take(&ENDPOINTS)
}

/// Gives a decision's endpoint buffer back (its endpoints released).
pub(crate) fn give_endpoints(v: Vec<Arc<Endpoint>>) {
    give(&ENDPOINTS, v);
}

/// A buffer for endpoint ids (empty).
pub(crate) fn ids() -> Vec<EndpointId> {
    take(&IDS)
}

/// Gives an id buffer back.
pub(crate) fn give_ids(v: Vec<EndpointId>) {
    give(&IDS, v);
}

/// A buffer for scores (empty).
pub(crate) fn scores() -> Vec<Score> {
    take(&SCORES)
}

/// Gives a score buffer back.
pub(crate) fn give_scores(v: Vec<Score>) {
    give(&SCORES, v);
}

/// A buffer for totals or weights (empty).
pub(crate) fn floats() -> Vec<f64> {
    take(&FLOATS)
}

/// Gives a float buffer back.
pub(crate) fn give_floats(v: Vec<f64>) {
    give(&FLOATS, v);
}

/// A buffer for candidate indexes (empty).
pub(crate) fn indexes() -> Vec<usize> {
    take(&INDEXES)
}

/// Gives an index buffer back.
pub(crate) fn give_indexes(v: Vec<usize>) {
    give(&INDEXES, v);
}

/// Extensions for a new cycle: a thread's spare set (whose values plugins may reuse, see
/// [`Extensions`]) or a new one.
pub(crate) fn extensions() -> Extensions {
    EXTENSIONS
        .try_with(|l| l.try_borrow_mut().ok().and_then(|mut l| l.pop()))
        .ok()
        .flatten()
        .unwrap_or_default()
}

/// Gives a finished cycle's extensions back, their values kept for reuse.
pub(crate) fn give_extensions(mut extensions: Extensions) {
    if extensions.kept() == 0 {
        return;
    }
    extensions.recycle();
    let _ = EXTENSIONS.try_with(|l| {
        if let Ok(mut l) = l.try_borrow_mut()
            && l.len() < KEPT_EXTENSIONS
        {
            l.push(extensions);
        }
    });
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_given_buffer_is_taken_again_empty_with_its_allocation() {
        let mut v = floats();
        v.extend([1.0, 2.0, 3.0]);
        let capacity = v.capacity();
        let ptr = v.as_ptr();
        give_floats(v);
        let again = floats();
        assert!(again.is_empty());
        assert_eq!(again.capacity(), capacity);
        assert_eq!(again.as_ptr(), ptr);
    }

    #[test]
    fn candidate_buffers_keep_their_allocation_across_lifetimes() {
        let clock: Arc<dyn crate::clock::Clock> = Arc::new(crate::clock::SystemClock::default());
        let endpoint = Arc::new(Endpoint::new(EndpointId(1), "10.0.0.1:8000", clock));
        let mut v = candidates();
        v.push(&endpoint);
        v.reserve(16);
        let ptr = v.as_ptr() as usize;
        give_candidates(v);
        let again = candidates();
        assert!(again.is_empty());
        assert_eq!(again.as_ptr() as usize, ptr);
    }

    #[test]
    fn huge_and_surplus_buffers_are_freed() {
        give_indexes(Vec::with_capacity(MAX_LEN + 1));
        assert_eq!(indexes().capacity(), 0);
        for _ in 0..KEPT + 3 {
            give_indexes(Vec::with_capacity(4));
        }
        let kept = (0..KEPT + 3)
            .map(|_| indexes())
            .filter(|v| v.capacity() > 0)
            .count();
        assert_eq!(kept, KEPT);
    }
}
