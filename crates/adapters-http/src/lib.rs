//! # shepherd-adapters-http
//!
//! Shepherd as an OpenAI-compatible HTTP gateway: `shepherd-gateway`, one binary and one
//! config file in front of a handful of vLLM or SGLang servers, for teams that run no Envoy.
//! Each request to `/v1/completions`, `/v1/chat/completions`, `/v1/responses` or
//! `/v1/embeddings` is read whole, parsed by the core, scheduled — prefix-cache affinity,
//! queue depth, KV-cache use and in-flight load, with weights the adaptive loop retunes —
//! and proxied to the endpoint picked, the answer streamed back as the server writes it.
//!
//! ```text
//!  client ──HTTP──▶ shepherd-gateway ──HTTP──▶ model server (picked)
//!                    │ parse → schedule → forward (fallbacks on connect failure)
//!                    │ stream back frame by frame; usage → completion hooks
//!                    └ runtime: discovery, /metrics scraping, adaptive weights, admin
//! ```
//!
//! The crate is a library first, one concept per module:
//!
//! - [`server`]: [`GatewayServer`] (the runtime, the gateway and its HTTP server, with
//!   graceful shutdown; the port served by [`shepherd_runtime::http::serve`] under its
//!   connection limits);
//! - [`gateway`]: [`Gateway`], the shared state, and its routes;
//! - [`proxy`]: one inference request, from admission to the last byte;
//! - [`upstream`]: the pooled client and the walk down the decision's fallbacks;
//! - [`tracked`]: the response body that finishes the request's handle when it ends;
//! - [`body`]: reading a request body within its size limit, its deadline and the bytes all
//!   bodies may hold;
//! - [`models`]: the pool's `/v1/models`, aggregated and cached, and the unknown-model check;
//! - [`explain`]: the dry-run pick of `/debug/explain`;
//! - [`limit`]: the concurrency cap behind 429;
//! - [`settings`]: the `gateway` config section, keys read; client and upstream keys;
//! - [`headers`]: which headers cross the gateway;
//! - [`api_error`]: the gateway's own answers, in OpenAI's error shape;
//! - [`stats`]: the gateway's counters on `/metrics`.
//!
//! The config is the runtime's file (`docs/runtime.md`) with a `gateway:` section
//! ([`GatewayConfig`](shepherd_runtime::config::GatewayConfig)); `docs/gateway.md` walks
//! through running it.
//!
//! ```no_run
//! use std::time::Duration;
//! use shepherd_adapters_http::GatewayServer;
//! use shepherd_runtime::RuntimeOptions;
//! use shepherd_runtime::config::RuntimeConfig;
//!
//! # async fn run() -> Result<(), Box<dyn std::error::Error>> {
//! let config = RuntimeConfig::from_yaml(
//!     "endpoints: [127.0.0.1:8000, 127.0.0.1:8001]\nserver: {httpPort: 8080}\n",
//! )?;
//! let server = GatewayServer::start(config, RuntimeOptions::default()).await?;
//! // point any OpenAI client at http://127.0.0.1:8080/v1
//! tokio::signal::ctrl_c().await?;
//! server.shutdown(Duration::from_secs(30)).await;
//! # Ok(()) }
//! ```
#![forbid(unsafe_code)]
#![warn(missing_docs, unreachable_pub)]

pub mod api_error;
pub mod body;
pub mod error;
pub mod explain;
pub mod gateway;
pub mod headers;
pub mod limit;
pub mod models;
pub mod proxy;
pub mod server;
pub mod settings;
pub mod stats;
pub mod tracked;
pub mod upstream;

pub use api_error::ApiError;
pub use error::GatewayError;
pub use gateway::Gateway;
pub use server::GatewayServer;
pub use settings::GatewaySettings;
pub use stats::GatewayStats;
