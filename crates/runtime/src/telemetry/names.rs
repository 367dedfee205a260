//! Span and attribute names: the llm-d picker's where it has one, OpenTelemetry's semantic
//! conventions (`http.*`, `server.*`, `gen_ai.*`) where they fit, `llm_d.epp.*` otherwise.
//!
//! ```
//! use shepherd_runtime::telemetry::names;
//!
//! assert_eq!(names::scorer_span("prefix-cache-scorer"), "llm_d.epp.scorer.prefix_cache");
//! assert_eq!(names::scorer_span("my scorer!"), "llm_d.epp.scorer.my_scorer_");
//! ```

/// The whole request, as the picker or the gateway sees it (kind SERVER).
pub const REQUEST: &str = "gateway.request";
/// Waiting in flow control until dispatched or dropped.
pub const FLOW_CONTROL: &str = "llm_d.epp.flow_control";
/// The scheduling of one request: every profile it runs.
pub const SCORING: &str = "llm_d.epp.scoring";
/// One profile's run (the decode and prefill stages of a disaggregated request).
pub const PROFILE: &str = "llm_d.epp.profile";
/// The prefix of one scorer's span: `llm_d.epp.scorer.<type>` ([`scorer_span`]).
pub const SCORER_PREFIX: &str = "llm_d.epp.scorer.";
/// The gateway's call to the model server (kind CLIENT).
pub const UPSTREAM: &str = "gateway.upstream";

/// `gen_ai.request.model`: the model the request names (after any rewrite).
pub const MODEL: &str = "gen_ai.request.model";
/// `gen_ai.request.id`: the request's id (`x-request-id`).
pub const REQUEST_ID: &str = "gen_ai.request.id";
/// The picked endpoint, `ip:port`.
pub const ENDPOINT: &str = "llm_d.epp.endpoint";
/// How many endpoints the decision names (the primary and its fallbacks).
pub const ENDPOINTS: &str = "llm_d.epp.endpoints";
/// Candidates left after the filters.
pub const CANDIDATES: &str = "llm_d.scorer.candidate_endpoints";
/// The request's estimated prompt tokens.
pub const PROMPT_TOKENS: &str = "llm_d.epp.prompt_tokens";
/// The prompt tokens the picked endpoint is believed to cache.
pub const CACHED_TOKENS: &str = "llm_d.epp.cached_tokens";
/// The adaptive controller's mode at the pick (`steady`, `burst`, ...).
pub const ADAPTIVE_MODE: &str = "llm_d.epp.adaptive.mode";
/// The profile a span ran.
pub const PROFILE_NAME: &str = "llm_d.epp.profile.name";
/// Whether the request was disaggregated (upstream's attribute).
pub const PD_USED: &str = "llm_d.epp.pd.disaggregation_used";
/// The prefill server of a disaggregated request (upstream's attribute).
pub const PD_PREFILL: &str = "llm_d.epp.pd.prefill_pod_address";
/// Whether the request's media were encoded on separate servers (upstream's attribute).
pub const ENCODE_USED: &str = "llm_d.epp.encode.disaggregation_used";
/// The encode servers of such a request, `ip:port[,ip:port…]` (upstream's attribute).
pub const ENCODE_ENDPOINTS: &str = "llm_d.epp.encode.endpoints";
/// The scorer's plugin name.
pub const SCORER_NAME: &str = "llm_d.scorer.name";
/// The scorer's plugin type.
pub const SCORER_TYPE: &str = "llm_d.scorer.type";
/// The scorer's weight in this pick.
pub const SCORER_WEIGHT: &str = "llm_d.scorer.weight";
/// The highest score it gave (upstream's attribute).
pub const SCORE_MAX: &str = "llm_d.scorer.score.max";
/// The mean score it gave (upstream's attribute).
pub const SCORE_AVG: &str = "llm_d.scorer.score.avg";
/// How many candidates it could not judge (neutral scores).
pub const SCORES_NEUTRAL: &str = "llm_d.scorer.neutral";
/// The request's priority.
pub const PRIORITY: &str = "llm_d.epp.priority";
/// The request's flow (fairness id).
pub const FAIRNESS_ID: &str = "llm_d.epp.fairness_id";
/// How flow control ended: `dispatched` or the drop reason.
pub const FLOW_OUTCOME: &str = "llm_d.epp.flow_control.outcome";
/// The HTTP method.
pub const HTTP_METHOD: &str = "http.request.method";
/// The request path.
pub const URL_PATH: &str = "url.path";
/// The HTTP status answered (or received, on the upstream span).
pub const HTTP_STATUS: &str = "http.response.status_code";
/// The model server's address, on the upstream span.
pub const SERVER_ADDRESS: &str = "server.address";
/// Which attempt (1 = the primary; more after fallbacks).
pub const ATTEMPT: &str = "llm_d.gateway.attempt";
/// The prompt tokens the model server reported (`usage.prompt_tokens`).
pub const INPUT_TOKENS: &str = "gen_ai.usage.input_tokens";
/// The tokens it generated (`usage.completion_tokens`).
pub const OUTPUT_TOKENS: &str = "gen_ai.usage.output_tokens";
/// The prompt tokens it served from its prefix cache, when it says
/// (`usage.prompt_tokens_details.cached_tokens`).
pub const USAGE_CACHED_TOKENS: &str = "gen_ai.usage.cache_read.input_tokens";
/// Why the request failed (the error's kind).
pub const ERROR_TYPE: &str = "error.type";

/// Most bytes of a client-given string (model, fairness id, request id) put on a span.
pub const MAX_ATTRIBUTE_BYTES: usize = 256;

/// `llm_d.epp.scorer.<type>`: the plugin type without its `-scorer` suffix, dashes and any
/// other character outside `[a-z0-9_]` as `_` (upstream names its precise prefix scorer's span
/// `llm_d.epp.scorer.prefix_cache`).
pub fn scorer_span(plugin_type: &str) -> String {
    let base = plugin_type.strip_suffix("-scorer").unwrap_or(plugin_type);
    let mut name = String::with_capacity(SCORER_PREFIX.len() + base.len());
    name.push_str(SCORER_PREFIX);
    name.extend(base.chars().take(MAX_ATTRIBUTE_BYTES).map(|c| {
        let c = c.to_ascii_lowercase();
        if c.is_ascii_alphanumeric() || c == '_' {
            c
        } else {
            '_'
        }
    }));
    name
}

/// `value` cut to [`MAX_ATTRIBUTE_BYTES`] on a character boundary.
pub fn bounded(value: &str) -> &str {
    if value.len() <= MAX_ATTRIBUTE_BYTES {
        return value;
    }
    let mut end = MAX_ATTRIBUTE_BYTES;
    while !value.is_char_boundary(end) {
        end -= 1;
    }
    &value[..end]
}
