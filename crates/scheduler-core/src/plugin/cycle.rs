use std::any::{Any, TypeId};
use std::borrow::Cow;
use std::time::Duration;

use super::Annotations;
use crate::clock::Timestamp;
use crate::request::InferenceRequest;

/// Typed per-cycle storage that lets a plugin hand data from its scoring step to its own
/// pick hook (the prefix scorer keeps the request's block hashes here, for example).
///
/// The scheduler reuses a thread's extensions from one cycle to the next: what a cycle stored
/// is forgotten (no longer returned by [`get`](Self::get)) but kept, so that
/// [`get_or_insert_reused`](Self::get_or_insert_reused) and [`insert`](Self::insert) of the same
/// type refill it in place instead of allocating again. A steady-state pick allocates nothing.
///
/// ```
/// use shepherd_scheduler_core::plugin::Extensions;
///
/// let mut extensions = Extensions::default();
/// let seen: &mut Vec<u32> = extensions.get_or_insert_reused(Vec::new, Vec::clear);
/// seen.extend([1, 2, 3]);
/// assert_eq!(extensions.get::<Vec<u32>>(), Some(&vec![1, 2, 3]));
/// ```
#[derive(Default)]
pub struct Extensions {
    items: Vec<Item>,
}

/// One stored value; `live` while it belongs to the current cycle.
struct Item {
    id: TypeId,
    value: Box<dyn Any + Send>,
    live: bool,
}

impl Extensions {
    /// Stores `value`, replacing any earlier value of the same type.
    pub fn insert<T: Any + Send>(&mut self, value: T) {
        let id = TypeId::of::<T>();
        match self.items.iter_mut().find(|item| item.id == id) {
            Some(item) => {
                match item.value.downcast_mut::<T>() {
                    Some(slot) => *slot = value,
                    None => item.value = Box::new(value),
                }
                item.live = true;
            }
            None => self.items.push(Item {
                id,
                value: Box::new(value),
                live: true,
            }),
        }
    }

    /// The value of type `T` of this cycle: the stored one; else a value an earlier cycle left
    /// (handed to `reset` first, which must clear what it holds but may keep its
    /// allocations); else `fresh()`.
    pub fn get_or_insert_reused<T: Any + Send>(
        &mut self,
        fresh: impl FnOnce() -> T,
        reset: impl FnOnce(&mut T),
    ) -> &mut T {
        let id = TypeId::of::<T>();
        let at = match self.items.iter().position(|item| item.id == id) {
            Some(at) => at,
            None => {
                self.items.push(Item {
                    id,
                    value: Box::new(fresh()),
                    live: true,
                });
                self.items.len() - 1
            }
        };
        let item = &mut self.items[at];
        if !std::mem::replace(&mut item.live, true)
            && let Some(value) = item.value.downcast_mut::<T>()
        {
            reset(value);
        }
        match item.value.downcast_mut::<T>() {
            Some(value) => value,
            // An item's box always holds the type its id names.
            None => unreachable_value(),
        }
    }

    /// The stored value of type `T`.
    pub fn get<T: Any + Send>(&self) -> Option<&T> {
        let id = TypeId::of::<T>();
        self.items
            .iter()
            .find(|item| item.live && item.id == id)
            .and_then(|item| item.value.downcast_ref::<T>())
    }

    /// The stored value of type `T`, mutably.
    pub fn get_mut<T: Any + Send>(&mut self) -> Option<&mut T> {
        let id = TypeId::of::<T>();
        self.items
            .iter_mut()
            .find(|item| item.live && item.id == id)
            .and_then(|item| item.value.downcast_mut::<T>())
    }

    /// Removes and returns the stored value of type `T`.
    pub fn remove<T: Any + Send>(&mut self) -> Option<T> {
        let id = TypeId::of::<T>();
        let pos = self
            .items
            .iter()
            .position(|item| item.live && item.id == id)?;
        let item = self.items.swap_remove(pos);
        item.value.downcast::<T>().ok().map(|b| *b)
    }

    /// Forgets every stored value, keeping them for reuse by the next cycle (see the type's
    /// docs).
    pub(crate) fn recycle(&mut self) {
        for item in &mut self.items {
            item.live = false;
        }
    }

    /// Values kept, live or not.
    pub(crate) fn kept(&self) -> usize {
        self.items.len()
    }
}

/// Never called: [`Extensions::get_or_insert_reused`] boxes a `T` right before downcasting.
#[cold]
fn unreachable_value<T>() -> T {
    unreachable!("a value boxed as T downcasts to T")
}

/// Everything one scheduling cycle knows: the request, the time, and plugin scratch space.
pub struct CycleState<'r> {
    /// The request being scheduled.
    pub request: &'r InferenceRequest,
    /// When the cycle started.
    pub now: Timestamp,
    /// Metrics older than this are stale.
    pub staleness_bound: Duration,
    /// Plugin scratch space for this cycle.
    pub extensions: Extensions,
    /// Per-candidate figures shown in the pick's breakdown (see [`Annotations`]).
    pub annotations: Annotations,
    request_id: Cow<'r, str>,
}

impl<'r> CycleState<'r> {
    /// A cycle for `request` at `now`. A request without an id is given a fresh one
    /// ([`generate_request_id`](crate::request::generate_request_id)).
    pub fn new(request: &'r InferenceRequest, now: Timestamp, staleness_bound: Duration) -> Self {
        let request_id = if request.id.is_empty() {
            Cow::Owned(crate::request::generate_request_id())
        } else {
            Cow::Borrowed(request.id.as_str())
        };
        CycleState {
            request,
            now,
            staleness_bound,
            extensions: Extensions::default(),
            annotations: Annotations::default(),
            request_id,
        }
    }

    /// A cycle for a stage of `request` under its own id (the prefill stage of a
    /// disaggregated request: `<id>:prefill`).
    pub(crate) fn for_stage(
        request: &'r InferenceRequest,
        now: Timestamp,
        staleness_bound: Duration,
        id: String,
    ) -> Self {
        let mut cycle = CycleState::new(request, now, staleness_bound);
        cycle.request_id = Cow::Owned(id);
        cycle
    }

    /// The request's id: its own, or the one generated for it when it had none. Plugins that
    /// keep per-request state key it by this id (completion hooks see the same one).
    pub fn request_id(&self) -> &str {
        &self.request_id
    }
}

impl std::fmt::Debug for Extensions {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Extensions")
            .field("items", &self.items.iter().filter(|item| item.live).count())
            .finish()
    }
}

impl std::fmt::Debug for CycleState<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("CycleState")
            .field("request", &self.request)
            .field("request_id", &self.request_id)
            .field("now", &self.now)
            .field("staleness_bound", &self.staleness_bound)
            .field("extensions", &self.extensions)
            .finish()
    }
}
