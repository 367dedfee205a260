//! # shepherd-adaptive
//!
//! Adaptive scorer weights: Shepherd tunes the balance between *Affinity* scorers (prefix
//! cache, LoRA, session: "stick") and *Distribution* scorers (queue, KV utilization, running
//! and in-flight requests: "spread") by itself, deterministically and explainably, off the
//! request path.
//!
//! Every tick:
//! 1. [`sample`]: per endpoint, load pᵢ = running + waiting + this scheduler's in-flight
//!    requests, and KV utilization kᵢ; stale endpoints are marked and left out.
//! 2. [`detector`]: normalized coefficients of variation nCV(p), nCV(k) ∈ [0, 1], combined into
//!    a signal s ∈ [0, 1] (0 for fewer than two fresh endpoints or a nearly idle pool; no
//!    signal at all when every endpoint is stale, and then the loop holds its state).
//! 3. Smoothing r ← α·r + (1 − α)·s, snapping onto s once within ε, so it settles.
//! 4. Hysteresis ([`Mode`]): enter `burst` when r > enter, leave only when r < exit (and after
//!    a minimum dwell).
//! 5. The mode's Richards curve ([`richards`]) maps r to the Distribution share of the weight
//!    budget between that mode's min and max; Affinity gets the rest; each scorer keeps its
//!    configured proportion inside its category ([`layout`]); Balance scorers are untouched.
//! 6. A [`TickRecord`] explains it all.
//!
//! [`Tuner::step`] is that loop as a pure function; [`AdaptiveController`] binds it to one core
//! `Profile`, publishes weights through the profile's lock-free weight cell, logs mode changes
//! and keeps the records in a bounded ring. There is no async runtime here: a driver calls
//! [`AdaptiveController::tick`] every [`AdaptiveConfig::tick_ms`]. The [`driver`] module is
//! that contract: a [`TickDriver`] is ticked with the pool on its own period and yields an
//! [`AdaptiveSample`] per tick; [`ControllerDriver`] binds a controller to it. The simulator
//! (on simulated time) and the async runtime (on the wall clock) both drive it.
//!
//! [`preset`] is the profile and settings the simulator tuned, with a one-call builder; the
//! controller is a [`MetricsSource`](shepherd_scheduler_core::metrics::MetricsSource) of its
//! signal, mode, share and weights.
//!
//! With the defaults and the built-in profile (prefix 3 : queue 2 : kv 2), a balanced or idle
//! pool keeps exactly the configured weights; a hot node (one endpoint with most of the load)
//! moves the pool into `burst`, where Distribution scorers get 70–90 % of the budget (e.g.
//! prefix 0.7 : queue 3.15 : kv 3.15 at the top). A step change settles within
//! [`AdaptiveConfig::settle_bound_ticks`] ticks (16 with the defaults).
//!
//! ```
//! use shepherd_adaptive::{AdaptiveConfig, Mode, ScorerLayout, Tuner};
//! use shepherd_adaptive::sample::EndpointSample;
//! use shepherd_scheduler_core::clock::Timestamp;
//! use shepherd_scheduler_core::plugin::Category::{Affinity, Distribution};
//!
//! let tuner = Tuner::new(
//!     AdaptiveConfig::default(),
//!     ScorerLayout::new(vec![Affinity, Distribution, Distribution], vec![3.0, 2.0, 2.0]),
//! )
//! .unwrap();
//! let balanced: Vec<_> = (0..4)
//!     .map(|i| EndpointSample::new(format!("10.0.0.{i}:8000"), 6, 1, 0, 0.4, false))
//!     .collect();
//! let out = tuner.step(&tuner.initial_state(), &balanced, Timestamp::ZERO);
//! assert_eq!(out.record.reading.signal, Some(0.0));
//! assert_eq!(out.state.mode, Mode::Steady);
//! assert_eq!(out.weights, vec![3.0, 2.0, 2.0]);
//! ```
#![forbid(unsafe_code)]
#![warn(missing_docs, unreachable_pub)]

pub mod config;
pub mod controller;
pub mod detector;
pub mod driver;
pub mod error;
mod exported;
pub mod layout;
pub mod mode;
pub mod preset;
pub mod record;
pub mod richards;
pub mod sample;
pub mod tuner;

pub use config::AdaptiveConfig;
pub use controller::AdaptiveController;
pub use driver::{AdaptiveSample, ControllerDriver, TickDriver};
pub use error::AdaptiveError;
pub use layout::ScorerLayout;
pub use mode::{AdaptiveState, Mode};
pub use record::{TickHistory, TickRecord};
pub use tuner::{TickOutcome, Tuner};
