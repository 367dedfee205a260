//! The HTTP routes of one simulated server.
//!
//! | route | answer |
//! |---|---|
//! | `POST /v1/completions`, `POST /v1/chat/completions` | a completion, JSON or SSE |
//! | `GET /v1/models` | the served model |
//! | `GET /metrics` | Prometheus text with vLLM's metric names |
//! | `GET /health` | 200 |
//! | `POST /reset_prefix_cache` | 200 when the engine dropped its prefix cache, 409 while blocks are in use |
//!
//! Every response, errors included, carries [`SERVER_HEADER`] (the server's index) and
//! [`ADDRESS_HEADER`] (its `ip:port`).

use std::sync::Arc;
use std::time::Duration;

use axum::Router;
use axum::body::{Body, Bytes};
use axum::extract::{DefaultBodyLimit, State};
use axum::http::{HeaderMap, HeaderValue, StatusCode, header};
use axum::middleware;
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use futures_util::stream;
use serde_json::json;
use tokio::sync::{mpsc, oneshot};

use crate::engine::EngineRequest;

use super::driver::{Command, Shared, Submission, Ticket, Update};
use super::kv_params::{self, KvTransferParams};
use super::openai::{self, ApiError, Reply, Usage};
use super::pd_counters::PdCounters;
use super::request::{self, SimRequest};
use super::sidecar::{
    self, PREFILL_ADDRESS_HEADER, PREFILL_FALLBACK_HEADER, PREFILL_SERVER_HEADER, PREFILLER_HEADER,
};
use super::{ADDRESS_HEADER, SERVER_HEADER, metrics};

/// What every handler of one server holds.
#[derive(Debug, Clone)]
pub(crate) struct Server {
    /// State shared with the driver.
    pub(crate) shared: Arc<Shared>,
    /// The driver's inbox.
    pub(crate) submit: mpsc::Sender<Command>,
    /// The routing sidecar's client for remote prefills.
    pub(crate) client: reqwest::Client,
}

/// The routes of `server`.
pub(crate) fn router(server: Server) -> Router {
    let names = ServerNames {
        index: HeaderValue::from(server.shared.index),
        address: HeaderValue::from_str(&server.shared.addr.to_string())
            .unwrap_or_else(|_| HeaderValue::from_static("unknown")),
    };
    // The parser reports bodies over the limit (413); let them through to it.
    let body_limit = server.shared.config.max_body_bytes.saturating_add(1);
    Router::new()
        .route("/v1/completions", post(completions))
        .route("/v1/chat/completions", post(chat_completions))
        .route("/v1/completions/render", post(completions_render))
        .route("/v1/chat/completions/render", post(chat_completions_render))
        .route("/v1/models", get(models))
        .route("/metrics", get(render_metrics))
        .route("/health", get(health))
        .route("/reset_prefix_cache", post(reset_prefix_cache))
        .fallback(not_found)
        .layer(DefaultBodyLimit::max(body_limit))
        .with_state(server)
        .layer(middleware::map_response_with_state(names, name_server))
}

#[derive(Debug, Clone)]
struct ServerNames {
    index: HeaderValue,
    address: HeaderValue,
}

async fn name_server(State(names): State<ServerNames>, mut response: Response) -> Response {
    let headers = response.headers_mut();
    headers.insert(SERVER_HEADER, names.index);
    headers.insert(ADDRESS_HEADER, names.address);
    response
}

async fn completions(State(server): State<Server>, headers: HeaderMap, body: Bytes) -> Response {
    serve(&server, "/v1/completions", &headers, &body).await
}

async fn chat_completions(
    State(server): State<Server>,
    headers: HeaderMap,
    body: Bytes,
) -> Response {
    serve(&server, "/v1/chat/completions", &headers, &body).await
}

/// vLLM's `/v1/completions/render`: the prompt's token ids, one answer per prompt (this
/// server's pseudo tokens, the ids its KV-cache events hash).
async fn completions_render(State(server): State<Server>, body: Bytes) -> Response {
    match request::render_tokens("/v1/completions", &body, &server.shared.config) {
        Ok(ids) => axum::Json(json!([{ "token_ids": ids }])).into_response(),
        Err(error) => error.into_response(),
    }
}

