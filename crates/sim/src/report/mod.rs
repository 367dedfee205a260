//! The comparison report, as a one-way pipeline:
//!
//! ```text
//! runs ──▶ measures ──▶ summaries ──▶ aggregates ──▶ judgements ──▶ documents ──▶ renderers
//! (runner)  measure      summary       aggregate      judge, best    document      table,
//!           attainment                                                             slo_columns,
//!           latency_error                                                          latency_table
//! ```
//!
//! Each stage reads only the stages to its left (`tests/layers.rs` checks the imports):
//!
//! 1. [`measure`]: what one request measured (TTFT, TPOT) and a run's sorted samples;
//!    [`attainment`]: whether a request met its objectives, and SLO attainment;
//!    [`latency_error`]: a latency model's prediction error, from the runs' tallies;
//! 2. [`summary`]: one run's row of figures ([`summarize`]);
//! 3. [`aggregate`](mod@aggregate): one policy's rows over several seeds: each figure's mean and 95 %
//!    interval ([`figure`] reads one);
//! 4. [`judge`] (the interval rule) and [`best`]: which policies are best, or within 5 % of
//!    the best, on the judged figures; [`max_goodput`]: the highest load at which 90 % of the
//!    requests meet their objectives (searched by [`crate::goodput`]);
//! 5. [`document`]: the scenario reports and the whole report (the JSON document);
//! 6. renderers, which compute nothing: [`table`](fn@table) with its [`cell`]s,
//!    [`slo_columns`] and [`latency_table`].
//!
//! [`crate::compare`] drives the pipeline: it runs, summarizes, aggregates, judges and
//! assembles the documents; the binary renders them.
//!
//! ```
//! use shepherd_sim::report::{aggregate, judgements, PolicySummary};
//!
//! let row = |policy: &str, p90: f64| PolicySummary {
//!     policy: policy.into(),
//!     ttft_p90_ms: p90,
//!     ..PolicySummary::default()
//! };
//! // Two seeds of one policy fold into one row; then the rows are judged.
//! let a = aggregate(&[row("a", 100.0), row("a", 110.0)]);
//! let j = judgements(&[a, row("b", 200.0)]);
//! assert_eq!(j[0].best_mean_policy, "a");
//! ```

pub mod aggregate;
pub mod attainment;
pub mod best;
pub mod cell;
pub mod document;
pub mod judge;
pub mod latency_error;
pub mod latency_table;
pub mod max_goodput;
pub mod measure;
pub mod slo_columns;
pub mod summary;
pub mod table;

pub use aggregate::{aggregate, figure};
pub use best::{Judgement, judgements};
pub use document::{Report, ScenarioReport};
pub use measure::{tpot_ms, ttft_ms, ttfts_ms};
pub use summary::{AdaptiveSummary, PolicySummary, StreamSummary, ceiling, summarize};
pub use table::table;
