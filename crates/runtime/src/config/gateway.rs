//! The `gateway` section: how `shepherd-gateway` proxies requests ([`GatewayConfig`]).

use std::collections::BTreeMap;
use std::fmt;
use std::path::PathBuf;

use serde::{Deserialize, Serialize, Serializer};
use thiserror::Error;

/// Default largest request body, in bytes (16 MiB, the core parser's default).
pub const DEFAULT_GATEWAY_MAX_BODY_BYTES: usize = 16 * 1024 * 1024;
/// Default time allowed to open a connection to a model server.
pub const DEFAULT_CONNECT_TIMEOUT_MS: u64 = 5_000;
/// Default `Retry-After` of the gateway's 429 and 503 answers, in seconds.
pub const DEFAULT_RETRY_AFTER_SECONDS: u64 = 1;
/// Default lifetime of the aggregated `/v1/models` list.
pub const DEFAULT_MODELS_CACHE_MS: u64 = 5_000;
/// Default time allowed to fetch one server's `/v1/models`.
pub const DEFAULT_MODELS_TIMEOUT_MS: u64 = 2_000;
/// Default time allowed to read a whole request body, from the end of its head.
pub const DEFAULT_BODY_READ_TIMEOUT_MS: u64 = 30_000;
/// Default cap on the request-body bytes all requests hold at once (256 MiB).
pub const DEFAULT_MAX_BUFFERED_BODY_BYTES: usize = 256 * 1024 * 1024;
/// The request headers that set a request's scheduling privileges, which the gateway takes
/// from a client only when `gateway.trustedHeaders` names them.
pub const PRIVILEGED_HEADERS: [&str; 5] = [
    "x-shepherd-priority",
    "x-llm-d-inference-fairness-id",
    "x-gateway-inference-fairness-id",
    "x-llm-d-inference-objective",
    "x-gateway-inference-objective",
];

/// The `gateway` section: how `shepherd-gateway` (the OpenAI-compatible HTTP gateway of
/// `shepherd-adapters-http`) proxies requests.
///
/// Every field has a default, so the section may be left out. Keys need not be written
/// inline: each one is a [`Secret`], a literal string, `{env: NAME}` or `{file: path}`,
/// resolved when the gateway starts, and never shown in `/debug/config` or logs.
///
/// ```
/// use shepherd_runtime::config::{GatewayConfig, Secret};
///
/// let gateway: GatewayConfig = serde_norway::from_str(r#"
/// maxConcurrentRequests: 256
/// apiKeys:
///   - env: SHEPHERD_CLIENT_KEY
/// upstreamApiKey: {file: /etc/shepherd/vllm-key}
/// "#).unwrap();
/// assert_eq!(gateway.max_concurrent_requests, Some(256));
/// assert_eq!(gateway.api_keys, [Secret::Env { env: "SHEPHERD_CLIENT_KEY".into() }]);
/// assert_eq!(gateway.first_byte_timeout_ms, None); // no default cuts a long generation
/// assert_eq!(gateway.max_body_bytes, 16 * 1024 * 1024);
/// assert!(gateway.trusted_headers.is_empty()); // clients do not set their own priority
/// ```
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields, default)]
pub struct GatewayConfig {
    /// Largest request body accepted; larger ones get 413. Default 16 MiB.
    pub max_body_bytes: usize,
    /// Time allowed to connect to a model server before the next fallback is tried.
    /// Default 5000 ms.
    pub connect_timeout_ms: u64,
    /// Time allowed from sending a request to the first byte of its response (the status
    /// line). `None` (the default) waits as long as the server takes: a non-streaming
    /// response's first byte comes only when its whole generation is done.
    pub first_byte_timeout_ms: Option<u64>,
    /// Requests the gateway proxies at once; more are answered 429 with `Retry-After`.
    /// `None` (the default): no limit. (Flow control proper, with queues and priorities,
    /// comes later; this is a plain concurrency cap.)
    pub max_concurrent_requests: Option<usize>,
    /// `Retry-After` of 429 and 503 answers, in seconds. Default 1.
    pub retry_after_seconds: u64,
    /// How long the aggregated `/v1/models` list is reused. Default 5000 ms.
    pub models_cache_ms: u64,
    /// Time allowed to fetch one server's `/v1/models`. Default 2000 ms.
    pub models_timeout_ms: u64,
    /// Serve the admin routes (`/metrics`, `/healthz`, `/readyz`, `/debug/adaptive`,
    /// `/debug/config`) on the gateway's port too. Default true.
    pub admin_routes: bool,
    /// Serve `/debug/explain/v1/...` (a dry-run pick of a posted body with its score
    /// breakdown). Default false: it reveals the pool's layout.
    pub explain: bool,
    /// Keys clients must send as `Authorization: Bearer <key>`; empty (the default) lets
    /// every client in.
    pub api_keys: Vec<Secret>,
    /// Key sent to every model server as `Authorization: Bearer <key>` (vLLM's
    /// `--api-key`), unless [`upstream_api_keys`](Self::upstream_api_keys) names the server.
    pub upstream_api_key: Option<Secret>,
    /// Per-server keys, by `ip:port`.
    pub upstream_api_keys: BTreeMap<String, Secret>,
    /// Time allowed to read a request's whole body, from the end of its head; a body still
    /// arriving then gets 408. Default 30000 ms.
    pub body_read_timeout_ms: u64,
    /// Request-body bytes all requests may hold at once (bodies being read, and read bodies
    /// until their model server answers); a request whose body would go over gets 503 with
    /// `x-shepherd-dropped-reason: body_buffer_full`. Default 256 MiB.
    pub max_buffered_body_bytes: usize,
    /// Which of the headers that set a request's scheduling privileges
    /// ([`PRIVILEGED_HEADERS`]: `x-shepherd-priority`, the fairness-id and objective headers) the gateway
    /// takes from its clients. Default none: on a public port any client could raise its own
    /// priority; name them when the clients are trusted (or a gateway in front sets them).
    pub trusted_headers: Vec<String>,
}

