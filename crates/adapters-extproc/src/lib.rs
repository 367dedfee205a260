//! # shepherd-adapters-extproc
//!
//! Shepherd as an Envoy *endpoint picker*: the Gateway API Inference Extension's protocol over
//! Envoy's external-processing gRPC service (`envoy.service.ext_proc.v3.ExternalProcessor`).
//! Envoy hands each inference request to the picker; the picker reads the body, asks the
//! scheduling core where it should go, and tells Envoy through the
//! `x-gateway-destination-endpoint` header and `envoy.lb` metadata; on the way back it watches
//! the response to learn when the first token came and how many tokens were used.
//!
//! The crate is a library first, one concept per module:
//!
//! - [`exchange`]: the state machine of one stream (request headers → body → trailers →
//!   pick → response headers → body → trailers), free of I/O;
//! - [`assembly`]: buffering and parsing one request, within the body limit;
//! - [`budget`]: the cap on request-body bytes buffered across every stream;
//! - [`answer`]: every `ProcessingResponse` shape the picker sends;
//! - [`reject`]: rejections as `ImmediateResponse`s (status, reason header, JSON body);
//! - [`hint`]: the subset hint and the served-endpoint report in metadata;
//! - [`headers`]: Envoy header values (`raw_value`);
//! - [`service`]: the tonic service driving exchanges, with an [`Admission`] hook for flow
//!   control; [`server`]: serving it and gRPC health.
//!
//! ```no_run
//! use std::sync::Arc;
//! use shepherd_adapters_extproc::{serve, ExtProcOptions, ExtProcService};
//! use shepherd_scheduler_core::prelude::*;
//! use shepherd_scorers::{builtin_registry, default_config};
//!
//! # async fn run() -> Result<(), Box<dyn std::error::Error>> {
//! let shared = SharedState::new(Arc::new(Pool::new()));
//! shared.pool.set_members(["127.0.0.1:8000", "127.0.0.1:8001"]);
//! let scheduler = ReloadableScheduler::build(&default_config(), &builtin_registry(), shared)?;
//! let service = ExtProcService::new(Arc::new(scheduler), ExtProcOptions::default());
//! let listener = tokio::net::TcpListener::bind("127.0.0.1:9002").await?;
//! serve(listener, service, std::future::pending()).await?;
//! # Ok(()) }
//! ```
//!
//! The exact messages, per phase and body mode, are listed in [`answer`].
#![forbid(unsafe_code)]
#![warn(missing_docs, unreachable_pub)]

pub mod answer;
pub mod assembly;
pub mod budget;
pub mod codec;
pub mod connections;
pub mod error;
pub mod exchange;
pub mod framing;
pub mod grpc_server;
pub mod headers;
pub mod hint;
pub mod options;
pub mod reject;
pub mod server;
pub mod service;

pub use budget::{BodyBudget, BodyReservation};
pub use codec::{BodyChunk, Outgoing};
pub use error::{ProtocolError, Rejection, ServeError};
pub use exchange::{Exchange, PickJob, Step};
pub use grpc_server::ExtProcServer;
pub use options::{BodyMode, ExtProcOptions, HeaderNames, MetadataKeys, OptionsError};
pub use server::{
    LIVENESS_SERVICE, READINESS_SERVICE, SERVICE_NAME, serve, serve_health, serve_health_counted,
    serve_health_leading,
};
pub use service::{Admission, Admitted, AnswerStream, BoxFuture, ExtProcService};

/// The Envoy protocol types this crate speaks, re-exported so embedders and tests use the
/// same versions.
pub use envoy_types;
