//! A small, bounded parser for the Prometheus text exposition format, as vLLM and SGLang serve
//! it on `/metrics`.
//!
//! Why our own: model servers name their metrics with colons (`vllm:num_requests_waiting`),
//! which the common Rust crates drop, and a router must keep going when one line of one
//! server's page is garbage. So [`parse`]:
//!
//! - reads sample lines `name{label="value",...} value [timestamp]`, with metric names in
//!   `[a-zA-Z_:][a-zA-Z0-9_:]*`, label values escaped with `\\`, `\"` and `\n`, values such as
//!   `12`, `1.5e-3`, `NaN`, `+Inf` and `-Inf`, and optional integer timestamps in milliseconds;
//! - reads `# HELP` and `# TYPE` lines into [`Metadata`] and ignores other comments, blank
//!   lines and a carriage return before each line feed;
//! - keeps histogram and summary samples under their own names (`<name>_bucket{le=...}`,
//!   `<name>_sum`, `<name>_count`); [`Scrape::family_of`] maps them back to their family;
//! - skips a malformed line, records why in a [`LineError`] (line and column) and counts it,
//!   instead of failing the page; only a page over [`MAX_INPUT_BYTES`] is refused whole;
//! - borrows names and label values from the page (a label value is copied only when it holds
//!   an escape), and stores all of a page's labels in one list;
//! - never panics, whatever the bytes (fuzzed by `fuzz/fuzz_targets/parse_metrics.rs`).
//!
//! Not supported, on purpose: UTF-8 metric names quoted inside braces (Prometheus 3), and
//! OpenMetrics float-second timestamps. An OpenMetrics exemplar after a sample (` # {...} 1`)
//! is ignored.
//!
//! ```
//! use shepherd_runtime::prom::{MetricType, parse};
//!
//! let page = "\
//! ## HELP vllm:num_requests_waiting Number of requests waiting to be processed.
//! ## TYPE vllm:num_requests_waiting gauge
//! vllm:num_requests_waiting{model_name=\"llama\"} 3.0
//! vllm:kv_cache_usage_perc{model_name=\"llama\"} NaN 1700000000000
//! this line is garbage
//! ";
//! let scrape = parse(page.as_bytes()).unwrap();
//! assert_eq!(scrape.len(), 2);
//! let waiting = scrape.get(0).unwrap();
//! assert_eq!(waiting.name, "vllm:num_requests_waiting");
//! assert_eq!(waiting.label("model_name"), Some("llama"));
//! assert_eq!(waiting.value, 3.0);
//! assert!(scrape.get(1).unwrap().value.is_nan());
//! assert_eq!(scrape.metric_type("vllm:num_requests_waiting"), Some(MetricType::Gauge));
//! assert_eq!(scrape.bad_lines(), 1);
//! assert_eq!(scrape.errors()[0].line, 5);
//! ```

mod error;
mod line;
mod sample;
#[cfg(test)]
mod tests;

pub use error::{LineError, LineErrorKind};
pub use sample::{Label, Metadata, MetricType, Sample, Scrape};

use crate::Error;
use line::{Line, parse_line};
use sample::StoredSample;

/// Largest page [`parse`] accepts: 4 MiB. A vLLM page is about 50 KB; the bound caps what one
/// misbehaving server can make the router allocate.
pub const MAX_INPUT_BYTES: usize = 4 * 1024 * 1024;

/// Longest line, in bytes without its line break: 64 KiB. Longer lines are skipped.
pub const MAX_LINE_BYTES: usize = 64 * 1024;

/// Most labels one sample may carry: 64. A sample with more is skipped.
pub const MAX_LABELS: usize = 64;

/// Most samples read from one page: 100,000 (a vLLM page has about 600). Later sample lines
/// are skipped and counted.
pub const MAX_SAMPLES: usize = 100_000;

/// Most skipped lines described in [`Scrape::errors`]: 32. All are counted in
/// [`Scrape::bad_lines`].
pub const MAX_REPORTED_ERRORS: usize = 32;

/// Parses a metrics page.
///
/// Fails only when the page is over [`MAX_INPUT_BYTES`]. Malformed lines (including lines that
/// are not UTF-8) are skipped and reported by [`Scrape::errors`] and [`Scrape::bad_lines`].
pub fn parse(input: &[u8]) -> Result<Scrape<'_>, Error> {
    if input.len() > MAX_INPUT_BYTES {
        return Err(Error::InputTooLarge {
            size: input.len(),
            limit: MAX_INPUT_BYTES,
        });
    }
    let mut builder = Builder::new(input.len());
    match std::str::from_utf8(input) {
        // The common case: check UTF-8 once and split with the fast `str` searcher.
        Ok(text) => {
            if !text.is_empty() {
                for line in text.strip_suffix('\n').unwrap_or(text).split('\n') {
                    builder.line(line.as_bytes(), Some(line));
                }
            }
        }
        Err(_) => {
            if !input.is_empty() {
                let body = input.strip_suffix(b"\n").unwrap_or(input);
                for raw in body.split(|&b| b == b'\n') {
                    builder.line(raw, std::str::from_utf8(raw).ok());
                }
            }
        }
    }
    Ok(builder.scrape)
}

/// Accumulates a [`Scrape`] line by line.
struct Builder<'a> {
    scrape: Scrape<'a>,
}

impl<'a> Builder<'a> {
    fn new(input_len: usize) -> Self {
        // A vLLM page averages about 80 bytes per sample and two labels per sample.
        let samples = (input_len / 80).min(MAX_SAMPLES);
        Builder {
            scrape: Scrape {
                samples: Vec::with_capacity(samples),
                labels: Vec::with_capacity(samples * 2),
                ..Scrape::default()
            },
        }
    }

    /// Handles one line: its bytes, and its text when it is valid UTF-8.
    fn line(&mut self, raw: &[u8], text: Option<&'a str>) {
        self.scrape.lines += 1;
        let line = self.scrape.lines;
        let len = raw.strip_suffix(b"\r").unwrap_or(raw).len();
        if len > MAX_LINE_BYTES {
            return self.skip(line, 1, LineErrorKind::TooLong { len });
        }
        let text = text.map(|t| t.strip_suffix('\r').unwrap_or(t));
        let Some(text) = text else {
            return self.skip(line, 1, LineErrorKind::NotUtf8);
        };
        let labels_before = self.scrape.labels.len();
        match parse_line(text, &mut self.scrape.labels) {
            Ok(Line::Nothing) => {}
            Ok(Line::Metadata(meta)) => self.scrape.metadata.push(meta),
            Ok(Line::Sample {
                name,
                value,
                timestamp_ms,
            }) => {
                if self.scrape.samples.len() >= MAX_SAMPLES {
                    self.scrape.labels.truncate(labels_before);
                    return self.skip(line, 1, LineErrorKind::TooManySamples);
                }
                self.scrape.samples.push(StoredSample {
                    name,
                    labels: labels_before..self.scrape.labels.len(),
                    value,
                    timestamp_ms,
                });
            }
            Err(failure) => {
                self.scrape.labels.truncate(labels_before);
                self.skip(line, failure.offset + 1, failure.kind);
            }
        }
    }

    fn skip(&mut self, line: usize, column: usize, kind: LineErrorKind) {
        self.scrape.bad_lines += 1;
        if self.scrape.errors.len() < MAX_REPORTED_ERRORS {
            self.scrape.errors.push(LineError { line, column, kind });
        }
    }
}