/// vLLM's `/v1/chat/completions/render`: the rendered conversation's token ids.
async fn chat_completions_render(State(server): State<Server>, body: Bytes) -> Response {
    match request::render_tokens("/v1/chat/completions", &body, &server.shared.config) {
        Ok(ids) => axum::Json(json!({ "token_ids": ids })).into_response(),
        Err(error) => error.into_response(),
    }
}

/// The routing sidecar's part ([`sidecar`]): a request naming a prefill server is prefilled
/// there first (or, when that fails, served aggregated); any other goes to [`generate`].
async fn serve(server: &Server, path: &str, headers: &HeaderMap, body: &[u8]) -> Response {
    let mut response = serve_request(server, path, headers, body).await;
    if let Some(parent) = headers.get("traceparent") {
        response
            .headers_mut()
            .insert(super::TRACEPARENT_ECHO_HEADER, parent.clone());
    }
    response
}

async fn serve_request(server: &Server, path: &str, headers: &HeaderMap, body: &[u8]) -> Response {
    let shared = &server.shared;
    let target = headers
        .get(PREFILLER_HEADER)
        .filter(|_| shared.config.has_sidecar(shared.index));
    let Some(target) = target else {
        return generate(server, path, body).await;
    };
    let timeout = shared
        .config
        .kv_transfer
        .prefill_timeout_s
        .and_then(|s| Duration::try_from_secs_f64(s / shared.config.speed).ok());
    match sidecar::prefill(&server.client, path, body, target, timeout).await {
        Ok(prefilled) => {
            let mut response = generate(server, path, &prefilled.body).await;
            let out = response.headers_mut();
            if let Some(v) = prefilled.server {
                out.insert(PREFILL_SERVER_HEADER, v);
            }
            if let Some(v) = prefilled.address {
                out.insert(PREFILL_ADDRESS_HEADER, v);
            }
            response
        }
        Err(reason) => {
            eprintln!(
                "shepherd-sim serve: server {}: remote prefill failed, serving aggregated: {reason}",
                shared.index
            );
            PdCounters::add(&shared.pd.fallbacks, 1);
            let mut response = generate(server, path, body).await;
            let reason: String = reason
                .chars()
                .filter(|c| c.is_ascii() && !c.is_ascii_control())
                .collect();
            if let Ok(v) = HeaderValue::from_str(&reason) {
                response.headers_mut().insert(PREFILL_FALLBACK_HEADER, v);
            }
            response
        }
    }
}

async fn generate(server: &Server, path: &str, body: &[u8]) -> Response {
    let shared = &server.shared;
    let mut req = match request::prepare(path, body, &shared.config) {
        Ok(req) => req,
        Err(e) => return e.into_response(),
    };
    let remote = req.kv_transfer.take().unwrap_or_default();
    if remote.do_remote_decode && !shared.config.prefills_for_remote(shared.index) {
        return ApiError::bad_request(format!(
            "server {} (role {}) does not prefill for a remote decode",
            shared.index,
            shared.config.role(shared.index).unwrap_or("-"),
        ))
        .into_response();
    }
    let Some(ticket) = shared.admit() else {
        return ApiError::overloaded().into_response();
    };
    if remote.do_remote_prefill && !read_remote_kv(server, &req).await {
        return ApiError::new(StatusCode::INTERNAL_SERVER_ERROR, "the engine stopped")
            .into_response();
    }
    let id = shared.next_id();
    let (updates, rx) = mpsc::channel(req.output_tokens as usize + 2);
    let submission = Submission {
        request: EngineRequest {
            id,
            prompt_len: req.prompt_tokens,
            output_len: req.output_tokens,
            block_hashes: std::mem::take(&mut req.block_hashes),
            tokens: Some(Arc::clone(&req.tokens)),
        },
        ends_by_length: req.finish_reason == "length",
        updates,
        transferred: remote.do_remote_prefill,
    };
    if server.submit.try_send(Command::Submit(submission)).is_err() {
        return ApiError::overloaded().into_response();
    }
    let reply = Reply::new(
        req.api,
        shared.index,
        id,
        req.model.clone(),
        req.finish_reason,
    );
    if req.stream {
        stream_response(reply, &req, rx, ticket)
    } else {
        // A prefill for a remote decode answers where its KV blocks are.
        let kv_params = remote.do_remote_decode.then(|| {
            let blocks = req
                .prompt_tokens
                .div_ceil(shared.config.engine.block_size.max(1));
            KvTransferParams::prefilled(shared.index, shared.addr, blocks)
        });
        let response = whole_response(reply, &req, rx, ticket, kv_params).await;
        if remote.do_remote_decode && response.status().is_success() {
            PdCounters::add(&shared.pd.prefills_for_remote, 1);
        }
        response
    }
}

