//! The gateway: its shared state and its routes.
//!
//! | route | answer |
//! |---|---|
//! | `POST /v1/completions`, `/v1/chat/completions`, `/v1/responses`, `/v1/embeddings` | proxied to the endpoint Shepherd picks ([`proxy`]) when the configured parsers take the path (the default list does) |
//! | `POST` to any other path (outside `/debug/`) a configured parser takes: `/v1/messages` (`anthropic-parser`), `/inference/v1/generate` (`vllmhttp-parser`), `/generate` (`sglanghttp-parser`), a path ending in a claimed suffix (`/openai/v1/chat/completions`), or any path at all with a fallback parser listed in `requestHandler.parsers` (`passthrough-parser`; the default list's fallback is not used here: it would expose every POST route of the model servers) | proxied the same way |
//! | `GET /v1/models`, `GET /v1/models/{id}` | the pool's models ([`models`](crate::models)) |
//! | `POST /debug/explain/v1/...` | when `gateway.explain` is on: the pick for a body, with its score breakdown ([`explain`]) |
//! | `/metrics`, `/healthz`, `/readyz`, `/debug/adaptive`, `/debug/config` | the runtime's admin routes, when mounted ([`Gateway::router_with`]) |
//! | anything else | 404 in OpenAI's shape |
//!
//! Which paths the parsers take is decided per request, by the parsers of the config in
//! force, so a reload that changes `requestHandler.parsers` changes the routes too.
//!
//! The `/v1/*` routes, every proxied path and `/debug/explain` check client keys when
//! `gateway.apiKeys` has any, and so do the admin routes mounted here (`/metrics` and
//! `/debug/*`: Prometheus then sends a key as its bearer token), but for the probes
//! `/healthz` and `/readyz`. The admin port itself asks no key: keep it private.

use std::sync::Arc;

use axum::Router;
use axum::extract::{Path, Request, State};
use axum::http::HeaderMap;
use axum::response::{IntoResponse, Response};
use axum::routing::{MethodRouter, get, post};
use shepherd_scheduler_core::reload::ReloadableScheduler;
use shepherd_scheduler_core::request::{ApiKind, ParseLimits, ParserKind};

use crate::body::BodyBudget;
use crate::limit::ConcurrencyLimit;
use crate::models::ModelCatalog;
use crate::stats::Rejection;
use crate::upstream::{self, HttpClient};
use crate::{ApiError, GatewaySettings, GatewayStats, explain, proxy};
use shepherd_runtime::flow::FlowController;
use shepherd_runtime::policies::RequestPolicies;
use shepherd_runtime::telemetry::RequestTracing;
use shepherd_runtime::upstream::UpstreamMetrics;

/// The OpenAI routes proxied through the scheduler, with their API.
pub const INFERENCE_ROUTES: [(&str, ApiKind); 4] = [
    ("/v1/completions", ApiKind::Completions),
    ("/v1/chat/completions", ApiKind::ChatCompletions),
    ("/v1/responses", ApiKind::Responses),
    ("/v1/embeddings", ApiKind::Embeddings),
];

/// The gateway's shared state: cheap to clone, one per server. See the [module docs](self).
///
/// ```no_run
/// use std::sync::Arc;
/// use shepherd_adapters_http::{Gateway, GatewaySettings, GatewayStats};
/// use shepherd_scheduler_core::prelude::*;
/// use shepherd_scorers::{builtin_registry, default_config};
///
/// # async fn run() -> Result<(), Box<dyn std::error::Error>> {
/// let shared = SharedState::new(Arc::new(Pool::new()));
/// shared.pool.set_members(["127.0.0.1:8000", "127.0.0.1:8001"]);
/// let scheduler = ReloadableScheduler::build(&default_config(), &builtin_registry(), shared)?;
/// let gateway = Gateway::new(
///     Arc::new(scheduler),
///     GatewaySettings::default(),
///     Arc::new(GatewayStats::default()),
/// );
/// let listener = tokio::net::TcpListener::bind("127.0.0.1:8080").await?;
/// axum::serve(listener, gateway.router()).await?;
/// # Ok(()) }
/// ```
#[derive(Debug, Clone)]
pub struct Gateway {
    pub(crate) inner: Arc<Inner>,
}

#[derive(Debug, Clone)]
pub(crate) struct Inner {
    pub(crate) scheduler: Arc<ReloadableScheduler>,
    pub(crate) settings: GatewaySettings,
    pub(crate) client: HttpClient,
    pub(crate) models: Arc<ModelCatalog>,
    pub(crate) limit: ConcurrencyLimit,
    pub(crate) flow: Option<FlowController>,
    pub(crate) stats: Arc<GatewayStats>,
    pub(crate) parse_limits: ParseLimits,
    pub(crate) budget: BodyBudget,
    /// The upstream (`llm_d_epp_*`) request families, when recorded.
    pub(crate) upstream: Option<Arc<UpstreamMetrics>>,
    pub(crate) tracing: RequestTracing,
    /// The pool's objectives and model rewrites, when discovery keeps them.
    pub(crate) policies: Option<Arc<RequestPolicies>>,
}

