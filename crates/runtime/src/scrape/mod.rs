//! The metrics scraper: every endpoint's `/metrics` page, polled over HTTP, parsed with
//! [`prom::parse`](crate::prom::parse), mapped with the endpoint's
//! [`EngineMapping`](crate::mapping::EngineMapping), and stored with
//! `Endpoint::set_metrics` (the pool stamps the time, so staleness is judged on one clock).
//!
//! - One tokio task per endpoint scrapes it every [`ScrapeSettings::interval`] (default 50 ms)
//!   within [`ScrapeSettings::timeout`] (default 1 s), so a slow or dead endpoint delays no
//!   other. Tasks follow the discovered endpoint set and restart when the settings change.
//! - A failure (connection refused, timeout, non-2xx status, oversized page, or a page with
//!   none of the load signals the mapping reads: garbage) is counted by reason in
//!   [`ScrapeStats`] and logged: the first of a streak, then at most once every 10 s, then the
//!   recovery. The endpoint's metrics are not refreshed, so they go stale after the
//!   scheduler's staleness bound and scorers stop trusting them; after
//!   [`clear_after_failures`](ScrapeSettings::clear_after_failures) consecutive failures
//!   (default 3) they are forgotten (`clear_metrics`).
//! - Unparsable lines in an otherwise good page are skipped and counted, not fatal.
//! - Cache geometry (`block_size`, `num_gpu_blocks`, from `vllm:cache_config_info` or
//!   SGLang's equivalent) travels in the stored metrics; the prefix-cache scorer sizes each
//!   endpoint's share of its index from it.
//!
//! [`ScrapeStats`] is a [`MetricsSource`](shepherd_scheduler_core::metrics::MetricsSource):
//! `shepherd_scrapes_total`, `shepherd_scrape_errors_total{reason}`,
//! `shepherd_scrape_bad_lines_total`, `shepherd_scrape_consecutive_failures` and the
//! `shepherd_scrape_duration_seconds` histogram, all per endpoint.
//!
//! ```
//! use shepherd_runtime::config::ScrapingConfig;
//! use shepherd_runtime::scrape::{ScrapeError, ScrapeSettings};
//!
//! let settings = ScrapeSettings::from_config(&ScrapingConfig::default()).unwrap();
//! assert_eq!(settings.interval.as_millis(), 50);
//! assert_eq!(settings.timeout.as_millis(), 1000);
//! assert_eq!(ScrapeError::Status(503).reason(), "http_status");
//! ```

pub mod dcgm;
mod error;
pub(crate) mod fetch;
pub mod models;
pub(crate) mod scraper;
mod settings;
mod stats;
mod worker;

pub use error::ScrapeError;
pub use settings::{MultiClusterScrape, ScrapeSettings};
pub use stats::{EndpointScrapeStats, ScrapeStats};
