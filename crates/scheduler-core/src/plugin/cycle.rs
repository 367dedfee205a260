use std::any::{Any, TypeId};
use std::borrow::Cow;
use std::time::Duration;

use super::Annotations;
use crate::clock::Timestamp;
use crate::request::InferenceRequest;

/// Typed per-cycle storage that lets a plugin hand data from its scoring step to its own
/// pick hook (the prefix scorer keeps the request's block hashes here, for example).
#[derive(Default)]
pub struct Extensions {
    items: Vec<(TypeId, Box<dyn Any + Send>)>,
}

impl Extensions {
    /// Stores `value`, replacing any earlier value of the same type.
    pub fn insert<T: Any + Send>(&mut self, value: T) {
        let id = TypeId::of::<T>();
        match self.items.iter_mut().find(|(t, _)| *t == id) {
            Some(slot) => slot.1 = Box::new(value),
            None => self.items.push((id, Box::new(value))),
        }
    }

    /// The stored value of type `T`.
    pub fn get<T: Any + Send>(&self) -> Option<&T> {
        let id = TypeId::of::<T>();
        self.items
            .iter()
            .find(|(t, _)| *t == id)
            .and_then(|(_, v)| v.downcast_ref::<T>())
    }

    /// The stored value of type `T`, mutably.
    pub fn get_mut<T: Any + Send>(&mut self) -> Option<&mut T> {
        let id = TypeId::of::<T>();
        self.items
            .iter_mut()
            .find(|(t, _)| *t == id)
            .and_then(|(_, v)| v.downcast_mut::<T>())
    }

    /// Removes and returns the stored value of type `T`.
    pub fn remove<T: Any + Send>(&mut self) -> Option<T> {
        let id = TypeId::of::<T>();
        let pos = self.items.iter().position(|(t, _)| *t == id)?;
        let (_, boxed) = self.items.swap_remove(pos);
        boxed.downcast::<T>().ok().map(|b| *b)
    }
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
            .field("items", &self.items.len())
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
