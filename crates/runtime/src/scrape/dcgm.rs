//! Upstream's `dcgm-data-source` and `dcgm-extractor`: GPU utilization from NVIDIA's DCGM
//! exporter, stored as the endpoint attribute `GPUUtilization` that the
//! `endpoint-attribute-filter` and `endpoint-attribute-scorer` read.
//!
//! The scraper's worker of each endpoint also GETs `http://<endpoint ip>:<port><path>`
//! (default port 9400, path `/metrics`) every `interval` (default: the scrape interval),
//! parses the page with the same bounded parser, takes the highest `DCGM_FI_DEV_GPU_UTIL`
//! sample (the busiest GPU; samples whose `pod` label names another pod are ignored when the
//! endpoint's labels give its pod name under `pod`) and stores it divided by 100. A failed
//! scrape, or a page without the metric, clears the attribute (upstream keeps the last
//! value; an absent attribute is what the filter's `onMissing` is for), logged at most once
//! every 10 s per endpoint.
//!
//! What Shepherd cannot do, it says at start (see [`DcgmSourceParams::warnings`]):
//! `https` is not scraped (the attribute stays absent), and `useNodeAddress` (a DaemonSet
//! exporter on the node's IP) scrapes the endpoint's own IP, as Shepherd does not know the
//! node's.
//!
//! ```
//! use shepherd_runtime::scrape::dcgm::{DcgmSourceParams, gpu_utilization};
//!
//! let params: DcgmSourceParams = serde_json::from_value(serde_json::json!({"port": 9400, "interval": "1s"})).unwrap();
//! let source = params.settings("dcgm-source").unwrap();
//! assert_eq!(source.url("10.0.0.7:8000"), Some("http://10.0.0.7:9400/metrics".to_string()));
//! assert_eq!(source.interval.unwrap().as_secs(), 1);
//!
//! let page = b"DCGM_FI_DEV_GPU_UTIL{gpu=\"0\"} 35\nDCGM_FI_DEV_GPU_UTIL{gpu=\"1\"} 80\n";
//! assert_eq!(gpu_utilization(page, None), Some(0.8));
//! ```

use std::time::Duration;

use serde::{Deserialize, Serialize};
use shepherd_scheduler_core::flow::parse_go_duration;

use crate::prom;

/// The type name of the source.
pub const SOURCE_TYPE: &str = "dcgm-data-source";

/// The type name of the extractor.
pub const EXTRACTOR_TYPE: &str = "dcgm-extractor";

/// The attribute the extractor publishes.
pub const ATTRIBUTE: &str = "GPUUtilization";

/// The DCGM exporter's GPU utilization gauge (0 to 100).
pub const GPU_UTIL_METRIC: &str = "DCGM_FI_DEV_GPU_UTIL";

/// The sample label naming the pod a GPU serves (DCGM exporters in Kubernetes mode).
pub const POD_LABEL: &str = "pod";

/// The `dcgm-data-source` parameters, as upstream (strictly decoded).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields, default)]
pub struct DcgmSourceParams {
    /// `http` or `https` (default `http`).
    pub scheme: String,
    /// The exporter's metrics path (default `/metrics`).
    pub path: String,
    /// The exporter's port (default 9400).
    pub port: i64,
    /// With `https`, whether to skip verifying the certificate (default true).
    pub insecure_skip_verify: bool,
    /// Scrape the node's address (a DaemonSet exporter) instead of the pod's.
    pub use_node_address: bool,
    /// Scrape period, a Go duration (`"1s"`); empty: every scrape interval.
    pub interval: String,
}

impl Default for DcgmSourceParams {
    fn default() -> Self {
        DcgmSourceParams {
            scheme: "http".into(),
            path: "/metrics".into(),
            port: 9400,
            insecure_skip_verify: true,
            use_node_address: false,
            interval: String::new(),
        }
    }
}

/// A DCGM source, ready to scrape.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DcgmSettings {
    /// The source plugin's name.
    pub name: String,
    /// `false` for `https`, which Shepherd does not scrape.
    pub scraped: bool,
    /// The path.
    pub path: String,
    /// The port.
    pub port: u16,
    /// The period (`None`: the scrape interval).
    pub interval: Option<Duration>,
}

impl DcgmSourceParams {
    /// Checks the parameters as upstream does (`scheme` `http` or `https`, a valid
    /// `interval`), and the port and path as a URL needs them.
    pub fn settings(&self, name: &str) -> Result<DcgmSettings, String> {
        let name = if name.is_empty() { SOURCE_TYPE } else { name };
        if self.scheme != "http" && self.scheme != "https" {
            return Err(format!("unsupported scheme: {}", self.scheme));
        }
        let port = u16::try_from(self.port)
            .ok()
            .filter(|p| *p > 0)
            .ok_or_else(|| format!("`port`: {} is not a port (1 to 65535)", self.port))?;
        if !self.path.starts_with('/') {
            return Err(format!("`path`: {:?} must start with `/`", self.path));
        }
        let interval = match self.interval.trim() {
            "" => None,
            text => Some(
                parse_go_duration(text)
                    .filter(|d| !d.is_zero())
                    .ok_or_else(|| format!("`interval`: invalid duration {text:?}"))?,
            ),
        };
        Ok(DcgmSettings {
            name: name.to_string(),
            scraped: self.scheme == "http",
            path: self.path.clone(),
            port,
            interval,
        })
    }

