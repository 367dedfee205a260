//! Built-in admitters: plugins that decide, before the filters, whether a request is served
//! at all ([`Admitter`](shepherd_scheduler_core::plugin::Admitter)).

pub mod latency_slo;
pub mod probabilistic;

pub use latency_slo::LatencySloAdmitter;
pub use probabilistic::ProbabilisticAdmitter;
