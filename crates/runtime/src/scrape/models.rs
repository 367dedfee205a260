//! Upstream's `models-data-source` and `models-data-extractor`: the models each endpoint
//! serves, read from its OpenAI `/v1/models` answer into an [`EndpointModels`] table.
//!
//! The scraper's worker of each endpoint also GETs `http://<endpoint address><path>` (default
//! `/v1/models`) every `interval` (default: the scrape interval) and stores the answer's
//! `data` entries (`id`, `object`, `created`, `owned_by`, `parent`) for that endpoint, as
//! upstream's extractor stores its `ModelDataCollection` attribute. A failed poll keeps the
//! last list, as upstream does, and is logged at most once every 10 s per endpoint; a change
//! of the list is logged at `info`. The table is bounded: at most [`MAX_MODELS`] entries per
//! endpoint and [`MAX_FIELD_BYTES`] per text field; an endpoint that leaves the pool is
//! forgotten.
//!
//! No scheduling plugin reads the list, upstream or here: it is the data for plugins and
//! tools that ask ([`EndpointModels::of`] on the shared resources).
//!
//! What Shepherd cannot do, it says at start ([`ModelsSourceParams::warnings`]): `https` is
//! not polled (the list stays empty), so `insecureSkipVerify`, `caCertPath` and the client
//! certificate are not used.
//!
//! ```
//! use shepherd_runtime::scrape::models::{ModelsSourceParams, parse_models};
//!
//! let params: ModelsSourceParams = serde_json::from_value(serde_json::json!({"interval": "5s"})).unwrap();
//! let source = params.settings("models").unwrap();
//! assert_eq!(source.url("10.0.0.7:8000"), Some("http://10.0.0.7:8000/v1/models".to_string()));
//! assert_eq!(source.interval.unwrap().as_secs(), 5);
//!
//! let body = br#"{"object": "list", "data": [{"id": "llama-3-8b", "parent": "llama-3"}]}"#;
//! let models = parse_models(body).unwrap();
//! assert_eq!(models[0].id, "llama-3-8b");
//! assert_eq!(models[0].parent, "llama-3");
//! ```

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

use parking_lot::RwLock;
use serde::{Deserialize, Serialize};
use shepherd_scheduler_core::flow::parse_go_duration;
use shepherd_scheduler_core::resources::Resources;

/// The type name of the source.
pub const SOURCE_TYPE: &str = "models-data-source";

/// The type name of the extractor.
pub const EXTRACTOR_TYPE: &str = "models-data-extractor";

/// Upstream's attribute key for the list (`/v1/models` plus the producer's type).
pub const ATTRIBUTE_KEY: &str = "/v1/models/models-data-extractor";

/// Models kept per endpoint; the rest of a longer answer is dropped (a warning).
pub const MAX_MODELS: usize = 256;

/// Bytes kept of each text field of a model (cut at a character boundary).
pub const MAX_FIELD_BYTES: usize = 512;

/// Endpoints the table keeps at most (new ones past it are not recorded).
pub const MAX_ENDPOINTS: usize = 16_384;

/// The resource name of the table.
const RESOURCE: &str = "runtime.endpoint-models";

/// The `models-data-source` parameters, as upstream (strictly decoded).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields, default)]
pub struct ModelsSourceParams {
    /// `http` or `https` (default `http`).
    pub scheme: String,
    /// The models API path (default `/v1/models`).
    pub path: String,
    /// With `https`, whether to skip verifying the certificate (default true).
    pub insecure_skip_verify: bool,
    /// With `https`, a PEM CA bundle to verify the server's certificate.
    pub ca_cert_path: String,
    /// With `https`, a client certificate for mTLS (with `clientKeyPath`).
    pub client_cert_path: String,
    /// With `https`, the client certificate's key.
    pub client_key_path: String,
    /// Poll period, a Go duration (`"5s"`); empty: every scrape interval.
    pub interval: String,
}