    /// What Shepherd does with this source, and what it cannot do, for the start-up log.
    pub fn warnings(&self, name: &str) -> Vec<String> {
        let name = if name.is_empty() { SOURCE_TYPE } else { name };
        let mut warnings = Vec::new();
        if self.scheme == "https" {
            warnings.push(format!(
                "`{name}` (dcgm-data-source): https scraping is not built into this runtime; \
                 the DCGM exporter is not scraped and `{ATTRIBUTE}` stays absent"
            ));
            return warnings;
        }
        warnings.push(format!(
            "`{name}` (dcgm-data-source): every endpoint's DCGM exporter is scraped at \
             http://<endpoint ip>:{}{} and the highest {GPU_UTIL_METRIC} / 100 is stored as \
             the endpoint attribute `{ATTRIBUTE}`",
            self.port, self.path
        ));
        if self.use_node_address {
            warnings.push(format!(
                "`{name}` (dcgm-data-source): `useNodeAddress` is not applied: Shepherd does not \
                 know the node's address and scrapes the endpoint's own IP"
            ));
        }
        warnings
    }
}

impl DcgmSettings {
    /// The exporter's page for the endpoint at `address` (`ip:port`); `None` when not scraped.
    pub fn url(&self, address: &str) -> Option<String> {
        if !self.scraped {
            return None;
        }
        let host = match address.parse::<std::net::SocketAddr>() {
            Ok(std::net::SocketAddr::V6(v6)) => format!("[{}]", v6.ip()),
            Ok(std::net::SocketAddr::V4(v4)) => v4.ip().to_string(),
            Err(_) => address
                .rsplit_once(':')
                .map_or(address, |(h, _)| h)
                .to_string(),
        };
        Some(format!("http://{host}:{}{}", self.port, self.path))
    }
}

/// The highest [`GPU_UTIL_METRIC`] sample of `page` divided by 100, keeping samples without a
/// `pod` label or whose `pod` is `pod` (all when `pod` is `None`); `None` when there is none.
pub fn gpu_utilization(page: &[u8], pod: Option<&str>) -> Option<f64> {
    let scrape = prom::parse(page).ok()?;
    scrape
        .samples_named(GPU_UTIL_METRIC)
        .filter(|s| match (pod, s.label(POD_LABEL)) {
            (Some(pod), Some(label)) => label == pod,
            _ => true,
        })
        .map(|s| s.value)
        .filter(|v| v.is_finite())
        .fold(None, |max: Option<f64>, v| {
            Some(max.map_or(v, |m| m.max(v)))
        })
        .map(|v| v / 100.0)
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]
    use super::*;

    fn params(json: serde_json::Value) -> Result<DcgmSourceParams, String> {
        serde_json::from_value(json).map_err(|e| e.to_string())
    }

    #[test]
    fn upstreams_examples_and_checks() {
        // source/dcgm/README.md: the sidecar and DaemonSet forms.
        let sidecar = params(serde_json::json!({"port": 9400})).unwrap();
        assert_eq!(sidecar.settings("s").unwrap().interval, None);
        assert_eq!(sidecar.warnings("s").len(), 1);
        let daemonset =
            params(serde_json::json!({"port": 9400, "useNodeAddress": true, "interval": "1s"}))
                .unwrap();
        assert!(daemonset.warnings("d")[1].contains("useNodeAddress"));
        assert!(
            params(serde_json::json!({"scheme": "ftp"}))
                .unwrap()
                .settings("x")
                .is_err()
        );
        assert!(
            params(serde_json::json!({"interval": "soon"}))
                .unwrap()
                .settings("x")
                .is_err()
        );
        assert!(
            params(serde_json::json!({"port": 70000}))
                .unwrap()
                .settings("x")
                .is_err()
        );
        assert!(params(serde_json::json!({"ports": 1})).is_err());
        let https = params(serde_json::json!({"scheme": "https"})).unwrap();
        assert_eq!(https.settings("h").unwrap().url("127.0.0.1:8000"), None);
        assert!(https.warnings("h")[0].contains("not scraped"));
    }

    #[test]
    fn the_busiest_gpu_of_the_pod_wins() {
        // extractor/dcgm: max over matching samples, normalized from 0-100.
        let page = b"# TYPE DCGM_FI_DEV_GPU_UTIL gauge\n\
            DCGM_FI_DEV_GPU_UTIL{gpu=\"0\",pod=\"vllm-0\"} 20\n\
            DCGM_FI_DEV_GPU_UTIL{gpu=\"1\",pod=\"vllm-1\"} 90\n\
            DCGM_FI_DEV_GPU_UTIL{gpu=\"2\",pod=\"vllm-0\"} 45\n";
        assert_eq!(gpu_utilization(page, Some("vllm-0")), Some(0.45));
        assert_eq!(gpu_utilization(page, None), Some(0.9));
        assert_eq!(gpu_utilization(page, Some("other")), None);
        assert_eq!(gpu_utilization(b"other_metric 1\n", None), None);
    }
}
