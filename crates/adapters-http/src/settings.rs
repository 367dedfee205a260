//! The gateway's settings: the config file's `gateway` section with its keys read and its
//! durations typed, ready for the request path.
//!
//! ```
//! use shepherd_adapters_http::GatewaySettings;
//! use shepherd_runtime::config::RuntimeConfig;
//!
//! let config = RuntimeConfig::from_yaml("gateway:\n  maxConcurrentRequests: 32\n  apiKeys: [sk-a]\n")?;
//! let settings = GatewaySettings::from_config(&config.gateway)?;
//! assert_eq!(settings.max_concurrent_requests, Some(32));
//! assert!(settings.client_keys.is_enabled());
//! assert!(format!("{settings:?}").contains("1 key")); // never the key itself
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```

use std::collections::HashMap;
use std::fmt;
use std::time::Duration;

use axum::http::HeaderValue;
use shepherd_runtime::config::{GatewayConfig, Secret};
use shepherd_runtime::usage::DEFAULT_USAGE_SCAN_BYTES;

use crate::GatewayError;

/// Everything the request path reads. See the [module docs](self).
#[derive(Debug, Clone)]
pub struct GatewaySettings {
    /// Largest request body accepted.
    pub max_body_bytes: usize,
    /// Time allowed to read a request body whole.
    pub body_read_timeout: Duration,
    /// Request-body bytes all requests may hold at once.
    pub max_buffered_body_bytes: usize,
    /// The privileged headers ([`PRIVILEGED_HEADERS`](shepherd_runtime::config::PRIVILEGED_HEADERS)) taken from clients, lowercase.
    pub trusted_headers: Vec<String>,
    /// Time allowed to connect to a model server.
    pub connect_timeout: Duration,
    /// Time allowed until the first response byte, if limited.
    pub first_byte_timeout: Option<Duration>,
    /// Requests proxied at once, if limited.
    pub max_concurrent_requests: Option<usize>,
    /// `Retry-After` of 429 and 503 answers, in seconds.
    pub retry_after_seconds: u64,
    /// How long the aggregated model list is reused.
    pub models_cache: Duration,
    /// Time allowed to fetch one server's model list.
    pub models_timeout: Duration,
    /// Whether the admin routes are served on the gateway's port too.
    pub admin_routes: bool,
    /// Whether `/debug/explain/...` is served.
    pub explain: bool,
    /// Bytes at the end of each response kept to find its `usage`.
    pub usage_scan_bytes: usize,
    /// Keys clients must present.
    pub client_keys: ClientKeys,
    /// Keys sent to the model servers.
    pub upstream_keys: UpstreamKeys,
}

impl Default for GatewaySettings {
    /// The defaults of the `gateway` section (no keys).
    fn default() -> Self {
        let config = GatewayConfig::default();
        GatewaySettings {
            max_body_bytes: config.max_body_bytes,
            body_read_timeout: Duration::from_millis(config.body_read_timeout_ms),
            max_buffered_body_bytes: config.max_buffered_body_bytes,
            trusted_headers: Vec::new(),
            connect_timeout: Duration::from_millis(config.connect_timeout_ms),
            first_byte_timeout: None,
            max_concurrent_requests: None,
            retry_after_seconds: config.retry_after_seconds,
            models_cache: Duration::from_millis(config.models_cache_ms),
            models_timeout: Duration::from_millis(config.models_timeout_ms),
            admin_routes: config.admin_routes,
            explain: config.explain,
            usage_scan_bytes: DEFAULT_USAGE_SCAN_BYTES,
            client_keys: ClientKeys::default(),
            upstream_keys: UpstreamKeys::default(),
        }
    }
}

impl GatewaySettings {
    /// Whether the client's `header` (one of [`PRIVILEGED_HEADERS`](shepherd_runtime::config::PRIVILEGED_HEADERS), lowercase) is taken.
    pub fn trusts(&self, header: &str) -> bool {
        self.trusted_headers.iter().any(|h| h == header)
    }

    /// What one request body may cost.
    pub fn body_limits(&self) -> crate::body::BodyLimits {
        crate::body::BodyLimits {
            max_bytes: self.max_body_bytes,
            timeout: self.body_read_timeout,
        }
    }

    /// Reads `config`'s keys (environment variables and files are read now).
    ///
    /// # Errors
    ///
    /// [`GatewayError::Secret`] naming the field whose key could not be read.
    pub fn from_config(config: &GatewayConfig) -> Result<Self, GatewayError> {
        let read = |field: String, secret: &Secret| {
            secret
                .resolve()
                .map_err(|source| GatewayError::Secret { field, source })
        };
        let mut client = Vec::with_capacity(config.api_keys.len());
        for (i, key) in config.api_keys.iter().enumerate() {
            client.push(read(format!("apiKeys[{i}]"), key)?);
        }
        let default = match &config.upstream_api_key {
            Some(key) => Some(bearer(
                &read("upstreamApiKey".into(), key)?,
                "upstreamApiKey",
            )?),
            None => None,
        };
        let mut per_endpoint = HashMap::with_capacity(config.upstream_api_keys.len());
        for (address, key) in &config.upstream_api_keys {
            let field = format!("upstreamApiKeys.{address}");
            let value = bearer(&read(field.clone(), key)?, &field)?;
            per_endpoint.insert(address.clone(), value);
        }
        Ok(GatewaySettings {
            max_body_bytes: config.max_body_bytes,
            body_read_timeout: Duration::from_millis(config.body_read_timeout_ms),
            max_buffered_body_bytes: config.max_buffered_body_bytes,
            trusted_headers: config
                .trusted_headers
                .iter()
                .map(|h| h.to_ascii_lowercase())
                .collect(),
            connect_timeout: Duration::from_millis(config.connect_timeout_ms),
            first_byte_timeout: config.first_byte_timeout_ms.map(Duration::from_millis),
            max_concurrent_requests: config.max_concurrent_requests,
            retry_after_seconds: config.retry_after_seconds,
            models_cache: Duration::from_millis(config.models_cache_ms),
            models_timeout: Duration::from_millis(config.models_timeout_ms),
            admin_routes: config.admin_routes,
            explain: config.explain,
            usage_scan_bytes: DEFAULT_USAGE_SCAN_BYTES,
            client_keys: ClientKeys::new(client),
            upstream_keys: UpstreamKeys {
                default,
                per_endpoint,
            },
        })
    }
}

/// `Bearer <key>` as a header value marked sensitive (never logged by hyper).
fn bearer(key: &str, field: &str) -> Result<HeaderValue, GatewayError> {
    let mut value =
        HeaderValue::from_str(&format!("Bearer {key}")).map_err(|_| GatewayError::Secret {
            field: field.to_owned(),
            source: shepherd_runtime::config::SecretError::Empty,
        })?;
    value.set_sensitive(true);
    Ok(value)
}

/// The keys clients must send as `Authorization: Bearer <key>`; none means no check.
#[derive(Clone, Default)]
pub struct ClientKeys {
    keys: Vec<Box<[u8]>>,
}

impl ClientKeys {
    /// Accepts exactly `keys` (an empty list accepts everyone).
    pub fn new<I, S>(keys: I) -> Self
    where
        I: IntoIterator<Item = S>,
        S: AsRef<str>,
    {
        ClientKeys {
            keys: keys
                .into_iter()
                .map(|k| k.as_ref().as_bytes().into())
                .collect(),
        }
    }

    /// Whether a key is required.
    pub fn is_enabled(&self) -> bool {
        !self.keys.is_empty()
    }

    /// Whether `authorization` (the header's value) lets the request in.
    pub fn allows(&self, authorization: Option<&HeaderValue>) -> bool {
        if self.keys.is_empty() {
            return true;
        }
        let Some(token) = authorization.and_then(|v| bearer_token(v.as_bytes())) else {
            return false;
        };
        // Every key is compared in full, whichever matches.
        self.keys
            .iter()
            .fold(false, |found, key| found | constant_time_eq(key, token))
    }
}

impl fmt::Debug for ClientKeys {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.keys.len() {
            0 => f.write_str("ClientKeys(none)"),
            1 => f.write_str("ClientKeys(1 key)"),
            n => write!(f, "ClientKeys({n} keys)"),
        }
    }
}

/// The token of `Bearer <token>` (scheme case-insensitive).
fn bearer_token(value: &[u8]) -> Option<&[u8]> {
    let (scheme, rest) = value.split_at_checked(6)?;
    if !scheme.eq_ignore_ascii_case(b"bearer") || rest.first() != Some(&b' ') {
        return None;
    }
    let token = rest.trim_ascii();
    (!token.is_empty()).then_some(token)
}

/// Compares without stopping at the first difference (the length may show).
fn constant_time_eq(a: &[u8], b: &[u8]) -> bool {
    if a.len() != b.len() {
        return false;
    }
    a.iter().zip(b).fold(0u8, |acc, (x, y)| acc | (x ^ y)) == 0
}

/// The `Authorization` values sent to model servers: one per `ip:port`, else the default.
#[derive(Clone, Default)]
pub struct UpstreamKeys {
    default: Option<HeaderValue>,
    per_endpoint: HashMap<String, HeaderValue>,
}

impl UpstreamKeys {
    /// The `Authorization` value for the server at `address`, if any.
    pub fn for_endpoint(&self, address: &str) -> Option<&HeaderValue> {
        self.per_endpoint.get(address).or(self.default.as_ref())
    }

    /// Whether any server gets a key.
    pub fn is_enabled(&self) -> bool {
        self.default.is_some() || !self.per_endpoint.is_empty()
    }
}

impl fmt::Debug for UpstreamKeys {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("UpstreamKeys")
            .field("default", &self.default.is_some())
            .field("endpoints", &self.per_endpoint.keys().collect::<Vec<_>>())
            .finish()
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use super::*;

    #[test]
    fn bearer_tokens_are_checked() {
        let keys = ClientKeys::new(["sk-one", "sk-two"]);
        let header = |v: &str| HeaderValue::from_str(v).unwrap();
        assert!(keys.allows(Some(&header("Bearer sk-two"))));
        assert!(keys.allows(Some(&header("bearer  sk-one "))));
        assert!(!keys.allows(Some(&header("Bearer sk-three"))));
        assert!(!keys.allows(Some(&header("Basic sk-one"))));
        assert!(!keys.allows(Some(&header("Bearer"))));
        assert!(!keys.allows(None));
        assert!(ClientKeys::default().allows(None));
    }

    #[test]
    fn upstream_keys_prefer_the_endpoints_own() {
        let config: GatewayConfig = serde_norway::from_str(
            "upstreamApiKey: sk-all\nupstreamApiKeys: {\"127.0.0.1:9\": sk-nine}\n",
        )
        .unwrap();
        let settings = GatewaySettings::from_config(&config).unwrap();
        let keys = &settings.upstream_keys;
        assert_eq!(keys.for_endpoint("127.0.0.1:9").unwrap(), "Bearer sk-nine");
        assert_eq!(keys.for_endpoint("127.0.0.1:8").unwrap(), "Bearer sk-all");
        assert!(keys.for_endpoint("127.0.0.1:8").unwrap().is_sensitive());
        let shown = format!("{settings:?}");
        assert!(!shown.contains("sk-"), "{shown}");
    }
}