impl Default for ModelsSourceParams {
    fn default() -> Self {
        ModelsSourceParams {
            scheme: "http".into(),
            path: "/v1/models".into(),
            insecure_skip_verify: true,
            ca_cert_path: String::new(),
            client_cert_path: String::new(),
            client_key_path: String::new(),
            interval: String::new(),
        }
    }
}

/// A models source, ready to poll.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ModelsSettings {
    /// The source plugin's name.
    pub name: String,
    /// `false` for `https`, which Shepherd does not poll.
    pub polled: bool,
    /// The path.
    pub path: String,
    /// The period (`None`: the scrape interval).
    pub interval: Option<Duration>,
}

impl ModelsSourceParams {
    /// Checks the parameters as upstream does: `scheme` `http` or `https`, a valid `interval`,
    /// and with `https` the files it would load (the CA bundle unless `insecureSkipVerify`,
    /// the client certificate and key together) readable; and a path that starts with `/`.
    pub fn settings(&self, name: &str) -> Result<ModelsSettings, String> {
        let name = if name.is_empty() { SOURCE_TYPE } else { name };
        if self.scheme != "http" && self.scheme != "https" {
            return Err(format!("unsupported scheme: {}", self.scheme));
        }
        if !self.path.starts_with('/') {
            return Err(format!("`path`: {:?} must start with `/`", self.path));
        }
        let interval = match self.interval.trim() {
            "" => None,
            text => Some(
                parse_go_duration(text)
                    .filter(|d| !d.is_zero())
                    .ok_or_else(|| format!("invalid interval {text:?}"))?,
            ),
        };
        if self.scheme == "https" {
            if !self.insecure_skip_verify && !self.ca_cert_path.is_empty() {
                readable("caCertPath", &self.ca_cert_path)?;
            }
            if !self.client_cert_path.is_empty() || !self.client_key_path.is_empty() {
                readable("clientCertPath", &self.client_cert_path)?;
                readable("clientKeyPath", &self.client_key_path)?;
            }
        }
        Ok(ModelsSettings {
            name: name.to_string(),
            polled: self.scheme == "http",
            path: self.path.clone(),
            interval,
        })
    }

    /// What Shepherd does with this source, and what it cannot do, for the start-up log.
    pub fn warnings(&self, name: &str) -> Vec<String> {
        let name = if name.is_empty() { SOURCE_TYPE } else { name };
        if self.scheme == "https" {
            return vec![format!(
                "`{name}` ({SOURCE_TYPE}): https polling is not built into this runtime; the \
                 endpoints' {} is not read and their model lists stay empty",
                self.path
            )];
        }
        vec![format!(
            "`{name}` ({SOURCE_TYPE}): every endpoint's http://<endpoint>{} is polled into its \
             model list (the `{ATTRIBUTE_KEY}` attribute); no scheduling plugin reads it, \
             upstream or here",
            self.path
        )]
    }
}

fn readable(field: &str, path: &str) -> Result<(), String> {
    std::fs::metadata(path)
        .map(|_| ())
        .map_err(|e| format!("`{field}`: cannot read {path:?}: {e}"))
}

impl ModelsSettings {
    /// The models page of the endpoint at `address` (`ip:port`); `None` when not polled.
    pub fn url(&self, address: &str) -> Option<String> {
        self.polled
            .then(|| format!("http://{address}{}", self.path))
    }
}

/// One model an endpoint serves (upstream's `ModelData`).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default)]
pub struct ModelData {
    /// The model's id (`llama-3-8b`).
    pub id: String,
    /// The object type (`model`).
    #[serde(skip_serializing_if = "String::is_empty")]
    pub object: String,
    /// The Unix time the server reports.
    #[serde(skip_serializing_if = "is_zero")]
    pub created: i64,
    /// The owner (`vllm`, `sglang`).
    #[serde(skip_serializing_if = "String::is_empty")]
    pub owned_by: String,
    /// The base model of an adapter (LoRA).
    #[serde(skip_serializing_if = "String::is_empty")]
    pub parent: String,
}

fn is_zero(v: &i64) -> bool {
    *v == 0
}

