//! What Shepherd keeps of a pod: only a pod that can serve (Ready, not being deleted, with an
//! IP) is kept, and of it only its IP, labels and `llm-d.ai/active-ports` annotation, so 5,000
//! pods cost a few megabytes whatever their specs hold.

use std::collections::BTreeMap;
use std::net::IpAddr;

use k8s_openapi::api::core::v1::Pod;

/// The annotation naming which of the pool's target ports a pod serves on
/// (comma-separated port numbers; ports outside the pool's are ignored).
pub const ACTIVE_PORTS_ANNOTATION: &str = "llm-d.ai/active-ports";

/// The older name of [`ACTIVE_PORTS_ANNOTATION`], read when the new one is absent.
pub const LEGACY_ACTIVE_PORTS_ANNOTATION: &str = "inference.networking.k8s.io/active-ports";

/// Longest `active-ports` annotation kept (8 ports fit in 48 bytes).
const MAX_ACTIVE_PORTS_LEN: usize = 256;

/// A pod that can serve.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ServingPod {
    /// Its IP (`status.podIP`).
    pub ip: IpAddr,
    /// Its labels: they become the endpoints' labels.
    pub labels: BTreeMap<String, String>,
    /// The `active-ports` annotation, when set.
    pub active_ports: Option<String>,
}

impl ServingPod {
    /// The pod, if it can serve: the `Ready` condition true, no deletion timestamp, and a
    /// pod IP that parses. `None` for every other pod (it is not, or no longer, a member).
    ///
    /// ```
    /// use k8s_openapi::api::core::v1::Pod;
    /// use shepherd_runtime::discovery::kubernetes::ServingPod;
    ///
    /// let pod: Pod = serde_json::from_value(serde_json::json!({
    ///     "metadata": {"name": "vllm-0", "labels": {"app": "vllm", "llm-d.ai/role": "decode"}},
    ///     "status": {"podIP": "10.0.0.7", "conditions": [{"type": "Ready", "status": "True"}]},
    /// })).unwrap();
    /// let serving = ServingPod::from_pod(&pod).unwrap();
    /// assert_eq!(serving.ip.to_string(), "10.0.0.7");
    /// assert_eq!(serving.labels["llm-d.ai/role"], "decode");
    /// ```
    pub fn from_pod(pod: &Pod) -> Option<Self> {
        if pod.metadata.deletion_timestamp.is_some() {
            return None;
        }
        let status = pod.status.as_ref()?;
        let ready = status
            .conditions
            .as_deref()
            .unwrap_or_default()
            .iter()
            .any(|c| c.type_ == "Ready" && c.status == "True");
        if !ready {
            return None;
        }
        let ip: IpAddr = status.pod_ip.as_deref()?.trim().parse().ok()?;
        let annotations = pod.metadata.annotations.as_ref();
        let active_ports = annotations
            .and_then(|a| {
                a.get(ACTIVE_PORTS_ANNOTATION)
                    .or_else(|| a.get(LEGACY_ACTIVE_PORTS_ANNOTATION))
            })
            .map(|text| {
                let mut text = text.clone();
                if text.len() > MAX_ACTIVE_PORTS_LEN {
                    let mut end = MAX_ACTIVE_PORTS_LEN;
                    while !text.is_char_boundary(end) {
                        end -= 1;
                    }
                    text.truncate(end);
                }
                text
            });
        Some(ServingPod {
            ip,
            labels: pod.metadata.labels.clone().unwrap_or_default(),
            active_ports,
        })
    }

    /// The ports of `target_ports` this pod serves on, in the pool's order: all of them
    /// without the annotation; with it, those it names (an empty or unparsable annotation
    /// names none, as upstream reads it).
    ///
    /// ```
    /// use shepherd_runtime::discovery::kubernetes::active_ports;
    ///
    /// assert_eq!(active_ports(None, &[8000, 8001]), [8000, 8001]);
    /// assert_eq!(active_ports(Some("8001, 9999"), &[8000, 8001]), [8001]);
    /// assert!(active_ports(Some(""), &[8000, 8001]).is_empty());
    /// ```
    pub fn ports(&self, target_ports: &[u16]) -> Vec<u16> {
        active_ports(self.active_ports.as_deref(), target_ports)
    }
}

/// The ports of `target_ports` named by an `active-ports` annotation (see
/// [`ServingPod::ports`]). Each entry is trimmed and read as a leading decimal number, as
/// upstream's `%d` scan does.
pub fn active_ports(annotation: Option<&str>, target_ports: &[u16]) -> Vec<u16> {
    let Some(annotation) = annotation else {
        return target_ports.to_vec();
    };
    let named: Vec<u16> = annotation
        .split(',')
        .filter_map(|entry| {
            let entry = entry.trim();
            let digits = entry.trim_start_matches('+');
            let end = digits
                .find(|c: char| !c.is_ascii_digit())
                .unwrap_or(digits.len());
            digits[..end].parse::<u16>().ok().filter(|&p| p > 0)
        })
        .collect();
    target_ports
        .iter()
        .copied()
        .filter(|p| named.contains(p))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pod(value: serde_json::Value) -> Pod {
        serde_json::from_value(value).unwrap()
    }

    #[test]
    fn only_ready_live_pods_with_an_ip_serve() {
        let ready = serde_json::json!({"type": "Ready", "status": "True"});
        let not_ready = serde_json::json!({"type": "Ready", "status": "False"});
        assert!(ServingPod::from_pod(&pod(serde_json::json!({}))).is_none());
        assert!(
            ServingPod::from_pod(&pod(serde_json::json!({"status": {"conditions": [ready]}})))
                .is_none(),
            "no IP"
        );
        assert!(
            ServingPod::from_pod(&pod(serde_json::json!({
                "status": {"podIP": "10.0.0.1", "conditions": [not_ready]}
            })))
            .is_none()
        );
        assert!(
            ServingPod::from_pod(&pod(serde_json::json!({
                "metadata": {"deletionTimestamp": "2026-01-01T00:00:00Z"},
                "status": {"podIP": "10.0.0.1", "conditions": [ready]}
            })))
            .is_none()
        );
        let legacy = ServingPod::from_pod(&pod(serde_json::json!({
            "metadata": {"annotations": {LEGACY_ACTIVE_PORTS_ANNOTATION: "8001"}},
            "status": {"podIP": "10.0.0.1", "conditions": [ready]}
        })))
        .unwrap();
        assert_eq!(legacy.ports(&[8000, 8001]), [8001]);
    }

    #[test]
    fn annotation_entries_as_upstream_scans_them() {
        assert_eq!(active_ports(Some("8000abc,x,0"), &[8000, 8001]), [8000]);
        assert_eq!(
            active_ports(Some(" 8001 ,8000"), &[8000, 8001]),
            [8000, 8001]
        );
    }
}
