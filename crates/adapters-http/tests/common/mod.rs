//! What the gateway's integration tests share: simulated vLLM servers, a gateway over them
//! on 127.0.0.1 port 0 (with a completion hook that records how each request ended), a tiny
//! upstream that echoes what it received, and a port nobody listens on.
#![allow(
    dead_code,
    unused_imports,
    unreachable_pub,
    clippy::unwrap_used,
    clippy::expect_used
)]

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use axum::Router;
use axum::http::{HeaderMap, StatusCode};
use axum::response::IntoResponse;
use axum::routing::{get, post};
use parking_lot::Mutex;
use shepherd_adapters_http::GatewayServer;
use shepherd_runtime::RuntimeOptions;
use shepherd_runtime::config::RuntimeConfig;
use shepherd_scheduler_core::completion::{
    CompletedRequest, Completion, CompletionHook, Outcome, Usage,
};
use shepherd_scheduler_core::config::PluginSpec;
use shepherd_scheduler_core::plugin::PluginInstance;
use shepherd_scorers::builtin_registry;
use shepherd_sim::serve::{self, ServeConfig, ServeHandle};

pub use shepherd_sim::serve::{DEFAULT_MODEL as MODEL, SERVER_HEADER};

/// How a request ended, as the completion hook saw it.
#[allow(unused_imports)]
pub use shepherd_test_util::{CompletionRecorder as Recorder, Ended};

/// `n` simulated vLLM servers at `speed`.
pub async fn sims(n: usize, speed: f64) -> ServeHandle {
    let mut config = ServeConfig::ephemeral(n);
    config.speed = speed;
    serve::spawn(config).await.unwrap()
}

/// A loopback address that refuses connections.
pub async fn dead_addr() -> SocketAddr {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    drop(listener);
    addr
}

/// A gateway in-process, and what a test reads of it.
pub struct TestGateway {
    pub server: GatewayServer,
    pub recorder: Arc<Recorder>,
    pub url: String,
    pub http: reqwest::Client,
}

/// How to start a [`TestGateway`].
pub struct Setup<'a> {
    pub endpoints: Vec<SocketAddr>,
    /// Each endpoint's `llm-d.ai/role` label, when given (aligned with `endpoints`).
    pub roles: Vec<Option<&'a str>>,
    /// More YAML sections (`gateway:`, `scheduler:`, ...).
    pub yaml: &'a str,
    pub scrape: bool,
}

impl<'a> Setup<'a> {
    pub fn new(endpoints: impl IntoIterator<Item = SocketAddr>) -> Self {
        Setup {
            endpoints: endpoints.into_iter().collect(),
            roles: Vec::new(),
            yaml: "",
            scrape: true,
        }
    }

    pub fn yaml(mut self, yaml: &'a str) -> Self {
        self.yaml = yaml;
        self
    }

    /// Labels the endpoints with these roles, in order.
    pub fn roles(mut self, roles: &[Option<&'a str>]) -> Self {
        self.roles = roles.to_vec();
        self
    }

    pub fn without_scraping(mut self) -> Self {
        self.scrape = false;
        self
    }

    pub async fn start(self) -> TestGateway {
        let endpoints: Vec<String> = self
            .endpoints
            .iter()
            .enumerate()
            .map(|(i, a)| match self.roles.get(i).copied().flatten() {
                Some(role) => format!("{{address: \"{a}\", labels: {{llm-d.ai/role: {role}}}}}"),
                None => format!("\"{a}\""),
            })
            .collect();
        let yaml = format!(
            "endpoints: [{}]\nserver: {{httpPort: 0, metricsPort: 0}}\nscraping: {{intervalMs: 20}}\n{}",
            endpoints.join(", "),
            self.yaml
        );
        let mut config = RuntimeConfig::from_yaml(&yaml).unwrap();
        let recorder = Arc::new(Recorder::default());
        let mut registry = builtin_registry();
        let hook = Arc::clone(&recorder);
        registry.register("test-recorder", move |_args| {
            Ok(PluginInstance::default().with_completion_hook(hook.clone()))
        });
        config.policy.plugins.push(PluginSpec {
            plugin_type: "test-recorder".into(),
            name: None,
            parameters: serde_json::Value::Null,
        });
        let options = RuntimeOptions {
            registry: Some(registry),
            serve_admin: false,
            scrape: self.scrape,
            ..RuntimeOptions::default()
        };
        let server = GatewayServer::start(config, options).await.unwrap();
        let url = format!("http://{}", server.local_addr());
        TestGateway {
            server,
            recorder,
            url,
            http: reqwest::Client::new(),
        }
    }
}

impl TestGateway {
    pub fn url(&self, path: &str) -> String {
        format!("{}{path}", self.url)
    }