/// Reads `req`'s prompt KV from its remote prefill: the prompt tokens this server's prefix
/// cache lacks, over the [`KvTransfer`](crate::engine::KvTransfer) link (wall time scaled by
/// the speed). `false` when the engine is gone.
async fn read_remote_kv(server: &Server, req: &SimRequest) -> bool {
    let shared = &server.shared;
    let (reply, answer) = oneshot::channel();
    let prompt_blocks = (req.prompt_tokens / shared.config.engine.block_size.max(1)) as usize;
    let hashes = req.block_hashes[..prompt_blocks.min(req.block_hashes.len())].to_vec();
    if server
        .submit
        .send(Command::CachedPrefix(hashes, reply))
        .await
        .is_err()
    {
        return false;
    }
    let Ok(cached_blocks) = answer.await else {
        return false;
    };
    let cached = (cached_blocks as u64 * u64::from(shared.config.engine.block_size))
        .min(u64::from(req.prompt_tokens)) as u32;
    let moved = req.prompt_tokens - cached;
    let nanos = shared.config.kv_transfer.transfer_nanos(moved);
    if let Ok(wall) = Duration::try_from_secs_f64(nanos as f64 / 1e9 / shared.config.speed) {
        tokio::time::sleep(wall).await;
    }
    PdCounters::add(&shared.pd.remote_prefills, 1);
    PdCounters::add(&shared.pd.transferred_tokens, u64::from(moved));
    true
}

/// Waits for every token, then answers the whole completion.
async fn whole_response(
    reply: Reply,
    req: &SimRequest,
    mut rx: mpsc::Receiver<Update>,
    _ticket: Ticket,
    kv_params: Option<serde_json::Value>,
) -> Response {
    loop {
        match rx.recv().await {
            Some(Update::Tokens(_)) => {}
            Some(Update::Done { cached_tokens }) => {
                let usage = Usage {
                    prompt_tokens: req.prompt_tokens,
                    completion_tokens: req.output_tokens,
                    cached_tokens,
                };
                let mut body = reply.full(usage);
                if let (Some(params), Some(object)) = (kv_params, body.as_object_mut()) {
                    object.insert(kv_params::FIELD.to_owned(), params);
                }
                return axum::Json(body).into_response();
            }
            Some(Update::Failed(message)) => {
                return ApiError::bad_request(message).into_response();
            }
            None => {
                return ApiError::new(StatusCode::INTERNAL_SERVER_ERROR, "the engine stopped")
                    .into_response();
            }
        }
    }
}

/// Where a streamed response is.
struct StreamState {
    reply: Reply,
    rx: mpsc::Receiver<Update>,
    prompt_tokens: u32,
    output_tokens: u32,
    include_usage: bool,
    sent: u32,
    /// The request finished: `[DONE]` comes next.
    ending: bool,
    /// `[DONE]` was sent.
    over: bool,
    /// Held until the stream is dropped (finished, or the client went away).
    _ticket: Ticket,
}

