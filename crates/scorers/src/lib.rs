//! # shepherd-scorers
//!
//! Shepherd's built-in plugins: the [`filters`], [`scorers`] and [`pickers`] a scheduling
//! profile is made of, the [`builtin_registry`] that builds them from configuration under the
//! Gateway API Inference Extension's type names, and the [default configuration](default_config)
//! (prefix cache 3 : queue 2 : KV-cache utilization 2, max-score picker).
//!
//! Embedding the default policy takes a few lines:
//!
//! ```
//! use std::sync::Arc;
//! use shepherd_scheduler_core::prelude::*;
//! use shepherd_scorers::build_default_scheduler;
//!
//! let pool = Arc::new(Pool::new());
//! pool.set_members(["127.0.0.1:8000", "127.0.0.1:8001"]);
//! for (address, waiting) in [("127.0.0.1:8000", 6), ("127.0.0.1:8001", 1)] {
//!     let metrics = EndpointMetrics { waiting, ..Default::default() }; // stamped by the pool
//!     pool.snapshot().get_by_address(address).unwrap().set_metrics(metrics);
//! }
//! let scheduler = build_default_scheduler(Arc::clone(&pool)).unwrap();
//!
//! let request = InferenceRequest::new("r1", "llama", Prompt::Text("Hello".into()));
//! let decision = scheduler.schedule(&request).unwrap();
//! assert_eq!(decision.primary().address(), "127.0.0.1:8001"); // the shorter queue
//! println!("{}", decision.breakdown); // every scorer's score and weight, per endpoint
//! ```
//!
//! A configuration mixing built-ins with a plugin of your own is a YAML string and one
//! [`Registry::register`](shepherd_scheduler_core::config::Registry::register) call:
//!
//! ```
//! use std::sync::Arc;
//! use shepherd_scheduler_core::prelude::*;
//! use shepherd_scheduler_core::plugin::PluginInstance;
//! use shepherd_scorers::{builtin_registry, scorers::ActiveRequestScorer};
//!
//! let mut registry = builtin_registry();
//! registry.register("my-scorer", |_args| Ok(PluginInstance::scorer(Arc::new(ActiveRequestScorer::default()))));
//! let config = EndpointPickerConfig::from_yaml("
//! plugins:
//! - type: my-scorer
//! - type: queue-scorer
//! - type: weighted-random-picker
//! schedulingProfiles:
//! - name: default
//!   plugins:
//!   - pluginRef: my-scorer
//!     weight: 1
//!   - pluginRef: queue-scorer
//!     weight: 2
//!   - pluginRef: weighted-random-picker
//! ").unwrap();
//! let pool = Arc::new(Pool::new());
//! pool.set_members(["127.0.0.1:8000"]);
//! let scheduler = build_scheduler(&config, &registry, pool).unwrap();
//! assert_eq!(scheduler.profiles()[0].scorers().len(), 2);
//! ```
//!
//! Scorers that read scraped metrics give a neutral score to a candidate whose metrics are
//! stale, and clamp garbage values (NaN, negative, above 1) instead of failing.
#![forbid(unsafe_code)]
#![warn(missing_docs, unreachable_pub)]

pub mod admitters;
pub mod attributes;
pub mod conformance;
mod default_config;
pub mod disagg;
pub mod error;
pub mod filters;
pub mod latency;
mod lora;
pub mod multicluster;
pub mod multimodal;
pub mod params;
pub mod pickers;
pub mod prefix_cache;
pub mod producers;
mod registry;
pub mod scorers;
pub mod screener;
pub mod topology;
mod warnings;

pub use default_config::{DEFAULT_CONFIG_YAML, build_default_scheduler, default_config};
pub use error::ParameterError;
pub use registry::builtin_registry;
pub use warnings::parameter_warnings;