/// The `/v1/models` answer (upstream's `ModelResponse`); unknown keys are ignored, as
/// upstream's decoder ignores them.
#[derive(Debug, Default, Deserialize)]
#[serde(default)]
struct ModelResponse {
    data: Vec<LenientModel>,
}

/// A model entry whose fields may be of any JSON type (wrong types read as empty).
#[derive(Debug, Default, Deserialize)]
#[serde(default)]
struct LenientModel {
    id: serde_json::Value,
    object: serde_json::Value,
    created: serde_json::Value,
    owned_by: serde_json::Value,
    parent: serde_json::Value,
}

/// Why a models answer was not read.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ModelsError {
    /// The body is not a JSON object of upstream's shape.
    #[error("not a /v1/models answer: {0}")]
    Malformed(String),
}

/// Reads a `/v1/models` answer: its `data` entries, at most [`MAX_MODELS`], each text field
/// cut to [`MAX_FIELD_BYTES`]. An entry without an `id` is skipped.
pub fn parse_models(body: &[u8]) -> Result<Vec<ModelData>, ModelsError> {
    let response: ModelResponse =
        serde_json::from_slice(body).map_err(|e| ModelsError::Malformed(e.to_string()))?;
    let text = |v: &serde_json::Value| v.as_str().map(cut).unwrap_or_default();
    Ok(response
        .data
        .iter()
        .filter_map(|m| {
            let id = text(&m.id);
            (!id.is_empty()).then(|| ModelData {
                id,
                object: text(&m.object),
                created: m.created.as_i64().unwrap_or(0),
                owned_by: text(&m.owned_by),
                parent: text(&m.parent),
            })
        })
        .take(MAX_MODELS)
        .collect())
}

fn cut(s: &str) -> String {
    if s.len() <= MAX_FIELD_BYTES {
        return s.to_string();
    }
    let mut end = MAX_FIELD_BYTES;
    while !s.is_char_boundary(end) {
        end -= 1;
    }
    s[..end].to_string()
}

/// The models every endpoint serves, by endpoint address (bounded: see the module docs).
#[derive(Debug, Default)]
pub struct EndpointModels {
    by_address: RwLock<HashMap<String, Arc<[ModelData]>>>,
}

impl EndpointModels {
    /// The table in `resources` (created empty on first use).
    pub fn of(resources: &Resources) -> Arc<EndpointModels> {
        resources.get_or_insert_with(RESOURCE, EndpointModels::default)
    }

    /// The models `address` serves, as last polled (`None`: never read).
    pub fn get(&self, address: &str) -> Option<Arc<[ModelData]>> {
        self.by_address.read().get(address).cloned()
    }

    /// Stores `models` for `address`; returns whether the list changed. A new endpoint past
    /// [`MAX_ENDPOINTS`] is not recorded.
    pub fn set(&self, address: &str, models: Vec<ModelData>) -> bool {
        let mut table = self.by_address.write();
        if let Some(old) = table.get(address)
            && **old == *models
        {
            return false;
        }
        if !table.contains_key(address) && table.len() >= MAX_ENDPOINTS {
            return false;
        }
        table.insert(address.to_string(), models.into());
        true
    }

    /// Forgets `address` (it left the pool).
    pub fn forget(&self, address: &str) {
        self.by_address.write().remove(address);
    }

    /// How many endpoints have a list.
    pub fn len(&self) -> usize {
        self.by_address.read().len()
    }

    /// Whether no endpoint has a list.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]
    use super::*;

    fn params(json: serde_json::Value) -> Result<ModelsSourceParams, String> {
        serde_json::from_value(json).map_err(|e| e.to_string())
    }

