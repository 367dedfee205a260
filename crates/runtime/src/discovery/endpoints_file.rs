//! Endpoints from a file: upstream's `file-discovery` (`dataLayer.discovery`), or Shepherd's
//! `discovery.file` section.
//!
//! The file is YAML (or JSON, which YAML reads) of at most [`MAX_FILE_BYTES`]:
//!
//! ```yaml
//! endpoints:
//!   - name: vllm-0            # required, unique within the file
//!     namespace: default      # optional
//!     address: "10.0.0.1"     # required: an IPv4 address
//!     port: "8000"            # required: 1 to 65535, as a string (a number is read too)
//!     labels: {llm-d.ai/role: decode}
//! ```
//!
//! As upstream: the file is read at start, and a file that cannot be read or parsed stops
//! the start; an entry with a bad address or port (or a repeated name) is skipped with a
//! warning. With `watchFile: true` the file is read again whenever it changes (polled every
//! [`DEFAULT_POLL_INTERVAL`](super::DEFAULT_POLL_INTERVAL), which sees editors' renames and
//! ConfigMap symlink swaps as upstream's fsnotify watch does), and endpoints no longer listed
//! leave the pool; a version that does not parse is logged and the endpoints in force stay.
//! Shepherd names endpoints by `ip:port`, so `name` and `namespace` are checked and not kept.
//!
//! ```
//! use shepherd_runtime::discovery::parse_endpoints_file;
//!
//! let (set, skipped) = parse_endpoints_file(br#"
//! endpoints:
//!   - {name: vllm-0, address: "127.0.0.1", port: "8000", labels: {zone: a}}
//!   - {name: vllm-1, address: "localhost", port: "8001"}
//! "#).unwrap();
//! assert_eq!(set.addresses(), ["127.0.0.1:8000"]);
//! assert_eq!(set.get("127.0.0.1:8000").unwrap().label("zone"), Some("a"));
//! assert!(skipped[0].contains("vllm-1"));
//! ```

use std::collections::{BTreeMap, BTreeSet};
use std::net::{Ipv4Addr, SocketAddr};
use std::path::PathBuf;
use std::sync::Arc;

use serde::Deserialize;
use tokio::sync::watch;
use tokio::task::AbortHandle;

use super::{DEFAULT_POLL_INTERVAL, Discovery, EndpointSet, FileWatcher};
use crate::config::{EndpointSpec, FileDiscoveryConfig};

/// Largest endpoints file read: 1 MiB, as upstream.
pub const MAX_FILE_BYTES: usize = 1 << 20;

/// Most endpoints taken from one file (more are skipped with a warning).
pub const MAX_FILE_ENDPOINTS: usize = 10_000;

/// An endpoints file's top level: its `endpoints` list, of `E` (this module's entries, or the
/// multi-cluster file's).
#[derive(Debug, Deserialize)]
struct EndpointsFile<E> {
    #[serde(default = "Vec::new")]
    endpoints: Vec<E>,
}

/// The `endpoints` list of an endpoints file (an empty file: none).
///
/// # Errors
///
/// A file over [`MAX_FILE_BYTES`], not UTF-8, or one that does not parse.
pub(crate) fn read_entries<E: serde::de::DeserializeOwned>(bytes: &[u8]) -> Result<Vec<E>, String> {
    if bytes.len() > MAX_FILE_BYTES {
        return Err(format!(
            "the endpoints file is {} bytes, over the {MAX_FILE_BYTES}-byte limit",
            bytes.len()
        ));
    }
    let text = std::str::from_utf8(bytes).map_err(|e| format!("not UTF-8: {e}"))?;
    if text.trim().is_empty() {
        return Ok(Vec::new());
    }
    let file: EndpointsFile<E> = serde_norway::from_str(text).map_err(|e| e.to_string())?;
    Ok(file.endpoints)
}

#[derive(Debug, Deserialize)]
struct Entry {
    #[serde(default)]
    name: String,
    #[serde(default)]
    address: String,
    #[serde(default)]
    port: Port,
    #[serde(default)]
    labels: BTreeMap<String, String>,
}

