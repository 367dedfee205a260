//! The `token-producer`'s `vllm` backend, on the async side: before a pick, the adapter asks
//! the model server to render the request's prompt (`POST /v1/completions/render` or
//! `/v1/chat/completions/render`, vLLM's routes, also served by `vllm launch render` and by
//! `shepherd-sim serve`), and leaves the token ids where the pick reads them
//! ([`RenderBackend`]). The pick itself never waits on the network.
//!
//! A render that fails (refused, timed out, an error status, an answer that is not token ids)
//! leaves the request without real ids: the consumers fall back as they do without them, and
//! a throttled log line says why, as upstream logs and continues. Requests that carry token
//! ids, and APIs the render routes do not cover, are not sent.
//!
//! ```no_run
//! # async fn example(scheduler: &shepherd_scheduler_core::scheduler::Scheduler,
//! #                  request: &shepherd_scheduler_core::request::InferenceRequest, body: &[u8]) {
//! // Held until the pick is made; dropping it forgets the render.
//! let rendered = shepherd_runtime::render::prepare(scheduler, request, body).await;
//! let decision = scheduler.schedule(request);
//! drop(rendered);
//! # }
//! ```

use std::sync::{Arc, OnceLock};
use std::time::Duration;

use serde::Deserialize;
use shepherd_scheduler_core::request::{ApiKind, InferenceRequest, Prompt};
use shepherd_scheduler_core::scheduler::Scheduler;
use shepherd_scorers::producers::TokenProducer;
use shepherd_scorers::producers::token::RenderBackend;

use crate::throttle::{LOG_EVERY, Throttle};

/// vLLM's completions render route.
pub const COMPLETIONS_RENDER_PATH: &str = "/v1/completions/render";
/// vLLM's chat completions render route.
pub const CHAT_RENDER_PATH: &str = "/v1/chat/completions/render";
/// The largest render answer read (token ids of a very long prompt fit many times over).
pub const MAX_RENDER_RESPONSE_BYTES: usize = 32 << 20;

/// Renders held for one request's pick; dropping it forgets them.
#[derive(Debug)]
pub struct Rendered {
    producers: Vec<Arc<TokenProducer>>,
    id: String,
}

impl Rendered {
    /// How many render backends hold ids for this request.
    pub fn count(&self) -> usize {
        self.producers.len()
    }
}

impl Drop for Rendered {
    fn drop(&mut self) {
        for producer in &self.producers {
            if let Some(render) = producer.render_backend() {
                render.forget(&self.id);
            }
        }
    }
}

/// Renders `request` (whose body is `body`) with every `token-producer` of `scheduler` that
/// has the `vllm` backend. `None` when there is none, or nothing to render.
pub async fn prepare(
    scheduler: &Scheduler,
    request: &InferenceRequest,
    body: &[u8],
) -> Option<Rendered> {
    let path = match (&request.prompt, request.api) {
        (Prompt::Tokens(_), _) => return None,
        (_, ApiKind::ChatCompletions) => CHAT_RENDER_PATH,
        (_, ApiKind::Completions) => COMPLETIONS_RENDER_PATH,
        _ => return None,
    };
    let producers: Vec<Arc<TokenProducer>> = scheduler
        .resources()
        .all::<TokenProducer>()
        .into_iter()
        .map(|(_, producer)| producer)
        .filter(|producer| producer.render_backend().is_some())
        .collect();
    if producers.is_empty() {
        return None;
    }
    let Ok(serde_json::Value::Object(mut payload)) = serde_json::from_slice(body) else {
        return None; // the parser took it; a body that is not an object has nothing to render
    };
    let mut rendered = Vec::with_capacity(producers.len());
    for producer in producers {
        let Some(backend) = producer.render_backend() else {
            continue;
        };
        payload.insert("model".into(), backend.model().into());
        let timeout = if path == CHAT_RENDER_PATH && has_content_parts(&payload) {
            backend.mm_timeout()
        } else {
            backend.timeout()
        };
        match render(backend, path, &payload, timeout).await {
            Ok(ids) => {
                backend.insert(&request.id, ids);
                rendered.push(producer);
            }
            Err(reason) => {
                if let Some(held_back) = failures().allow() {
                    tracing::warn!(
                        url = %backend.url(path),
                        %reason,
                        held_back,
                        "the token-producer's render failed; the request is picked without its token ids"
                    );
                }
            }
        }
    }
    Some(Rendered {
        producers: rendered,
        id: request.id.clone(),
    })
}

/// Whether some message's content is an array of parts (upstream gives those the multimodal
/// timeout).
fn has_content_parts(payload: &serde_json::Map<String, serde_json::Value>) -> bool {
    payload
        .get("messages")
        .and_then(serde_json::Value::as_array)
        .is_some_and(|messages| {
            messages.iter().any(|m| {
                m.get("content")
                    .is_some_and(|c| c.as_array().is_some_and(|a| !a.is_empty()))
            })
        })
}

#[derive(Deserialize)]
struct RenderAnswer {
    token_ids: Vec<u32>,
}

#[derive(Deserialize)]
#[serde(untagged)]
enum RenderBody {
    /// `/v1/completions/render`: one answer per prompt.
    Many(Vec<RenderAnswer>),
    /// `/v1/chat/completions/render`.
    One(RenderAnswer),
}

async fn render(
    backend: &RenderBackend,
    path: &str,
    payload: &serde_json::Map<String, serde_json::Value>,
    timeout: Duration,
) -> Result<Vec<u32>, String> {
    let attempt = async {
        let mut response = client()
            .post(backend.url(path))
            .json(payload)
            .send()
            .await
            .map_err(|e| format!("request failed: {e}"))?;
        let status = response.status();
        let mut bytes = Vec::new();
        while let Some(chunk) = response
            .chunk()
            .await
            .map_err(|e| format!("reading the answer failed: {e}"))?
        {
            if bytes.len() + chunk.len() > MAX_RENDER_RESPONSE_BYTES {
                return Err(format!("answer over {MAX_RENDER_RESPONSE_BYTES} bytes"));
            }
            bytes.extend_from_slice(&chunk);
        }
        if !status.is_success() {
            let snippet = String::from_utf8_lossy(&bytes[..bytes.len().min(256)]).into_owned();
            return Err(format!("status {status}: {snippet}"));
        }
        match serde_json::from_slice::<RenderBody>(&bytes) {
            Ok(RenderBody::One(answer)) => Ok(answer.token_ids),
            Ok(RenderBody::Many(mut answers)) if answers.len() == 1 => {
                Ok(answers.swap_remove(0).token_ids)
            }
            Ok(RenderBody::Many(answers)) => Err(format!(
                "{} answers for one request (a prompt array is not rendered)",
                answers.len()
            )),
            Err(e) => Err(format!("the answer is not token ids: {e}")),
        }
    };
    tokio::time::timeout(timeout, attempt)
        .await
        .map_err(|_| format!("no answer within {timeout:?}"))?
}

fn client() -> &'static reqwest::Client {
    static CLIENT: OnceLock<reqwest::Client> = OnceLock::new();
    CLIENT.get_or_init(|| {
        reqwest::Client::builder()
            .no_proxy()
            .pool_max_idle_per_host(16)
            .pool_idle_timeout(Duration::from_secs(90))
            .build()
            .unwrap_or_default()
    })
}

fn failures() -> &'static Throttle {
    static FAILURES: OnceLock<Throttle> = OnceLock::new();
    FAILURES.get_or_init(|| Throttle::new(LOG_EVERY))
}
