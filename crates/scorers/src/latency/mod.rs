//! Latency prediction: a small model learned online that predicts, per candidate, the TTFT
//! and TPOT a request would see there ([`LatencyModel`], over a tiny ridge-regression solver,
//! [`NormalEquations`]); the producer that judges those predictions against the request's
//! objectives ([`LatencyProducer`], [`Objectives`]); and the link its consumers find it by
//! ([`LatencyLink`]).
//!
//! Why a linear model on engineered features rather than trees or a network: an engine's
//! latencies are close to linear in a few known quantities (prefill work queued and uncached,
//! attention growing with the prompt, batch size), so a ridge fit over them is accurate,
//! learns from a few hundred requests, needs no dependency, and predicts in two dot products.

mod drain;
mod features;
mod judge;
pub mod link;
mod model;
mod objectives;
mod prediction_info;
pub mod producer;
mod request_predictor;
mod ridge;

pub use features::{DESIGN, LOAD_TERMS, LatencyFeatures, MAX_AGE_NANOS, RawFeatures};
pub use link::LatencyLink;
pub use model::{
    ErrorTally, LOAD_LEVELS, LatencyModel, LatencyModelParameters, Prediction, Predictor,
};
pub use objectives::Objectives;
pub use prediction_info::{LatencyPredictionInfo, LatencyPredictions};
pub use producer::{FeatureReader, LatencyProducer, LatencyProducerSettings};
pub use request_predictor::RequestPredictor;
pub use ridge::NormalEquations;