/// A port as upstream writes it (a string), or as a number.
#[derive(Debug, Default, Deserialize)]
#[serde(untagged)]
enum Port {
    #[default]
    Missing,
    Text(String),
    Number(i64),
}

impl Port {
    fn get(&self) -> Option<u16> {
        let n = match self {
            Port::Missing => return None,
            Port::Text(t) => t.trim().parse::<i64>().ok()?,
            Port::Number(n) => *n,
        };
        u16::try_from(n).ok().filter(|p| *p > 0)
    }
}

/// Reads an endpoints file: the endpoints, and a message for each entry skipped.
///
/// # Errors
///
/// A file over [`MAX_FILE_BYTES`], or one that does not parse as the schema above.
pub fn parse_endpoints_file(bytes: &[u8]) -> Result<(EndpointSet, Vec<String>), String> {
    let entries: Vec<Entry> = read_entries(bytes)?;
    let mut skipped = Vec::new();
    let mut names = BTreeSet::new();
    let mut specs = Vec::new();
    for (i, e) in entries.into_iter().enumerate() {
        let name = if e.name.is_empty() {
            format!("endpoints[{i}]")
        } else {
            e.name.clone()
        };
        if e.name.is_empty() {
            skipped.push(format!("endpoint {name}: `name` is required"));
            continue;
        }
        if !names.insert(e.name.clone()) {
            skipped.push(format!("endpoint {name:?}: the name is listed twice"));
            continue;
        }
        let Ok(ip) = e.address.trim().parse::<Ipv4Addr>() else {
            skipped.push(format!(
                "endpoint {name:?}: invalid IPv4 address {:?}",
                e.address
            ));
            continue;
        };
        let Some(port) = e.port.get() else {
            skipped.push(format!("endpoint {name:?}: invalid port {:?}", e.port));
            continue;
        };
        if specs.len() == MAX_FILE_ENDPOINTS {
            skipped.push(format!(
                "endpoint {name:?}: over {MAX_FILE_ENDPOINTS} endpoints"
            ));
            continue;
        }
        let mut spec = EndpointSpec::new(SocketAddr::from((ip, port)));
        spec.labels = e.labels;
        specs.push(spec);
    }
    Ok((EndpointSet::new(specs), skipped))
}

/// Parses a file of pods, or with `multicluster` of clusters (hostnames resolved).
async fn parse_for(bytes: &[u8], multicluster: bool) -> Result<(EndpointSet, Vec<String>), String> {
    if !multicluster {
        return parse_endpoints_file(bytes);
    }
    let (clusters, mut skipped) = crate::multicluster::parse_clusters_file(bytes)?;
    let (set, unresolved) = crate::multicluster::discovery::resolve(clusters).await;
    skipped.extend(unresolved);
    Ok((set, skipped))
}

/// Reads `path` and parses it, logging each skipped entry; also returns the bytes read.
async fn load(path: &PathBuf, multicluster: bool) -> Result<(EndpointSet, Vec<u8>), String> {
    let bytes = read_bounded(path).await?;
    let (set, skipped) = parse_for(&bytes, multicluster).await?;
    for reason in &skipped {
        tracing::warn!(path = %path.display(), "endpoints file: {reason}; skipped");
    }
    Ok((set, bytes))
}

async fn read_bounded(path: &PathBuf) -> Result<Vec<u8>, String> {
    use tokio::io::AsyncReadExt;
    let file = tokio::fs::File::open(path)
        .await
        .map_err(|e| format!("reading {}: {e}", path.display()))?;
    let mut bytes = Vec::new();
    file.take(MAX_FILE_BYTES as u64 + 1)
        .read_to_end(&mut bytes)
        .await
        .map_err(|e| format!("reading {}: {e}", path.display()))?;
    Ok(bytes)
}

/// The endpoints of a file (see the module docs); with `watchFile`, a task follows it until
/// this source is dropped.
#[derive(Debug)]
pub struct EndpointsFileDiscovery {
    tx: watch::Sender<Arc<EndpointSet>>,
    watch: Option<AbortHandle>,
}