impl Default for GatewayConfig {
    fn default() -> Self {
        GatewayConfig {
            max_body_bytes: DEFAULT_GATEWAY_MAX_BODY_BYTES,
            connect_timeout_ms: DEFAULT_CONNECT_TIMEOUT_MS,
            first_byte_timeout_ms: None,
            max_concurrent_requests: None,
            retry_after_seconds: DEFAULT_RETRY_AFTER_SECONDS,
            models_cache_ms: DEFAULT_MODELS_CACHE_MS,
            models_timeout_ms: DEFAULT_MODELS_TIMEOUT_MS,
            admin_routes: true,
            explain: false,
            api_keys: Vec::new(),
            upstream_api_key: None,
            upstream_api_keys: BTreeMap::new(),
            body_read_timeout_ms: DEFAULT_BODY_READ_TIMEOUT_MS,
            max_buffered_body_bytes: DEFAULT_MAX_BUFFERED_BODY_BYTES,
            trusted_headers: Vec::new(),
        }
    }
}

impl GatewayConfig {
    /// The first invalid field and why, if any.
    pub(crate) fn check(&self) -> Result<(), (String, String)> {
        let fail = |field: &str, reason: &str| Err((field.to_owned(), reason.to_owned()));
        if self.max_body_bytes == 0 {
            return fail("gateway.maxBodyBytes", "must be at least 1");
        }
        if self.connect_timeout_ms == 0 {
            return fail("gateway.connectTimeoutMs", "must be at least 1");
        }
        if self.first_byte_timeout_ms == Some(0) {
            return fail(
                "gateway.firstByteTimeoutMs",
                "must be at least 1 (leave it out for no timeout)",
            );
        }
        if self.max_concurrent_requests == Some(0) {
            return fail(
                "gateway.maxConcurrentRequests",
                "must be at least 1 (leave it out for no limit)",
            );
        }
        if self.models_timeout_ms == 0 {
            return fail("gateway.modelsTimeoutMs", "must be at least 1");
        }
        if self.body_read_timeout_ms == 0 {
            return fail("gateway.bodyReadTimeoutMs", "must be at least 1");
        }
        if self.max_buffered_body_bytes < self.max_body_bytes {
            return fail(
                "gateway.maxBufferedBodyBytes",
                "must be at least gateway.maxBodyBytes (else the largest body could never be read)",
            );
        }
        for (i, name) in self.trusted_headers.iter().enumerate() {
            if !PRIVILEGED_HEADERS
                .iter()
                .any(|h| h.eq_ignore_ascii_case(name))
            {
                return Err((
                    format!("gateway.trustedHeaders[{i}]"),
                    format!(
                        "`{}` is not one of the headers it can name: {}",
                        name.chars().take(64).collect::<String>(),
                        PRIVILEGED_HEADERS.join(", ")
                    ),
                ));
            }
        }
        for (i, key) in self.api_keys.iter().enumerate() {
            key.check()
                .map_err(|reason| (format!("gateway.apiKeys[{i}]"), reason.to_owned()))?;
        }
        if let Some(key) = &self.upstream_api_key {
            key.check()
                .map_err(|reason| ("gateway.upstreamApiKey".to_owned(), reason.to_owned()))?;
        }
        for (address, key) in &self.upstream_api_keys {
            let field = || format!("gateway.upstreamApiKeys.{address}");
            if address.parse::<std::net::SocketAddr>().is_err() {
                return Err((field(), "must be an `ip:port` address".to_owned()));
            }
            key.check().map_err(|reason| (field(), reason.to_owned()))?;
        }
        Ok(())
    }
}