impl Gateway {
    /// A gateway routing with `scheduler`, counting in `stats`.
    pub fn new(
        scheduler: Arc<ReloadableScheduler>,
        settings: GatewaySettings,
        stats: Arc<GatewayStats>,
    ) -> Self {
        let client = upstream::client(&settings);
        let models = Arc::new(ModelCatalog::new(
            client.clone(),
            Arc::clone(&scheduler.shared().pool),
            settings.upstream_keys.clone(),
            settings.models_cache,
            settings.models_timeout,
        ));
        let parse_limits = ParseLimits::default().with_max_body_bytes(settings.max_body_bytes);
        let budget = BodyBudget::new(settings.max_buffered_body_bytes);
        Gateway {
            inner: Arc::new(Inner {
                budget,
                scheduler,
                limit: ConcurrencyLimit::new(settings.max_concurrent_requests),
                flow: None,
                settings,
                client,
                models,
                stats,
                parse_limits,
                upstream: None,
                tracing: RequestTracing::new(),
                policies: None,
            }),
        }
    }

    /// Asks `flow` before scheduling each request: requests wait while the pool is
    /// saturated, and are answered 429 or 503 with `x-shepherd-dropped-reason` when dropped.
    /// Call before the gateway serves (it is the gateway's only copy).
    pub fn with_flow_control(self, flow: FlowController) -> Self {
        let mut inner = (*self.inner).clone();
        inner.flow = Some(flow);
        Gateway {
            inner: Arc::new(inner),
        }
    }

    /// Traces requests with `tracing` (a `gateway.request` span per request when tracing is
    /// on: [`shepherd_runtime::telemetry`]). Call before the gateway serves.
    pub fn with_tracing(self, tracing: RequestTracing) -> Self {
        let mut inner = (*self.inner).clone();
        inner.tracing = tracing;
        Gateway {
            inner: Arc::new(inner),
        }
    }

    /// Records every request in `upstream`'s `llm_d_epp_*` request families (the runtime's
    /// [`upstream_metrics`](shepherd_runtime::RuntimeHandle::upstream_metrics)). Call before
    /// the gateway serves (it is the gateway's only copy).
    pub fn with_upstream_metrics(mut self, upstream: Arc<UpstreamMetrics>) -> Self {
        match Arc::get_mut(&mut self.inner) {
            Some(inner) => inner.upstream = Some(upstream),
            None => {
                tracing::warn!("upstream metrics given to a gateway already shared: not recorded")
            }
        }
        self
    }

    /// Applies the pool's `InferenceObjective` priorities and `InferenceModelRewrite` rules
    /// ([`shepherd_runtime::policies`]) to every request: a rewritten body is what is
    /// proxied. Call before the gateway serves.
    pub fn with_request_policies(self, policies: Arc<RequestPolicies>) -> Self {
        let mut inner = (*self.inner).clone();
        inner.policies = Some(policies);
        Gateway {
            inner: Arc::new(inner),
        }
    }

    /// The flow controller requests go through, if any.
    pub fn flow_control(&self) -> Option<&FlowController> {
        self.inner.flow.as_ref()
    }

    /// The settings in force.
    pub fn settings(&self) -> &GatewaySettings {
        &self.inner.settings
    }

    /// The gateway's counters.
    pub fn stats(&self) -> &Arc<GatewayStats> {
        &self.inner.stats
    }

    /// The scheduler requests are routed with.
    pub fn scheduler(&self) -> &Arc<ReloadableScheduler> {
        &self.inner.scheduler
    }

    /// The pool's model list.
    pub fn models(&self) -> &Arc<ModelCatalog> {
        &self.inner.models
    }

    /// The gateway's routes (the admin routes not included).
    pub fn router(&self) -> Router {
        self.router_with(None)
    }

    /// The gateway's routes, plus `admin` (the runtime's
    /// [`admin_router`](shepherd_runtime::RuntimeHandle::admin_router)) when given.
    pub fn router_with(&self, admin: Option<Router>) -> Router {
        let mut router = Router::new();
        for (path, api) in INFERENCE_ROUTES {
            router = router.route(path, inference(path, api));
        }
        router = router
            .route("/v1/models", openai_method(get(list_models)))
            .route("/v1/models/{*id}", openai_method(get(get_model)));
        if self.inner.settings.explain {
            router = router.route(
                "/debug/explain/{*path}",
                openai_method(post(explain::explain)),
            );
        }
        let mut router = router.fallback(other_path).with_state(self.clone());
        if let Some(admin) = admin {
            // With client keys, what the admin routes show (metrics, the config, the
            // controller's state) takes a key too; the probes stay open.
            let admin = if self.inner.settings.client_keys.is_enabled() {
                admin.route_layer(axum::middleware::from_fn_with_state(
                    self.clone(),
                    admin_key,
                ))
            } else {
                admin
            };
            router = router.merge(admin);
        }
        router
    }

