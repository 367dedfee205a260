//! # shepherd-runtime
//!
//! The async half both adapters share (the Envoy ext_proc picker `shepherd-epp` and the HTTP
//! gateway `shepherd-gateway`), on tokio:
//!
//! - [`config`]: one YAML file, the core's `EndpointPickerConfig` plus Shepherd's
//!   `endpoints`, `scraping`, `server` and `gateway` sections; the adaptive preset when it
//!   has no `schedulingProfiles`;
//! - [`discovery`]: where endpoints come from (a [`Discovery`](discovery::Discovery) trait; the
//!   static list of the config file, reloaded when the file changes);
//! - [`scrape`]: every endpoint's `/metrics`, polled, parsed with [`prom`], mapped with
//!   [`mapping`], stored in the pool; failures counted and left to go stale;
//! - [`adaptive`]: the adaptive weights' tick loop, surviving reloads;
//! - [`flow`]: flow control before scheduling (the `flowControl` section): requests wait
//!   while the pool is saturated and leave by priority and fairness, or are shed;
//! - [`kv_events`]: subscriptions to the model servers' KV-cache events for the precise
//!   prefix-cache producers;
//! - [`replicas`]: several active replicas exchanging their in-flight load;
//! - [`http`]: the HTTP server both HTTP ports run on, with a head deadline, an idle timeout,
//!   bounded buffers and a cap on open connections;
//! - [`admin`]: `/metrics`, `/healthz`, `/readyz`, `/debug/adaptive`, `/debug/config`;
//! - [`Runtime`]: all of it wired, with [`RuntimeHandle::shutdown`] for a graceful end;
//! - [`usage`]: the token `usage` at the end of a JSON or SSE response, found in a bounded
//!   tail as the response streams by;
//! - [`zmtp`]: the bounded ZeroMQ wire protocol the KV-event subscriptions speak (also the
//!   cargo feature `zmtp` alone, for the fuzz targets).
//!
//! All of that is the default cargo feature `runtime`; without it (`default-features =
//! false`) the crate is only its pure parts below, with no async dependency.
//!
//! An adapter binary calls [`Runtime::start`] once, routes with
//! [`RuntimeHandle::scheduler`], hands [`RuntimeHandle::shutdown_signal`] to its server, and
//! ends with [`RuntimeHandle::shutdown`] (the whole flow is the example on
//! [`RuntimeHandle`]; `docs/runtime.md` describes the config file and the admin port).
//!
//! Its pure parts:
//!
//! - [`prom`]: a small, bounded, fuzzed parser for the Prometheus text format that model
//!   servers serve on `/metrics` (metric names with colons, escaped labels, `NaN`/`±Inf`, one
//!   bad line skipped and counted, never a panic);
//! - [`mapping`]: which metrics give waiting and running requests, KV-cache utilization,
//!   cache geometry and LoRA state for vLLM, SGLang or a configured engine, turned into the
//!   core's [`EndpointMetrics`](shepherd_scheduler_core::endpoint::EndpointMetrics).
//!
//! ```
//! use shepherd_runtime::mapping::EngineMappings;
//! use shepherd_runtime::prom;
//!
//! let page = b"# TYPE sglang:num_queue_reqs gauge\r\n\
//!     sglang:num_queue_reqs{model_name=\"qwen\"} 4\r\n\
//!     sglang:num_running_reqs{model_name=\"qwen\"} 12\r\n\
//!     sglang:token_usage{model_name=\"qwen\"} 0.31\r\n\
//!     sglang:cache_config_info{num_pages=\"90000\",page_size=\"1\"} 1\r\n";
//! let scrape = prom::parse(page)?;
//! let metrics = EngineMappings::default().get(Some("sglang")).extract(&scrape).metrics;
//! assert_eq!((metrics.waiting, metrics.running), (4, 12));
//! assert_eq!(metrics.kv_utilization, 0.31);
//! assert_eq!((metrics.block_size, metrics.num_gpu_blocks), (Some(1), Some(90_000)));
//! # Ok::<(), shepherd_runtime::Error>(())
//! ```
#![forbid(unsafe_code)]
#![warn(missing_docs, unreachable_pub)]
#![cfg_attr(not(test), warn(clippy::unwrap_used, clippy::expect_used))]

#[cfg(feature = "runtime")]
pub mod adaptive;
#[cfg(feature = "runtime")]
pub mod admin;
#[cfg(feature = "runtime")]
mod clock;
#[cfg(feature = "runtime")]
pub mod config;
#[cfg(feature = "runtime")]
pub mod discovery;
mod error;
#[cfg(feature = "runtime")]
pub mod flow;
#[cfg(feature = "runtime")]
pub mod http;
#[cfg(feature = "runtime")]
pub mod kv_events;
pub mod mapping;
#[cfg(feature = "runtime")]
pub mod multicluster;
#[cfg(feature = "runtime")]
pub mod policies;
pub mod prom;
#[cfg(feature = "runtime")]
pub mod render;
#[cfg(feature = "replicas-wire")]
pub mod replicas;
#[cfg(feature = "runtime")]
mod runtime;
#[cfg(feature = "runtime")]
pub mod scrape;
#[cfg(feature = "runtime")]
mod shutdown;
pub mod telemetry;
#[cfg(feature = "runtime")]
pub mod throttle;
#[cfg(feature = "runtime")]
pub mod upstream;
pub mod usage;
#[cfg(feature = "zmtp")]
pub mod zmtp;

#[cfg(feature = "runtime")]
pub use clock::TokioClock;
pub use error::Error;
#[cfg(feature = "runtime")]
pub use runtime::{
    ConfigCheck, ConfigSource, ReloadOutcome, ReloadStats, Runtime, RuntimeError, RuntimeHandle,
    RuntimeOptions, ShutdownReport,
};
#[cfg(feature = "runtime")]
pub use shutdown::{ShutdownSignal, ShutdownTrigger};
