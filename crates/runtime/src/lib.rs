//! # shepherd-runtime
//!
//! The runtime both adapters share. So far, its pure first parts:
//!
//! - [`prom`]: a small, bounded, fuzzed parser for the Prometheus text format that model
//!   servers serve on `/metrics` (metric names with colons, escaped labels, `NaN`/`±Inf`, one
//!   bad line skipped and counted, never a panic);
//! - [`mapping`]: which metrics give waiting and running requests, KV-cache utilization,
//!   cache geometry and LoRA state for vLLM, SGLang or a configured engine, turned into the
//!   core's [`EndpointMetrics`](shepherd_scheduler_core::endpoint::EndpointMetrics).
//!
//! The scraper loop, discovery and control loops will build on these.
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

mod error;
pub mod mapping;
pub mod prom;

pub use error::Error;
