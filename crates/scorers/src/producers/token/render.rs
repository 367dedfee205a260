//! The `vllm` backend of the `token-producer`: the model server renders the prompt.
//!
//! Upstream's producer posts every request to vLLM's `/v1/completions/render` or
//! `/v1/chat/completions/render` (served by `vllm serve` and by the GPU-less
//! `vllm launch render`) and reads back the token ids. A pick in Shepherd never waits on the
//! network, so the call is made by the adapter before the pick (`shepherd_runtime::render`,
//! on the async side) and its answer left here, keyed by the request's id;
//! [`TokenProducer::prompt_for`](super::TokenProducer::prompt_for) reads it during the pick,
//! and the adapter takes it out afterwards. A request whose render failed or timed out has no
//! entry: consumers fall back as they do without real ids (upstream logs and continues too).
//!
//! ```
//! use shepherd_scorers::producers::token::RenderBackend;
//!
//! let render = RenderBackend::new("http://10.0.0.5:8000/", "meta-llama/Llama-3.1-8B", None, None).unwrap();
//! assert_eq!(render.url("/v1/completions/render"), "http://10.0.0.5:8000/v1/completions/render");
//! render.insert("req-1", vec![1, 2, 3]);
//! assert_eq!(render.get("req-1").as_deref(), Some(&[1, 2, 3][..]));
//! render.forget("req-1");
//! assert!(render.get("req-1").is_none());
//! ```

use std::collections::{HashMap, VecDeque};
use std::sync::Arc;
use std::time::Duration;

use parking_lot::Mutex;
use shepherd_scheduler_core::flow::parse_go_duration;

/// Upstream's default render URL.
pub const DEFAULT_RENDER_URL: &str = "http://localhost:8000";
/// Upstream's default timeout of a text-only render.
pub const DEFAULT_RENDER_TIMEOUT: Duration = Duration::from_secs(5);
/// Upstream's default timeout of a multimodal render.
pub const DEFAULT_RENDER_MM_TIMEOUT: Duration = Duration::from_secs(30);
/// The most renders held at once (requests between their render and their pick); past it the
/// oldest is dropped (that request is picked without real ids).
pub const MAX_HELD_RENDERS: usize = 16_384;

/// Where and how a `token-producer`'s prompts are rendered, and the renders waiting for
/// their pick.
#[derive(Debug)]
pub struct RenderBackend {
    base_url: String,
    model: String,
    timeout: Duration,
    mm_timeout: Duration,
    held: Mutex<Held>,
}

#[derive(Debug, Default)]
struct Held {
    ids: HashMap<String, Arc<[u32]>>,
    order: VecDeque<String>,
}

impl RenderBackend {
    /// A backend posting to `base_url` (a trailing `/` is dropped) for `model`, with the
    /// timeouts given as Go durations (upstream's defaults when `None`). Errors name the bad
    /// parameter.
    pub fn new(
        base_url: &str,
        model: &str,
        timeout: Option<&str>,
        mm_timeout: Option<&str>,
    ) -> Result<Self, (&'static str, String)> {
        let base_url = base_url.trim_end_matches('/');
        let base_url = if base_url.is_empty() {
            DEFAULT_RENDER_URL
        } else {
            base_url
        };
        if !base_url.starts_with("http://") {
            return Err((
                "vllm.url",
                format!(
                    "`{base_url}` must be an http:// URL (upstream's render client does not speak TLS either)"
                ),
            ));
        }
        let duration = |field: &'static str, text: Option<&str>, default: Duration| match text {
            None | Some("") => Ok(default),
            Some(text) => parse_go_duration(text).filter(|d| !d.is_zero()).ok_or((
                field,
                format!("`{text}` is not a positive duration (e.g. \"5s\")"),
            )),
        };
        Ok(RenderBackend {
            base_url: base_url.to_string(),
            model: model.to_string(),
            timeout: duration("vllm.timeout", timeout, DEFAULT_RENDER_TIMEOUT)?,
            mm_timeout: duration("vllm.mmTimeout", mm_timeout, DEFAULT_RENDER_MM_TIMEOUT)?,
            held: Mutex::new(Held::default()),
        })
    }

    /// The render server's base URL.
    pub fn base_url(&self) -> &str {
        &self.base_url
    }

    /// `path` on the render server.
    pub fn url(&self, path: &str) -> String {
        format!("{}{path}", self.base_url)
    }

    /// The model named in render requests (`modelName`: `vllm launch render` wants the base
    /// model's name).
    pub fn model(&self) -> &str {
        &self.model
    }

    /// The timeout of a render with text only.
    pub fn timeout(&self) -> Duration {
        self.timeout
    }

    /// The timeout of a render with media parts.
    pub fn mm_timeout(&self) -> Duration {
        self.mm_timeout
    }

    /// Keeps the token ids rendered for request `id` until its pick reads them.
    pub fn insert(&self, id: &str, ids: Vec<u32>) {
        let mut held = self.held.lock();
        if held.ids.insert(id.to_string(), Arc::from(ids)).is_none() {
            held.order.push_back(id.to_string());
        }
        while held.order.len() > MAX_HELD_RENDERS {
            if let Some(oldest) = held.order.pop_front() {
                held.ids.remove(&oldest);
            }
        }
    }

    /// The token ids rendered for request `id`, if any.
    pub fn get(&self, id: &str) -> Option<Arc<[u32]>> {
        self.held.lock().ids.get(id).cloned()
    }

    /// Drops what was rendered for request `id` (after its pick).
    pub fn forget(&self, id: &str) {
        let mut held = self.held.lock();
        if held.ids.remove(id).is_some()
            && let Some(at) = held.order.iter().rposition(|held_id| held_id == id)
        {
            held.order.remove(at);
        }
    }

    /// How many renders are held.
    pub fn held(&self) -> usize {
        self.held.lock().ids.len()
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    #[test]
    fn defaults_and_bad_settings() {
        let r = RenderBackend::new("", "m", None, None).unwrap();
        assert_eq!(r.base_url(), DEFAULT_RENDER_URL);
        assert_eq!(
            (r.timeout(), r.mm_timeout()),
            (DEFAULT_RENDER_TIMEOUT, DEFAULT_RENDER_MM_TIMEOUT)
        );
        assert_eq!(
            RenderBackend::new("https://x", "m", None, None)
                .unwrap_err()
                .0,
            "vllm.url"
        );
        assert_eq!(
            RenderBackend::new("http://x", "m", Some("soon"), None)
                .unwrap_err()
                .0,
            "vllm.timeout"
        );
        assert_eq!(
            RenderBackend::new("http://x", "m", None, Some("250ms"))
                .unwrap()
                .mm_timeout(),
            Duration::from_millis(250)
        );
    }

    #[test]
    fn held_renders_are_bounded_oldest_first() {
        let r = RenderBackend::new("http://x", "m", None, None).unwrap();
        for i in 0..MAX_HELD_RENDERS + 10 {
            r.insert(&i.to_string(), vec![i as u32]);
        }
        assert_eq!(r.held(), MAX_HELD_RENDERS);
        assert!(r.get("0").is_none());
        assert!(r.get(&(MAX_HELD_RENDERS + 9).to_string()).is_some());
        r.forget(&(MAX_HELD_RENDERS + 9).to_string());
        assert_eq!(r.held(), MAX_HELD_RENDERS - 1);
    }
}
