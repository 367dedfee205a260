//! `shepherd-sim serve`: simulated vLLM servers over HTTP, the stand-in for GPU servers in
//! end-to-end tests and a way to try Shepherd without GPUs.
//!
//! Each server listens on a loopback port and runs one simulator [`Engine`](crate::engine::Engine)
//! in real time (scaled by [`ServeConfig::speed`]): requests join its queue, steps take the
//! cost model's time, and tokens reach the client as the steps produce them, so time to first
//! token, time per output token, queueing, prefix-cache hits and KV pressure behave as in the
//! simulator. It speaks what Shepherd meets in front of vLLM:
//!
//! - `POST /v1/completions`, `POST /v1/chat/completions`: parsed by the core's parser (the
//!   prompt is the text Shepherd sees, one pseudo token per 4 bytes); the output is
//!   `max_tokens` (or `max_completion_tokens`) filler tokens `" tok"`, capped, 16 by default;
//!   JSON in the OpenAI shape with `usage.prompt_tokens_details.cached_tokens`, or with
//!   `"stream": true` SSE events, one per engine step that produced a token, then a usage event
//!   (`stream_options.include_usage`), then `data: [DONE]`. A client that goes away mid-request
//!   aborts it in the engine. Malformed bodies get 400, other models 404, a full server 503,
//!   all as `{"error":{"message","type","param","code"}}`.
//! - `GET /v1/models`, `GET /health`.
//! - `GET /metrics`: `vllm:num_requests_waiting`, `vllm:num_requests_running`,
//!   `vllm:kv_cache_usage_perc` (and the older `vllm:gpu_cache_usage_perc`),
//!   `vllm:cache_config_info{block_size,num_gpu_blocks}`, `vllm:prefix_cache_queries_total`,
//!   `vllm:prefix_cache_hits_total` and a few token counters, with vLLM's `# HELP`/`# TYPE`
//!   lines and `model_name` labels.
//!
//! - `POST /reset_prefix_cache` (vLLM's dev route): the engine drops its prefix cache when
//!   no block is in use; 200 when it did, 409 otherwise (vLLM answers 200 either way).
//!
//! Every response carries [`SERVER_HEADER`] (the server's index) and [`ADDRESS_HEADER`] (its
//! `ip:port`), so a test sees where a router sent each request; a completion request that
//! arrived with a W3C `traceparent` gets it back in [`TRACEPARENT_ECHO_HEADER`], so a test
//! sees which trace reached the model server.
//!
//! # Prefill/decode disaggregation
//!
//! Servers take roles ([`ServeConfig::roles`], llm-d's `llm-d.ai/role` values). Every server
//! but a prefill-only one runs the decode-side routing sidecar's protocol: a request with
//! [`PREFILLER_HEADER`] is prefilled on that server (`kv_transfer_params.do_remote_decode`,
//! one output token), then decoded here from the prefill's KV (`do_remote_prefill`, the read
//! priced by [`ServeConfig::kv_transfer`]); the answer names the prefill server in
//! [`PREFILL_SERVER_HEADER`] / [`PREFILL_ADDRESS_HEADER`]. A prefill that fails is served
//! aggregated here ([`PREFILL_FALLBACK_HEADER`] says why). `sidecar` and `kv_params` hold it.
//!
//! # KV-cache events
//!
//! With [`ServeConfig::kv_events`] (CLI `--kv-events`) each server publishes its engine's
//! KV-cache events as vLLM's `ZmqEventPublisher` does: a ZeroMQ PUB socket sends one message
//! `[topic, seq (8 bytes big-endian, from 0), msgpack KVEventBatch]` per engine step that
//! stored or evicted blocks (or a reset cleared them), the topic `kv@<ip:port>@<model>` (the
//! llm-d convention, the source being the server's HTTP address); a ROUTER socket replays
//! the last `buffer_steps` batches: a request `[start]` from a REQ socket (8 bytes
//! big-endian) gets `[seq, payload]` for every buffered batch from `start` on, then
//! `[-1, empty]` (with [`KvEventsConfig::replay_topic`], as the newest vLLM: `[topic, seq,
//! payload]`, then `[empty, -1, empty]`). The events are the engine's ([`crate::engine`]'s module docs): the blocks'
//! tokens are the prompt's pseudo tokens, then the output's. [`ServeHandle::kv_events`] names
//! each server's endpoints; [`ServeHandle::restart`] and [`ServeHandle::drop_kv_batches`]
//! are test hooks for a subscriber's recovery (a restarted server, lost messages, gaps).
//!
//! The parts: [`ServeConfig`] (what to serve), [`spawn`] and [`ServeHandle`] (start in-process,
//! stop one server to simulate a dead one), [`run`] and [`ServeArgs`] (the binary).
//! Internally: `driver` (a tokio task per server owning its engine), `handlers` (routes),
//! `request` (body to engine request and block hashes), `openai` (JSON and SSE encoding),
//! `metrics` (Prometheus text), `publisher` (the KV-event sockets and replay buffer).
//!
//! ```
//! use shepherd_sim::serve::{self, SERVER_HEADER, ServeConfig};
//!
//! # #[tokio::main(flavor = "current_thread")]
//! # async fn main() -> Result<(), Box<dyn std::error::Error>> {
//! let mut config = ServeConfig::ephemeral(2); // two servers, ports picked by the OS
//! config.speed = 50.0;
//! let mut pool = serve::spawn(config).await?;
//!
//! let client = reqwest::Client::new();
//! let response = client
//!     .post(format!("http://{}/v1/completions", pool.addrs()[1]))
//!     .body(r#"{"model":"meta-llama/Llama-3.1-8B-Instruct","prompt":"Hello","max_tokens":4}"#)
//!     .send()
//!     .await?;
//! assert_eq!(response.headers()[SERVER_HEADER], "1");
//! let body: serde_json::Value = response.json().await?;
//! assert_eq!(body["choices"][0]["text"], " tok tok tok tok");
//! assert_eq!(body["usage"]["completion_tokens"], 4);
//!
//! pool.stop(1).await; // server 1 is gone: its port refuses connections
//! assert!(client.get(format!("http://{}/health", pool.addrs()[1])).send().await.is_err());
//! # Ok(())
//! # }
//! ```
//!
//! Subscribing to a server's KV-cache events:
//!
//! ```
//! use shepherd_scheduler_core::kv_events::wire::decode_sequence;
//! use shepherd_sim::serve::{self, KvEventsConfig, ServeConfig};
//! use zeromq::prelude::*;
//!
//! # #[tokio::main(flavor = "current_thread")]
//! # async fn main() -> Result<(), Box<dyn std::error::Error>> {
//! let mut config = ServeConfig::ephemeral(1);
//! config.speed = 50.0;
//! config.kv_events = Some(KvEventsConfig::ephemeral());
//! let pool = serve::spawn(config).await?;
//! let endpoints = pool.kv_events(0).unwrap();
//! assert_eq!(endpoints.topic, format!("kv@{}@{}", pool.addrs()[0], serve::DEFAULT_MODEL));
//!
//! let mut sub = zeromq::SubSocket::new();
//! sub.connect(&endpoints.publish_endpoint()).await?;
//! sub.subscribe("kv@").await?;
//! // A PUB socket sends nothing to a subscriber until its subscription arrived.
//! tokio::time::sleep(std::time::Duration::from_millis(100)).await;
//!
//! let prompt = "x".repeat(256); // 64 pseudo tokens: 4 blocks
//! reqwest::Client::new()
//!     .post(format!("http://{}/v1/completions", pool.addrs()[0]))
//!     .body(format!(r#"{{"model":"{}","prompt":"{prompt}","max_tokens":2}}"#, serve::DEFAULT_MODEL))
//!     .send()
//!     .await?;
//! let message = sub.recv().await?;
//! assert_eq!(message.get(0).unwrap().as_ref(), endpoints.topic.as_bytes());
//! assert_eq!(decode_sequence(message.get(1).unwrap())?, 0);
//! # Ok(())
//! # }
//! ```