/// Answers SSE events as the driver produces tokens: one event per engine step that
/// produced a token, then the usage event when asked for, then `[DONE]`. Dropping the body
/// (the client went away) drops the receiver, and the driver aborts the request.
fn stream_response(
    reply: Reply,
    req: &SimRequest,
    rx: mpsc::Receiver<Update>,
    ticket: Ticket,
) -> Response {
    let state = StreamState {
        reply,
        rx,
        prompt_tokens: req.prompt_tokens,
        output_tokens: req.output_tokens,
        include_usage: req.include_usage,
        sent: 0,
        ending: false,
        over: false,
        _ticket: ticket,
    };
    let events = stream::unfold(state, |mut s| async move {
        if s.over {
            return None;
        }
        if s.ending {
            s.over = true;
            return Some((Ok::<_, std::io::Error>(Bytes::from_static(openai::DONE)), s));
        }
        let event = match s.rx.recv().await? {
            Update::Tokens(n) => {
                let first = s.sent == 0;
                s.sent = s.sent.saturating_add(n);
                s.reply.chunk(n, first, s.sent >= s.output_tokens)
            }
            Update::Done { cached_tokens } if s.include_usage => {
                s.ending = true;
                s.reply.usage_chunk(Usage {
                    prompt_tokens: s.prompt_tokens,
                    completion_tokens: s.sent,
                    cached_tokens,
                })
            }
            Update::Done { .. } => {
                s.over = true;
                Bytes::from_static(openai::DONE)
            }
            Update::Failed(message) => {
                s.ending = true;
                let error = ApiError::bad_request(message).body();
                Bytes::from(format!("data: {error}\n\n"))
            }
        };
        Some((Ok(event), s))
    });
    Response::builder()
        .header(header::CONTENT_TYPE, "text/event-stream; charset=utf-8")
        .header(header::CACHE_CONTROL, "no-cache")
        .body(Body::from_stream(events))
        .unwrap_or_else(|_| StatusCode::INTERNAL_SERVER_ERROR.into_response())
}

async fn models(State(server): State<Server>) -> Response {
    let config = &server.shared.config;
    let created = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_secs());
    // vLLM lists every served name, each rooted at the model.
    let data: Vec<serde_json::Value> = std::iter::once(&config.model)
        .chain(&config.aliases)
        .map(|id| {
            json!({
                "id": id,
                "object": "model",
                "created": created,
                "owned_by": "vllm",
                "root": config.model,
                "parent": null,
                "max_model_len": config.max_model_len,
            })
        })
        .collect();
    axum::Json(json!({"object": "list", "data": data})).into_response()
}

async fn render_metrics(State(server): State<Server>) -> Response {
    let text = metrics::render(
        &server.shared.config.model,
        &server.shared.gauges(),
        &server.shared.pd,
    );
    ([(header::CONTENT_TYPE, metrics::CONTENT_TYPE)], text).into_response()
}

/// vLLM's dev-mode route (`VLLM_SERVER_DEV_MODE=1`): the engine drops every cached block
/// hash when no block is in use (publishing `AllBlocksCleared`). vLLM answers 200 with an
/// empty body either way (it only logs a failure); the simulator answers 409 when blocks are
/// in use, so a test knows. Query parameters (`reset_running_requests`, `reset_external`)
/// are ignored.
async fn reset_prefix_cache(State(server): State<Server>) -> Response {
    let (reply, answer) = oneshot::channel();
    if server
        .submit
        .try_send(Command::ResetPrefixCache(reply))
        .is_err()
    {
        return ApiError::overloaded().into_response();
    }
    match answer.await {
        Ok(true) => StatusCode::OK.into_response(),
        Ok(false) => ApiError::new(
            StatusCode::CONFLICT,
            "Failed to reset prefix cache: some KV blocks are still in use",
        )
        .into_response(),
        Err(_) => {
            ApiError::new(StatusCode::INTERNAL_SERVER_ERROR, "the engine stopped").into_response()
        }
    }
}

async fn health() -> StatusCode {
    StatusCode::OK
}

async fn not_found() -> Response {
    ApiError::new(StatusCode::NOT_FOUND, "Not Found").into_response()
}