impl EndpointsFileDiscovery {
    /// Reads the file once and, with `watchFile`, starts following it (on the current tokio
    /// runtime).
    ///
    /// # Errors
    ///
    /// The file cannot be read or parsed (as upstream, the start fails).
    pub async fn start(config: &FileDiscoveryConfig) -> Result<Self, String> {
        let path = PathBuf::from(&config.path);
        let multicluster = config.multicluster;
        let (set, loaded) = load(&path, multicluster).await?;
        tracing::info!(
            path = %path.display(),
            endpoints = set.len(),
            watch = config.watch_file,
            "endpoints file loaded"
        );
        let (tx, _rx) = watch::channel(Arc::new(set));
        let watch = config.watch_file.then(|| {
            let tx = tx.clone();
            let task = async move {
                let mut watcher = FileWatcher::new(&path, DEFAULT_POLL_INTERVAL);
                // The version loaded above, so an edit made before this task runs is seen.
                watcher.assume(&loaded);
                loop {
                    let loaded = match watcher.changed().await {
                        Ok(text) => parse_for(text.as_bytes(), multicluster).await,
                        Err(error) => Err(error.to_string()),
                    };
                    match loaded {
                        Ok((set, skipped)) => {
                            for reason in &skipped {
                                tracing::warn!(path = %path.display(), "endpoints file: {reason}; skipped");
                            }
                            tracing::info!(path = %path.display(), endpoints = set.len(), "endpoints file changed, reloaded");
                            tx.send_if_modified(|current| {
                                if **current == set {
                                    false
                                } else {
                                    *current = Arc::new(set);
                                    true
                                }
                            });
                        }
                        Err(error) => tracing::error!(
                            path = %path.display(),
                            %error,
                            "endpoints file changed but does not load; the endpoints in force stay"
                        ),
                    }
                }
            };
            tokio::spawn(task).abort_handle()
        });
        Ok(EndpointsFileDiscovery { tx, watch })
    }

    /// The current set.
    pub fn current(&self) -> Arc<EndpointSet> {
        Arc::clone(&self.tx.borrow())
    }
}

impl Drop for EndpointsFileDiscovery {
    fn drop(&mut self) {
        if let Some(watch) = &self.watch {
            watch.abort();
        }
    }
}

impl Discovery for EndpointsFileDiscovery {
    fn name(&self) -> &str {
        "file"
    }

    fn subscribe(&self) -> watch::Receiver<Arc<EndpointSet>> {
        self.tx.subscribe()
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]
    use super::*;

    #[test]
    fn upstreams_example_file_loads() {
        // datalayer/discovery/file/README.md: the two-endpoint file.
        let (set, skipped) = parse_endpoints_file(
            b"endpoints:\n  - name: vllm-0\n    address: \"10.0.0.1\"\n    port: \"8000\"\n  - name: vllm-1\n    address: \"10.0.0.2\"\n    port: \"8000\"\n",
        )
        .unwrap();
        assert_eq!(set.addresses(), ["10.0.0.1:8000", "10.0.0.2:8000"]);
        assert!(skipped.is_empty());
    }

    #[test]
    fn bad_entries_are_skipped_and_bad_files_refused() {
        let (set, skipped) = parse_endpoints_file(
            br#"{"endpoints": [
                {"name": "a", "address": "10.0.0.1", "port": "0"},
                {"name": "b", "address": "::1", "port": "8000"},
                {"name": "c", "address": "10.0.0.3", "port": 8000},
                {"name": "c", "address": "10.0.0.4", "port": "8000"},
                {"address": "10.0.0.5", "port": "8000"}
            ]}"#,
        )
        .unwrap();
        assert_eq!(set.addresses(), ["10.0.0.3:8000"]);
        assert_eq!(skipped.len(), 4, "{skipped:?}");
        assert!(parse_endpoints_file(b"endpoints: 7").is_err());
        assert!(parse_endpoints_file(&vec![b' '; MAX_FILE_BYTES + 1]).is_err());
        assert!(parse_endpoints_file(b"").unwrap().0.is_empty());
    }
}