mod cli;
mod config;
mod driver;
mod error;
mod handlers;
mod kv_params;
mod metrics;
mod openai;
mod pd_counters;
mod publisher;
mod request;
mod server;
mod sidecar;

pub use cli::{DEFAULT_PORT_BASE, DEFAULT_SERVERS, KvEventsEncoding, ServeArgs};
pub use config::{
    DEFAULT_KV_EVENTS_BUFFER_STEPS, DEFAULT_KV_EVENTS_PORT_BASE, DEFAULT_KV_EVENTS_QUEUE,
    DEFAULT_MAX_BODY_BYTES, DEFAULT_MAX_MODEL_LEN, DEFAULT_MAX_PENDING, DEFAULT_MAX_TOKENS,
    DEFAULT_MAX_TOKENS_CAP, DEFAULT_MODEL, DEFAULT_PRESET, KvEventsConfig, MAX_SPEED, MIN_SPEED,
    ServeConfig,
};
pub use error::ServeError;
pub use kv_params::{KvTransferParams, engine_id};
pub use metrics::metric_sample;
pub use publisher::{KvEventEndpoints, KvEventStats};
pub use server::{ServeHandle, run, spawn};
pub use sidecar::{
    PREFILL_ADDRESS_HEADER, PREFILL_FALLBACK_HEADER, PREFILL_SERVER_HEADER, PREFILLER_HEADER,
};

/// Response header echoing the `traceparent` the request arrived with (completion routes).
pub const TRACEPARENT_ECHO_HEADER: &str = "x-shepherd-sim-traceparent";
/// Response header naming the server that produced the response: its index in the pool.
pub const SERVER_HEADER: &str = "x-shepherd-sim-server";
/// Response header with the `ip:port` of the server that produced the response.
pub const ADDRESS_HEADER: &str = "x-shepherd-sim-address";
