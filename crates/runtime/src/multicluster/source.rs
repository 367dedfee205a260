//! `multicluster-metrics-data-source`: where each cluster's metrics page is read.
//!
//! Upstream's parameters, strictly decoded: `scheme` (default **`https`**: a scrape across
//! clusters crosses a trust boundary), `path` (default `/metrics`), `port` (replaces every
//! endpoint's port), `insecureSkipVerify` (default false), `caCertPath`, `clientCertPath`,
//! `clientKeyPath` (both or neither), `interval` (a Go duration).
//!
//! Shepherd's scraper speaks plain http only. With `https` the clusters are **not scraped**
//! (never downgraded to clear text): a warning at start says so, the clusters carry no pool
//! metrics and the `multicluster-*` metric scorers score them 0. `scheme: http` scrapes a peer's
//! plain-http metrics port. The TLS parameters are checked and unused with `http`.
//!
//! ```
//! use shepherd_runtime::multicluster::MultiClusterSourceParams;
//!
//! let defaults = MultiClusterSourceParams::default();
//! assert_eq!(defaults.scheme, "https");
//! assert!(!defaults.scraped());
//! let http: MultiClusterSourceParams =
//!     serde_json::from_str(r#"{"scheme": "http", "interval": "2s"}"#).unwrap();
//! assert!(http.check().is_ok());
//! assert_eq!(http.interval().unwrap(), Some(std::time::Duration::from_secs(2)));
//! let bad: MultiClusterSourceParams = serde_json::from_str(r#"{"interval": "nope"}"#).unwrap();
//! assert!(bad.check().is_err());
//! ```

use std::time::Duration;

use serde::{Deserialize, Serialize};
use shepherd_scheduler_core::flow::parse_go_duration;

/// The type name.
pub const SOURCE_TYPE: &str = "multicluster-metrics-data-source";

/// Upstream's cap on a peer's metrics page: 8 MiB (Shepherd's parser reads less:
/// [`MAX_INPUT_BYTES`](crate::prom::MAX_INPUT_BYTES)).
pub const MAX_RESPONSE_BYTES: usize = 8 << 20;

/// The parameters (see the module docs).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields, default)]
pub struct MultiClusterSourceParams {
    /// `http` or `https` (default `https`).
    pub scheme: String,
    /// The metrics page's path (default `/metrics`).
    pub path: String,
    /// A port replacing every endpoint's port for the scrape.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub port: Option<i64>,
    /// With `https`, skip verifying the peer's certificate (default false).
    pub insecure_skip_verify: bool,
    /// A PEM CA bundle verifying the peer.
    pub ca_cert_path: String,
    /// A client certificate for mTLS (with `clientKeyPath`).
    pub client_cert_path: String,
    /// The client certificate's key.
    pub client_key_path: String,
    /// The scrape period, a Go duration; empty: every scrape interval.
    pub interval: String,
}

impl Default for MultiClusterSourceParams {
    fn default() -> Self {
        MultiClusterSourceParams {
            scheme: "https".into(),
            path: "/metrics".into(),
            port: None,
            insecure_skip_verify: false,
            ca_cert_path: String::new(),
            client_cert_path: String::new(),
            client_key_path: String::new(),
            interval: String::new(),
        }
    }
}

impl MultiClusterSourceParams {
    /// Upstream's checks: the scheme, the interval; and the path, port and client
    /// certificate pair as a scrape needs them.
    pub fn check(&self) -> Result<(), String> {
        if self.scheme != "http" && self.scheme != "https" {
            return Err(format!("unsupported scheme: {}", self.scheme));
        }
        if !self.path.starts_with('/') {
            return Err(format!("`path`: {:?} must start with `/`", self.path));
        }
        self.port()?;
        if self.client_cert_path.is_empty() != self.client_key_path.is_empty() {
            return Err("`clientCertPath` and `clientKeyPath` must be set together".into());
        }
        self.interval()?;
        Ok(())
    }

    /// The port override, checked.
    pub fn port(&self) -> Result<Option<u16>, String> {
        self.port
            .map(|p| {
                u16::try_from(p)
                    .ok()
                    .filter(|p| *p > 0)
                    .ok_or_else(|| format!("`port`: {p} is not a port (1 to 65535)"))
            })
            .transpose()
    }

    /// The scrape period (`None`: the scraper's interval).
    pub fn interval(&self) -> Result<Option<Duration>, String> {
        match self.interval.trim() {
            "" => Ok(None),
            text => parse_go_duration(text)
                .filter(|d| !d.is_zero())
                .map(Some)
                .ok_or_else(|| format!("`interval`: invalid interval {text:?}")),
        }
    }

    /// Whether Shepherd scrapes with these parameters (`http` only).
    pub fn scraped(&self) -> bool {
        self.scheme == "http"
    }

    /// What Shepherd does with this source, for the start-up log.
    pub fn warnings(&self, name: &str) -> Vec<String> {
        let name = if name.is_empty() { SOURCE_TYPE } else { name };
        if !self.scraped() {
            return vec![format!(
                "`{name}` ({SOURCE_TYPE}): https scraping is not built into this runtime; the \
                 clusters are not scraped (never over clear text instead), carry no pool \
                 metrics, and the multicluster queue and KV-cache scorers score them 0; set \
                 `scheme: http` to scrape a peer's plain-http metrics port"
            )];
        }
        let mut warnings = vec![format!(
            "`{name}` ({SOURCE_TYPE}): every cluster's metrics page is scraped at \
             http://<metricsAddress or address>:<metricsPort, port or the source's port>{}",
            self.path
        )];
        if !self.ca_cert_path.is_empty() || !self.client_cert_path.is_empty() {
            warnings.push(format!(
                "`{name}` ({SOURCE_TYPE}): `caCertPath` / `clientCertPath` are unused with \
                 `scheme: http`"
            ));
        }
        warnings
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]
    use super::*;

    fn params(json: &str) -> Result<MultiClusterSourceParams, String> {
        serde_json::from_str(json).map_err(|e| e.to_string())
    }

    // multicluster_test.go: the factory's defaults, a bad interval refused, a good one kept.
    #[test]
    fn upstreams_factory_cases() {
        let defaults = params("{}").unwrap();
        assert_eq!(defaults, MultiClusterSourceParams::default());
        assert!(defaults.check().is_ok());
        assert!(params(r#"{"interval":"nope"}"#).unwrap().check().is_err());
        assert_eq!(
            params(r#"{"interval":"2s"}"#).unwrap().interval().unwrap(),
            Some(Duration::from_secs(2))
        );
    }

    // The README's wiring example: https with a private CA.
    #[test]
    fn the_readme_parameters_load_and_say_they_are_not_scraped() {
        let p = params(r#"{"scheme":"https","caCertPath":"/etc/epp/tls/ca.crt"}"#).unwrap();
        assert!(p.check().is_ok());
        assert!(!p.scraped());
        let warnings = p.warnings("metrics-source");
        assert!(warnings[0].contains("not scraped"), "{warnings:?}");
    }

    #[test]
    fn bad_parameters_are_refused() {
        assert!(params(r#"{"scheme":"ftp"}"#).unwrap().check().is_err());
        assert!(params(r#"{"path":"metrics"}"#).unwrap().check().is_err());
        assert!(params(r#"{"port":0}"#).unwrap().check().is_err());
        assert!(
            params(r#"{"clientCertPath":"/c.pem"}"#)
                .unwrap()
                .check()
                .is_err()
        );
        assert!(params(r#"{"schema":"http"}"#).is_err(), "strict keys");
    }
}
