//! Request-control *screeners*: filters that run before every scheduling profile of a request,
//! so no profile's own filters, scorers or picker can undo them. A screener is declared in
//! `plugins` and not listed in a profile; Shepherd runs it first in every profile
//! ([`PluginInstance::screener`](shepherd_scheduler_core::plugin::PluginInstance::screener)).
//!
//! - `disaggregatedset-rollout-screener` ([`rollout`]): during a `DisaggregatedSet` rollout,
//!   keeps every request on one revision whose roles are all ready, weighted by its ready pods.

pub mod config;
pub mod rollout;
pub mod selector;
