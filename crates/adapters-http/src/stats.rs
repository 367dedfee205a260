//! The gateway's own counters, exported on `/metrics` next to the runtime's.
//!
//! | metric | labels | what |
//! |---|---|---|
//! | `shepherd_gateway_requests_total` | `api` | requests received on the inference routes (`completions`, `chat_completions`, `responses`, `embeddings`, `messages`, `vllm_generate`, `sglang_generate`, `unparsed`) |
//! | `shepherd_gateway_rejections_total` | `reason` | requests the gateway answered itself (`unauthorized`, `rate_limited`, `body_too_large`, `bad_request`, `unknown_model`, `no_endpoint`, `upstream_unreachable`, `upstream_timeout`, `internal`, `flow_control`: dropped by flow control, whose `shepherd_flow_dropped_total` has the reason) |
//! | `shepherd_gateway_responses_total` | `class` | responses proxied from model servers, by status class (`2xx` … `5xx`) |
//! | `shepherd_gateway_upstream_errors_total` | `stage` | connections to model servers that failed `before_response` (the request moved to a fallback, or failed) or `mid_stream` |
//! | `shepherd_gateway_client_disconnects_total` | | responses abandoned by their client before the end |
//! | `shepherd_gateway_usage_tokens_total` | `kind` | `prompt`, `completion` and `cached` tokens from the responses' `usage` |
//! | `shepherd_gateway_in_flight_requests` | | requests admitted and not yet ended |
//!
//! Counting a request on the request path is a relaxed atomic add, nothing more.
//!
//! ```
//! use shepherd_adapters_http::GatewayStats;
//! use shepherd_adapters_http::stats::Rejection;
//! use shepherd_scheduler_core::metrics::render_prometheus;
//!
//! let stats = GatewayStats::default();
//! stats.rejected(Rejection::RateLimited);
//! let text = render_prometheus(&[&stats]);
//! assert!(text.contains("shepherd_gateway_rejections_total{reason=\"rate_limited\"} 1"));
//! ```

use std::sync::atomic::{AtomicI64, AtomicU64, Ordering};

use shepherd_scheduler_core::completion::Usage;
use shepherd_scheduler_core::metrics::{MetricDesc, MetricsSource, MetricsVisitor};
use shepherd_scheduler_core::request::ApiKind;

const REQUESTS: MetricDesc<'static> = MetricDesc::new(
    "shepherd_gateway_requests_total",
    "Requests received on the gateway's inference routes, by API.",
);
const REJECTIONS: MetricDesc<'static> = MetricDesc::new(
    "shepherd_gateway_rejections_total",
    "Requests the gateway answered itself, by reason.",
);
const RESPONSES: MetricDesc<'static> = MetricDesc::new(
    "shepherd_gateway_responses_total",
    "Responses proxied from model servers, by status class.",
);
const UPSTREAM_ERRORS: MetricDesc<'static> = MetricDesc::new(
    "shepherd_gateway_upstream_errors_total",
    "Failed exchanges with model servers: before any response byte (retried on a fallback when one is left) or mid-stream.",
);
const DISCONNECTS: MetricDesc<'static> = MetricDesc::new(
    "shepherd_gateway_client_disconnects_total",
    "Responses abandoned by their client before the end.",
);
const USAGE: MetricDesc<'static> = MetricDesc::new(
    "shepherd_gateway_usage_tokens_total",
    "Tokens reported in the usage of proxied responses, by kind.",
);
const IN_FLIGHT: MetricDesc<'static> = MetricDesc::new(
    "shepherd_gateway_in_flight_requests",
    "Requests admitted by the gateway and not yet ended.",
);

const APIS: [ApiKind; 8] = [
    ApiKind::Completions,
    ApiKind::ChatCompletions,
    ApiKind::Responses,
    ApiKind::Embeddings,
    ApiKind::Messages,
    ApiKind::VllmGenerate,
    ApiKind::SglangGenerate,
    ApiKind::Unparsed,
];

/// Why the gateway answered a request itself.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum Rejection {
    /// 401.
    Unauthorized,
    /// 429.
    RateLimited,
    /// 413.
    BodyTooLarge,
    /// 400.
    BadRequest,
    /// 404 for a model no server lists.
    UnknownModel,
    /// 503 from the scheduler.
    NoEndpoint,
    /// 502: every endpoint tried failed before answering.
    UpstreamUnreachable,
    /// 504.
    UpstreamTimeout,
    /// 500.
    Internal,
    /// 429 or 503 from flow control (`x-shepherd-dropped-reason`).
    FlowControl,
    /// 408: the body did not arrive within `gateway.bodyReadTimeoutMs`.
    BodyTimeout,
    /// 503: the bodies held filled `gateway.maxBufferedBodyBytes`.
    BodyBufferFull,
}

impl Rejection {
    const ALL: [Rejection; 12] = [
        Rejection::Unauthorized,
        Rejection::RateLimited,
        Rejection::BodyTooLarge,
        Rejection::BadRequest,
        Rejection::UnknownModel,
        Rejection::NoEndpoint,
        Rejection::UpstreamUnreachable,
        Rejection::UpstreamTimeout,
        Rejection::Internal,
        Rejection::FlowControl,
        Rejection::BodyTimeout,
        Rejection::BodyBufferFull,
    ];

