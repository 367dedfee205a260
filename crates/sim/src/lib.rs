//! # shepherd-sim
//!
//! A deterministic discrete-event simulator of a pool of vLLM-like model servers, driven by the
//! same Shepherd scheduler, plugins and adaptive weights as production, and a report that
//! compares routing policies side by side.
//!
//! - [`engine`]: one simulated server (continuous batching, chunked prefill, paged KV cache
//!   with automatic prefix caching, preemption) and its step-time cost model;
//! - [`calibration`]: that model against published measurements of vLLM (`shepherd-sim
//!   calibrate`, `docs/calibration.md`);
//! - [`workload`]: scenario files, traffic generators and trace replay;
//! - [`policy`]: the routing policies compared, as Shepherd configs;
//! - [`runner`]: the discrete-event loop that runs a scenario under a policy (and ticks the
//!   adaptive controller, a [`shepherd_adaptive::TickDriver`], on simulated time);
//! - [`report`]: the report as a one-way pipeline — runs → measures (TTFT, TPOT, SLO
//!   attainment) → summaries → aggregates over seeds (mean and 95 % interval) → judgements
//!   ("best" / "within 5 %") → documents (the JSON) → renderers (the table);
//! - [`compare`]: runs every (scenario, policy, seed) and drives that pipeline;
//!   [`goodput`]: `--max-goodput`, the highest load at which 90 % meet their objectives;
//! - [`svg`], [`timeline`]: the plots, the adaptive timeline;
//! - [`seeds`], [`stats`]: the seeds of a comparison; intervals and percentiles;
//! - [`overload`]: the flow-control report (per priority class and tenant, with and without
//!   flow control, against the same workload unloaded);
//! - [`pd`]: the prefill/decode disaggregation study (aggregated, 1P:3D and 2P:2D pools, the
//!   decider against "always" and "never");
//! - [`replicas`]: the replica study (R picker replicas with no coordination: hit rate, TTFT
//!   and load imbalance against R = 1);
//! - [`scale`]: the scale study (8, 32 and 128 servers at the same load per server: routing
//!   quality and the wall-clock cost of each pick as the pool grows);
//! - `serve` (feature `serve`, on by default): the engines as simulated vLLM servers over HTTP.
#![forbid(unsafe_code)]
#![warn(missing_docs, unreachable_pub)]

pub mod calibration;
pub mod compare;
pub mod engine;
pub mod error;
pub mod goodput;
pub mod overload;
pub mod pd;
pub mod policy;
pub mod replicas;
pub mod report;
pub mod runner;
pub mod scale;
pub mod seeds;
#[cfg(feature = "serve")]
pub mod serve;
pub mod stats;
pub mod svg;
pub mod timeline;
pub mod workload;

pub use error::SimError;
