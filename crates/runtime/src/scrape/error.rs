//! Why one scrape failed.

use std::time::Duration;

use thiserror::Error;

/// Why one scrape of one endpoint failed. The scraper counts each under its
/// [`reason`](Self::reason) and keeps going.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
#[non_exhaustive]
pub enum ScrapeError {
    /// No connection could be made (refused, unreachable).
    #[error("connection failed: {0}")]
    Connect(String),
    /// The scrape took longer than the timeout.
    #[error("timed out after {0:?}")]
    Timeout(Duration),
    /// The request failed otherwise (reset, protocol error).
    #[error("request failed: {0}")]
    Request(String),
    /// The server answered with a status other than 2xx.
    #[error("HTTP status {0}")]
    Status(u16),
    /// The page is larger than the parser accepts.
    #[error("metrics page over the {limit}-byte limit")]
    TooLarge {
        /// The limit in bytes.
        limit: usize,
    },
    /// The page has none of the load signals the endpoint's mapping reads (waiting, running,
    /// KV utilization): not a metrics page of the configured engine.
    #[error("no usable metrics on the page ({bad_lines} unparsable lines; missing {missing})")]
    NoSignals {
        /// Lines the parser skipped.
        bad_lines: usize,
        /// The signals that were looked for, comma-separated.
        missing: String,
    },
}

impl ScrapeError {
    /// The label of this failure in `shepherd_scrape_errors_total`.
    pub fn reason(&self) -> &'static str {
        match self {
            ScrapeError::Connect(_) => "connect",
            ScrapeError::Timeout(_) => "timeout",
            ScrapeError::Request(_) => "request",
            ScrapeError::Status(_) => "http_status",
            ScrapeError::TooLarge { .. } => "too_large",
            ScrapeError::NoSignals { .. } => "no_signals",
        }
    }

    /// Every reason label, in a stable order.
    pub const REASONS: [&'static str; 6] = [
        "connect",
        "timeout",
        "request",
        "http_status",
        "too_large",
        "no_signals",
    ];
}