    /// The `reason` label.
    pub fn as_str(self) -> &'static str {
        match self {
            Rejection::Unauthorized => "unauthorized",
            Rejection::RateLimited => "rate_limited",
            Rejection::BodyTooLarge => "body_too_large",
            Rejection::BadRequest => "bad_request",
            Rejection::UnknownModel => "unknown_model",
            Rejection::NoEndpoint => "no_endpoint",
            Rejection::UpstreamUnreachable => "upstream_unreachable",
            Rejection::UpstreamTimeout => "upstream_timeout",
            Rejection::Internal => "internal",
            Rejection::FlowControl => "flow_control",
            Rejection::BodyTimeout => "body_timeout",
            Rejection::BodyBufferFull => "body_buffer_full",
        }
    }

    /// The rejection an answer with `status` stands for.
    pub fn for_status(status: u16) -> Rejection {
        match status {
            401 => Rejection::Unauthorized,
            429 => Rejection::RateLimited,
            413 => Rejection::BodyTooLarge,
            404 => Rejection::UnknownModel,
            408 => Rejection::BodyTimeout,
            400..=499 => Rejection::BadRequest,
            502 => Rejection::UpstreamUnreachable,
            503 => Rejection::NoEndpoint,
            504 => Rejection::UpstreamTimeout,
            _ => Rejection::Internal,
        }
    }

    fn index(self) -> usize {
        self as usize
    }
}

/// The gateway's counters. See the [module docs](self).
#[derive(Debug, Default)]
pub struct GatewayStats {
    requests: [AtomicU64; APIS.len()],
    rejections: [AtomicU64; 12],
    responses: [AtomicU64; 5],
    errors_before_response: AtomicU64,
    errors_mid_stream: AtomicU64,
    disconnects: AtomicU64,
    prompt_tokens: AtomicU64,
    completion_tokens: AtomicU64,
    cached_tokens: AtomicU64,
    in_flight: AtomicI64,
}

fn add(counter: &AtomicU64, n: u64) {
    counter.fetch_add(n, Ordering::Relaxed);
}

fn get(counter: &AtomicU64) -> u64 {
    counter.load(Ordering::Relaxed)
}

impl GatewayStats {
    /// A request arrived for `api`.
    pub fn request(&self, api: ApiKind) {
        if let Some(i) = APIS.iter().position(|a| *a == api) {
            add(&self.requests[i], 1);
        }
    }

    /// The gateway answered a request itself.
    pub fn rejected(&self, why: Rejection) {
        add(&self.rejections[why.index()], 1);
    }

    /// Requests the gateway answered itself for `why`.
    pub fn rejections(&self, why: Rejection) -> u64 {
        get(&self.rejections[why.index()])
    }

    /// A model server answered with `status`.
    pub fn response(&self, status: u16) {
        let class = usize::from(status / 100).clamp(1, 5) - 1;
        add(&self.responses[class], 1);
    }

    /// An exchange with a model server failed before any response byte.
    pub fn upstream_error_before_response(&self) {
        add(&self.errors_before_response, 1);
    }

    /// Exchanges with model servers that failed before any response byte.
    pub fn upstream_errors_before_response(&self) -> u64 {
        get(&self.errors_before_response)
    }

    /// A response stream from a model server broke off.
    pub fn upstream_error_mid_stream(&self) {
        add(&self.errors_mid_stream, 1);
    }

    /// A client went away before its response ended.
    pub fn client_disconnect(&self) {
        add(&self.disconnects, 1);
    }

    /// Responses abandoned by their client.
    pub fn client_disconnects(&self) -> u64 {
        get(&self.disconnects)
    }

    /// A response reported `usage`.
    pub fn usage(&self, usage: &Usage) {
        add(&self.prompt_tokens, usage.prompt_tokens);
        add(&self.completion_tokens, usage.completion_tokens);
        add(&self.cached_tokens, usage.cached_tokens.unwrap_or(0));
    }

    /// Completion tokens reported so far.
    pub fn completion_tokens(&self) -> u64 {
        get(&self.completion_tokens)
    }

    /// One more request admitted.
    pub(crate) fn admitted(&self) {
        self.in_flight.fetch_add(1, Ordering::Relaxed);
    }

    /// One admitted request ended.
    pub(crate) fn ended(&self) {
        self.in_flight.fetch_sub(1, Ordering::Relaxed);
    }

    /// Requests admitted and not yet ended.
    pub fn in_flight(&self) -> u64 {
        self.in_flight.load(Ordering::Relaxed).max(0) as u64
    }
}

impl MetricsSource for GatewayStats {
    fn visit_metrics(&self, v: &mut dyn MetricsVisitor) {
        for (i, api) in APIS.iter().enumerate() {
            v.counter(REQUESTS, &[("api", api.as_str())], get(&self.requests[i]));
        }
        for why in Rejection::ALL {
            v.counter(
                REJECTIONS,
                &[("reason", why.as_str())],
                self.rejections(why),
            );
        }
        for (i, class) in ["1xx", "2xx", "3xx", "4xx", "5xx"].iter().enumerate() {
            v.counter(RESPONSES, &[("class", class)], get(&self.responses[i]));
        }
        v.counter(
            UPSTREAM_ERRORS,
            &[("stage", "before_response")],
            get(&self.errors_before_response),
        );
        v.counter(
            UPSTREAM_ERRORS,
            &[("stage", "mid_stream")],
            get(&self.errors_mid_stream),
        );
        v.counter(DISCONNECTS, &[], get(&self.disconnects));
        v.counter(USAGE, &[("kind", "prompt")], get(&self.prompt_tokens));
        v.counter(
            USAGE,
            &[("kind", "completion")],
            get(&self.completion_tokens),
        );
        v.counter(USAGE, &[("kind", "cached")], get(&self.cached_tokens));
        v.gauge(IN_FLIGHT, &[], self.in_flight() as f64);
    }
}
