//! Objects shaped as the API server serves them: core/v1 Pods, and InferencePools,
//! InferenceObjectives and InferenceModelRewrites as upstream's CRDs define them.

use serde_json::{Value, json};

/// A model-server pod: `name` in `namespace`, `labels`, a vLLM container listening on
/// `ports`, the given IP (`None`: not yet assigned) and Ready condition.
pub fn pod(
    namespace: &str,
    name: &str,
    labels: &[(&str, &str)],
    ip: Option<&str>,
    ready: bool,
    ports: &[u16],
) -> Value {
    let labels: serde_json::Map<String, Value> = labels
        .iter()
        .map(|(k, v)| ((*k).to_string(), json!(v)))
        .collect();
    let container_ports: Vec<Value> = ports
        .iter()
        .map(|p| json!({"containerPort": p, "name": format!("http-{p}"), "protocol": "TCP"}))
        .collect();
    let ready_text = if ready { "True" } else { "False" };
    let mut status = json!({
        "phase": if ip.is_some() { "Running" } else { "Pending" },
        "conditions": [
            {"type": "PodScheduled", "status": "True", "lastTransitionTime": "2026-01-01T00:00:00Z"},
            {"type": "Initialized", "status": "True", "lastTransitionTime": "2026-01-01T00:00:00Z"},
            {"type": "ContainersReady", "status": ready_text, "lastTransitionTime": "2026-01-01T00:00:00Z"},
            {"type": "Ready", "status": ready_text, "lastTransitionTime": "2026-01-01T00:00:00Z"},
        ],
        "hostIP": "192.0.2.1",
        "startTime": "2026-01-01T00:00:00Z",
    });
    if let Some(ip) = ip {
        status["podIP"] = json!(ip);
        status["podIPs"] = json!([{"ip": ip}]);
    }
    json!({
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "namespace": namespace, "labels": labels},
        "spec": {
            "containers": [{
                "name": "vllm",
                "image": "vllm/vllm-openai:latest",
                "ports": container_ports,
            }],
            "nodeName": "node-1",
            "restartPolicy": "Always",
        },
        "status": status,
    })
}

/// Sets a pod's Ready condition (and ContainersReady).
pub fn set_ready(pod: &mut Value, ready: bool) {
    let text = if ready { "True" } else { "False" };
    if let Some(conditions) = pod
        .pointer_mut("/status/conditions")
        .and_then(Value::as_array_mut)
    {
        for condition in conditions {
            if matches!(
                condition["type"].as_str(),
                Some("Ready" | "ContainersReady")
            ) {
                condition["status"] = json!(text);
            }
        }
    }
}

/// Sets a pod annotation.
pub fn annotate(pod: &mut Value, key: &str, value: &str) {
    if !pod["metadata"]["annotations"].is_object() {
        pod["metadata"]["annotations"] = json!({});
    }
    pod["metadata"]["annotations"][key] = json!(value);
}

/// An `inference.networking.k8s.io/v1` InferencePool selecting `labels` on `ports`, with
/// an endpoint picker reference to `picker`.
pub fn inference_pool(
    namespace: &str,
    name: &str,
    labels: &[(&str, &str)],
    ports: &[u16],
) -> Value {
    let match_labels: serde_json::Map<String, Value> = labels
        .iter()
        .map(|(k, v)| ((*k).to_string(), json!(v)))
        .collect();
    let target_ports: Vec<Value> = ports.iter().map(|p| json!({"number": p})).collect();
    json!({
        "apiVersion": "inference.networking.k8s.io/v1",
        "kind": "InferencePool",
        "metadata": {"name": name, "namespace": namespace},
        "spec": {
            "selector": {"matchLabels": match_labels},
            "targetPorts": target_ports,
            "appProtocol": "http",
            "endpointPickerRef": {
                "group": "",
                "kind": "Service",
                "name": "shepherd-epp",
                "port": {"number": 9002},
                "failureMode": "FailClose",
            },
        },
    })
}

/// An `inference.networking.x-k8s.io/v1alpha2` InferencePool (one port, a plain selector
/// map, `extensionRef`).
pub fn inference_pool_v1alpha2(
    namespace: &str,
    name: &str,
    labels: &[(&str, &str)],
    port: u16,
) -> Value {
    let selector: serde_json::Map<String, Value> = labels
        .iter()
        .map(|(k, v)| ((*k).to_string(), json!(v)))
        .collect();
    json!({
        "apiVersion": "inference.networking.x-k8s.io/v1alpha2",
        "kind": "InferencePool",
        "metadata": {"name": name, "namespace": namespace},
        "spec": {
            "selector": selector,
            "targetPortNumber": port,
            "extensionRef": {"name": "shepherd-epp", "portNumber": 9002, "failureMode": "FailClose"},
        },
    })
}

/// An `InferenceObjective` of `pool` (group `inference.networking.k8s.io`) with `priority`.
pub fn inference_objective(
    namespace: &str,
    name: &str,
    pool: &str,
    priority: Option<i32>,
) -> Value {
    let mut spec = json!({"poolRef": {"group": "inference.networking.k8s.io", "name": pool}});
    if let Some(priority) = priority {
        spec["priority"] = json!(priority);
    }
    json!({"metadata": {"namespace": namespace, "name": name}, "spec": spec})
}

/// An `InferenceModelRewrite` of `pool` with one rule: `model` (exact; `None`: every model)
/// to the weighted `targets`.
pub fn inference_model_rewrite(
    namespace: &str,
    name: &str,
    pool: &str,
    model: Option<&str>,
    targets: &[(&str, Option<u32>)],
) -> Value {
    let targets: Vec<Value> = targets
        .iter()
        .map(|(target, weight)| match weight {
            Some(w) => json!({"modelRewrite": target, "weight": w}),
            None => json!({"modelRewrite": target}),
        })
        .collect();
    let mut rule = json!({"targets": targets});
    if let Some(model) = model {
        rule["matches"] = json!([{"model": {"type": "Exact", "value": model}}]);
    }
    json!({
        "metadata": {"namespace": namespace, "name": name},
        "spec": {
            "poolRef": {"group": "inference.networking.k8s.io", "kind": "InferencePool", "name": pool},
            "rules": [rule]
        }
    })
}
