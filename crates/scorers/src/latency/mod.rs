//! Latency prediction: a small model learned online that predicts, per candidate, the TTFT
//! and TPOT a request would see there ([`LatencyModel`]), over a tiny ridge-regression solver
//! ([`NormalEquations`]).
//!
//! Why a linear model on engineered features rather than trees or a network: an engine's
//! latencies are close to linear in a few known quantities (prefill work queued and uncached,
//! attention growing with the prompt, batch size), so a ridge fit over them is accurate,
//! learns from a few hundred requests, needs no dependency, and predicts in two dot products.

mod model;
mod ridge;

pub use model::{
    DESIGN, ErrorTally, LOAD_LEVELS, LatencyFeatures, LatencyModel, LatencyModelParameters,
    Prediction, Predictor,
};
pub use ridge::NormalEquations;
