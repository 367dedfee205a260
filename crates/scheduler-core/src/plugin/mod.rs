//! The plugin traits: [`Admitter`], [`Filter`], [`Scorer`], [`Picker`], and the [`PickHook`] /
//! [`CompletionHook`] that run after a pick and after a response (the latter lives in
//! [`crate::completion`] and is re-exported here).
//!
//! A plugin is any type implementing one or more of these traits; the config
//! [`Registry`](crate::config::Registry) builds it from YAML and wraps its facets in a
//! [`PluginInstance`].
//!
//! Writing a scorer takes a dozen lines:
//!
//! ```
//! use std::sync::Arc;
//! use shepherd_scheduler_core::endpoint::Endpoint;
//! use shepherd_scheduler_core::plugin::{Category, CycleState, Score, Scorer};
//!
//! /// Prefers endpoints with fewer requests in flight from this scheduler.
//! struct FewestInFlight;
//!
//! impl Scorer for FewestInFlight {
//!     fn category(&self) -> Category {
//!         Category::Distribution
//!     }
//!     fn score(&self, _cycle: &mut CycleState<'_>, candidates: &[&Arc<Endpoint>], out: &mut [Score]) {
//!         for (slot, ep) in out.iter_mut().zip(candidates) {
//!             *slot = Score::new(1.0 / (1.0 + ep.in_flight_requests() as f64));
//!         }
//!     }
//! }
//! ```

mod annotations;
mod cached_prefix;
mod cycle;
mod instance;
mod traits;

pub use crate::completion::{CompletedRequest, Completion, CompletionHook, Outcome, Usage};
pub use annotations::{AnnotationTable, Annotations};
pub use cached_prefix::CachedPrefix;
pub use cycle::{CycleState, Extensions};
pub use instance::PluginInstance;
pub use traits::{Admitter, Category, Decider, Filter, PickHook, Picker, Score, Scorer};