/// A key or token, given inline, by environment variable, or by file. Shown as
/// `<redacted>` (inline) or by its variable or path, never by its value.
///
/// ```
/// use shepherd_runtime::config::Secret;
///
/// let inline = Secret::Value("sk-123".into());
/// assert_eq!(format!("{inline:?}"), "Secret(<redacted>)");
/// assert_eq!(inline.resolve().unwrap(), "sk-123");
/// let missing = Secret::Env { env: "SHEPHERD_DOC_NO_SUCH_VARIABLE".into() };
/// assert!(missing.resolve().is_err());
/// ```
#[derive(Clone, PartialEq, Eq, Deserialize)]
#[serde(untagged, deny_unknown_fields)]
pub enum Secret {
    /// The value itself.
    Value(String),
    /// The value of an environment variable.
    Env {
        /// The variable's name.
        env: String,
    },
    /// The contents of a file, surrounding whitespace trimmed.
    File {
        /// The file.
        file: PathBuf,
    },
}

/// Why a [`Secret`] could not be read.
#[derive(Debug, Error)]
#[non_exhaustive]
pub enum SecretError {
    /// The environment variable is not set (or not UTF-8).
    #[error("environment variable {0} is not set")]
    MissingEnv(String),
    /// The file could not be read.
    #[error("cannot read key file {}: {source}", path.display())]
    File {
        /// The file.
        path: PathBuf,
        /// The I/O error.
        #[source]
        source: std::io::Error,
    },
    /// The value is empty.
    #[error("the key is empty")]
    Empty,
}

impl Secret {
    /// Reads the value (the environment or the file is read now).
    pub fn resolve(&self) -> Result<String, SecretError> {
        let value = match self {
            Secret::Value(value) => value.clone(),
            Secret::Env { env } => {
                std::env::var(env).map_err(|_| SecretError::MissingEnv(env.clone()))?
            }
            Secret::File { file } => std::fs::read_to_string(file)
                .map_err(|source| SecretError::File {
                    path: file.clone(),
                    source,
                })?
                .trim()
                .to_owned(),
        };
        if value.is_empty() {
            return Err(SecretError::Empty);
        }
        Ok(value)
    }

    fn check(&self) -> Result<(), &'static str> {
        match self {
            Secret::Value(value) if value.is_empty() => Err("the key is empty"),
            Secret::Env { env } if env.is_empty() => Err("`env` names no variable"),
            Secret::File { file } if file.as_os_str().is_empty() => Err("`file` names no file"),
            _ => Ok(()),
        }
    }
}

impl fmt::Debug for Secret {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Secret::Value(_) => f.write_str("Secret(<redacted>)"),
            Secret::Env { env } => write!(f, "Secret(env {env})"),
            Secret::File { file } => write!(f, "Secret(file {})", file.display()),
        }
    }
}

impl Serialize for Secret {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        #[derive(Serialize)]
        enum Shown<'a> {
            #[serde(rename = "env")]
            Env(&'a str),
            #[serde(rename = "file")]
            File(&'a std::path::Path),
        }
        match self {
            Secret::Value(_) => serializer.serialize_str("<redacted>"),
            Secret::Env { env } => Shown::Env(env).serialize(serializer),
            Secret::File { file } => Shown::File(file).serialize(serializer),
        }
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use super::*;

    #[test]
    fn secrets_never_serialize_their_value() {
        let config = GatewayConfig {
            api_keys: vec![
                Secret::Value("sk-secret".into()),
                Secret::Env { env: "KEY".into() },
            ],
            upstream_api_key: Some(Secret::File {
                file: "/run/key".into(),
            }),
            ..GatewayConfig::default()
        };
        let json = serde_json::to_string(&config).unwrap();
        assert!(!json.contains("sk-secret"), "{json}");
        assert!(
            json.contains(r#""apiKeys":["<redacted>",{"env":"KEY"}]"#),
            "{json}"
        );
        assert!(
            json.contains(r#""upstreamApiKey":{"file":"/run/key"}"#),
            "{json}"
        );
        assert!(!format!("{config:?}").contains("sk-secret"));
    }

    #[test]
    fn bad_values_name_their_field() {
        let bad = |yaml: &str| {
            let config: GatewayConfig = serde_norway::from_str(yaml).unwrap();
            config.check().unwrap_err().0
        };
        assert_eq!(
            bad("maxConcurrentRequests: 0"),
            "gateway.maxConcurrentRequests"
        );
        assert_eq!(bad("firstByteTimeoutMs: 0"), "gateway.firstByteTimeoutMs");
        assert_eq!(bad("apiKeys: ['']"), "gateway.apiKeys[0]");
        assert_eq!(
            bad("upstreamApiKeys: {nowhere: k}"),
            "gateway.upstreamApiKeys.nowhere"
        );
        assert!(serde_norway::from_str::<GatewayConfig>("apiKeys: [{envv: X}]").is_err());
    }
}