    /// POSTs `body` (JSON) to `path`.
    pub async fn post(&self, path: &str, body: &serde_json::Value) -> reqwest::Response {
        self.http
            .post(self.url(path))
            .json(body)
            .send()
            .await
            .unwrap()
    }

    /// Waits (up to 5 s) until nothing is in flight, in the scheduler and the gateway.
    pub async fn wait_idle(&self) {
        for _ in 0..500 {
            if self.server.runtime().in_flight() == 0
                && self.server.gateway().stats().in_flight() == 0
            {
                return;
            }
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
        panic!(
            "still in flight: scheduler {}, gateway {}",
            self.server.runtime().in_flight(),
            self.server.gateway().stats().in_flight()
        );
    }

    /// Waits (up to 5 s) until every endpoint has fresh metrics.
    pub async fn wait_scraped(&self) {
        for _ in 0..500 {
            let scheduler = self.server.runtime().scheduler().load();
            let pool = scheduler.pool();
            let now = pool.clock().now();
            let bound = scheduler.staleness_bound();
            if pool
                .load()
                .endpoints()
                .iter()
                .all(|e| !e.load_metrics().is_stale(now, bound))
            {
                return;
            }
            drop(scheduler);
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
        panic!("the endpoints' metrics never became fresh");
    }

    pub async fn metrics(&self) -> String {
        self.http
            .get(self.url("/metrics"))
            .send()
            .await
            .unwrap()
            .text()
            .await
            .unwrap()
    }
}

/// A completion request body.
pub fn completion(prompt: &str, max_tokens: u32, stream: bool) -> serde_json::Value {
    serde_json::json!({
        "model": MODEL,
        "prompt": prompt,
        "max_tokens": max_tokens,
        "stream": stream,
    })
}

/// Checks an OpenAI-shaped error answer and returns its body.
pub async fn expect_error(
    response: reqwest::Response,
    status: u16,
    code: &str,
) -> serde_json::Value {
    assert_eq!(response.status().as_u16(), status, "{response:?}");
    assert_eq!(
        response.headers()["content-type"],
        "application/json",
        "{response:?}"
    );
    let body: serde_json::Value = response.json().await.unwrap();
    let error = &body["error"];
    assert!(
        error["message"].as_str().is_some_and(|m| !m.is_empty()),
        "{body}"
    );
    assert!(error["type"].as_str().is_some(), "{body}");
    assert!(error.get("param").is_some(), "{body}");
    assert_eq!(error["code"], code, "{body}");
    body
}

/// What [`echo_upstream`] saw of one request.
#[derive(Debug, Clone)]
pub struct Seen {
    pub path: String,
    pub headers: HeaderMap,
    pub body: String,
}

/// A fake model server: `/v1/completions` answers a fixed completion with usage (or the
/// status in the body's `"status"`), `/v1/models` lists `model-a`; every request is recorded.
pub async fn echo_upstream() -> (SocketAddr, Arc<Mutex<Vec<Seen>>>) {
    let seen: Arc<Mutex<Vec<Seen>>> = Arc::default();
    let record = Arc::clone(&seen);
    let completions = post(
        move |uri: axum::http::Uri, headers: HeaderMap, body: String| {
            let record = Arc::clone(&record);
            async move {
                record.lock().push(Seen {
                    path: uri.to_string(),
                    headers,
                    body: body.clone(),
                });
                let asked: serde_json::Value = serde_json::from_str(&body).unwrap_or_default();
                if let Some(status) = asked["status"].as_u64() {
                    let status = StatusCode::from_u16(status as u16).unwrap();
                    return (status, axum::Json(serde_json::json!({"error": {"message": "asked for it", "type": "server_error", "param": null, "code": null}}))).into_response();
                }
                axum::Json(serde_json::json!({
                    "id": "cmpl-echo", "object": "text_completion", "model": "model-a",
                    "choices": [{"index": 0, "text": "echo", "finish_reason": "stop"}],
                    "usage": {"prompt_tokens": 3, "completion_tokens": 1, "total_tokens": 4}
                }))
                .into_response()
            }
        },
    );
    let models = get(|headers: HeaderMap| async move {
        let _ = headers;
        axum::Json(
            serde_json::json!({"object": "list", "data": [{"id": "model-a", "object": "model"}]}),
        )
    });
    let app = Router::new()
        .route("/v1/completions", completions.clone())
        .route("/v1/chat/completions", completions.clone())
        .route("/inference/v1/generate", completions.clone())
        .route("/v1/messages", completions.clone())
        .route("/custom/endpoint", completions)
        .route("/v1/models", models);
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(async move { axum::serve(listener, app).await });
    (addr, seen)
}