    /// Reads a request body within the gateway's limits ([`crate::body`]); counts the reads
    /// its limits ended.
    pub(crate) async fn read_body(
        &self,
        body: axum::body::Body,
        headers: &HeaderMap,
    ) -> Result<crate::body::ReadBody, ApiError> {
        let inner = &self.inner;
        crate::body::read_body(body, headers, &inner.settings.body_limits(), &inner.budget).await
    }

    /// Checks the client's key; counts and builds the 401 when it is wrong.
    pub(crate) fn authorize(&self, headers: &HeaderMap) -> Result<(), ApiError> {
        if self
            .inner
            .settings
            .client_keys
            .allows(headers.get(axum::http::header::AUTHORIZATION))
        {
            Ok(())
        } else {
            self.inner.stats.rejected(Rejection::Unauthorized);
            Err(ApiError::unauthorized())
        }
    }
}

/// The admin routes that answer without a key even when keys are set: the probes.
const OPEN_ADMIN_PATHS: [&str; 2] = ["/healthz", "/readyz"];

/// Lets an admin request through when it is a probe or carries a client key.
async fn admin_key(
    State(gateway): State<Gateway>,
    request: Request,
    next: axum::middleware::Next,
) -> Response {
    if !OPEN_ADMIN_PATHS.contains(&request.uri().path())
        && let Err(error) = gateway.authorize(request.headers())
    {
        return error.into_response();
    }
    next.run(request).await
}

/// The method router of one inference route.
fn inference(path: &'static str, api: ApiKind) -> MethodRouter<Gateway> {
    openai_method(post(
        move |State(gateway): State<Gateway>, request: Request| async move {
            proxy::proxy(&gateway, api, path, request).await
        },
    ))
}

/// `router` answering other methods with a 405 in OpenAI's shape.
fn openai_method(router: MethodRouter<Gateway>) -> MethodRouter<Gateway> {
    router.fallback(|| async { ApiError::method_not_allowed() })
}

async fn list_models(State(gateway): State<Gateway>, headers: HeaderMap) -> Response {
    if let Err(error) = gateway.authorize(&headers) {
        return error.into_response();
    }
    match gateway.inner.models.list().await {
        Some(list) => axum::Json(list.to_json()).into_response(),
        None => ApiError::unavailable(
            "no_models",
            "No model server answered /v1/models.",
            gateway.inner.settings.retry_after_seconds,
        )
        .into_response(),
    }
}

async fn get_model(
    State(gateway): State<Gateway>,
    Path(id): Path<String>,
    headers: HeaderMap,
) -> Response {
    if let Err(error) = gateway.authorize(&headers) {
        return error.into_response();
    }
    match gateway.inner.models.list().await {
        Some(list) => match list.get(&id) {
            Some(model) => axum::Json(model.clone()).into_response(),
            None => ApiError::unknown_model(&id).into_response(),
        },
        None => ApiError::unavailable(
            "no_models",
            "No model server answered /v1/models.",
            gateway.inner.settings.retry_after_seconds,
        )
        .into_response(),
    }
}

/// The gateway's own path space: never proxied.
const GATEWAY_PATHS: &str = "/debug/";

/// A path without a route of its own: proxied when it is a POST the configured parsers take
/// (outside the gateway's own `/debug/`), else 404.
async fn other_path(State(gateway): State<Gateway>, request: Request) -> Response {
    let path = request.uri().path().to_owned();
    let api = if request.method() == axum::http::Method::POST && !path.starts_with(GATEWAY_PATHS) {
        let scheduler = gateway.inner.scheduler.load();
        let parsers = scheduler.parsers();
        // Forwarding a path unread takes an explicit `passthrough-parser`: the default list's
        // fallback would expose every POST route of the model servers (vLLM's adapter loading
        // and cache reset among them) to the gateway's clients.
        // A gRPC parser's methods are not proxied: the gateway speaks HTTP/1.1 to the model
        // servers, and gRPC needs HTTP/2 (`shepherd-epp` behind Envoy routes them).
        let grpc = parsers
            .resolve(&path)
            .is_some_and(|p| matches!(p.kind, ParserKind::VllmGrpc | ParserKind::VertexAi));
        parsers
            .api(&path)
            .filter(|_| !grpc)
            .filter(|&api| api != ApiKind::Unparsed || !parsers.is_upstream_default())
    } else {
        None
    };
    match api {
        Some(api) => proxy::proxy(&gateway, api, &path, request).await,
        None => ApiError::not_found(&path).into_response(),
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use shepherd_runtime::config::RuntimeConfig;

    use crate::GatewaySettings;

    #[test]
    fn the_documented_example_config_loads() {
        let text = include_str!("../shepherd-gateway.example.yaml");
        let config = RuntimeConfig::from_yaml(text).unwrap();
        assert!(config.warnings().is_empty(), "{:?}", config.warnings());
        assert_eq!(config.endpoints.len(), 4);
        assert_eq!(config.server.http_port, 8080);
        let settings = GatewaySettings::from_config(&config.gateway).unwrap();
        assert_eq!(settings.max_concurrent_requests, Some(512));
        assert!(settings.explain && settings.admin_routes);
        assert!(!settings.client_keys.is_enabled());
    }
}