    #[test]
    fn upstreams_examples_and_checks() {
        // source/models/README.md: the plugin example and the complete configuration.
        let readme = params(serde_json::json!({
            "scheme": "http", "path": "/v1/models", "insecureSkipVerify": true
        }))
        .unwrap();
        let s = readme.settings("my-models-source").unwrap();
        assert_eq!(
            s.url("10.0.0.1:8000").as_deref(),
            Some("http://10.0.0.1:8000/v1/models")
        );
        assert_eq!(s.interval, None);
        let complete = params(serde_json::json!({
            "scheme": "https", "insecureSkipVerify": false, "interval": "5s"
        }))
        .unwrap();
        let s = complete.settings("vllm-models-source").unwrap();
        assert_eq!(s.url("10.0.0.1:8000"), None);
        assert_eq!(s.interval, Some(Duration::from_secs(5)));
        assert!(complete.warnings("v")[0].contains("not read"));
        assert_eq!(params(serde_json::json!({})).unwrap(), readme);

        // datasource_test.go TestModelDataSourceFactory_TLS: https without certificates
        // loads; missing certificate files are refused.
        assert!(
            params(serde_json::json!({"scheme": "https"}))
                .unwrap()
                .settings("m")
                .is_ok()
        );
        let client = params(serde_json::json!({
            "scheme": "https", "clientCertPath": "/nope/c.pem", "clientKeyPath": "/nope/k.pem"
        }))
        .unwrap();
        assert!(client.settings("m").unwrap_err().contains("clientCertPath"));
        let ca = params(serde_json::json!({
            "scheme": "https", "insecureSkipVerify": false, "caCertPath": "/nope/ca.pem"
        }))
        .unwrap();
        assert!(ca.settings("m").unwrap_err().contains("caCertPath"));
        // The same CA path is not read when verification is skipped.
        let skipped = params(serde_json::json!({
            "scheme": "https", "caCertPath": "/nope/ca.pem"
        }))
        .unwrap();
        assert!(skipped.settings("m").is_ok());

        assert!(
            params(serde_json::json!({"scheme": "ftp"}))
                .unwrap()
                .settings("m")
                .unwrap_err()
                .contains("unsupported scheme")
        );
        assert!(
            params(serde_json::json!({"interval": "soon"}))
                .unwrap()
                .settings("m")
                .is_err()
        );
        assert!(params(serde_json::json!({"port": 1})).is_err());
    }

    #[test]
    fn the_readmes_answer_is_read_field_by_field() {
        // source/models/README.md's expected response, with vLLM's fields.
        let body = br#"{"object": "list", "data": [
            {"id": "llama-3-8b", "parent": "llama-3", "object": "model", "created": 1700000000, "owned_by": "vllm", "max_model_len": 8192},
            {"id": "mistral-7b", "parent": "mistral"},
            {"object": "model"}
        ]}"#;
        let models = parse_models(body).unwrap();
        assert_eq!(models.len(), 2, "the entry without an id is skipped");
        assert_eq!(
            models[0],
            ModelData {
                id: "llama-3-8b".into(),
                object: "model".into(),
                created: 1_700_000_000,
                owned_by: "vllm".into(),
                parent: "llama-3".into(),
            }
        );
        assert_eq!(models[1].parent, "mistral");
        assert!(parse_models(b"not json").is_err());
        assert!(parse_models(b"[1, 2]").is_err());
        assert_eq!(parse_models(b"{}").unwrap(), vec![]);
    }

    #[test]
    fn answers_and_the_table_are_bounded() {
        let data: Vec<serde_json::Value> = (0..MAX_MODELS + 10)
            .map(|i| serde_json::json!({"id": format!("m{i}"), "parent": "é".repeat(400)}))
            .collect();
        let body = serde_json::json!({"data": data}).to_string();
        let models = parse_models(body.as_bytes()).unwrap();
        assert_eq!(models.len(), MAX_MODELS);
        assert!(models[0].parent.len() <= MAX_FIELD_BYTES);
        assert!(models[0].parent.chars().all(|c| c == 'é'));

        let table = EndpointModels::default();
        assert!(table.set("a:1", models.clone()));
        assert!(!table.set("a:1", models.clone()), "unchanged");
        assert!(table.set("a:1", vec![]));
        assert_eq!(table.get("a:1").unwrap().len(), 0);
        table.forget("a:1");
        assert!(table.get("a:1").is_none());
        assert!(table.is_empty());
    }
}
