//! The discovery's state, without I/O: the pool's spec in force and the serving pods, fed by
//! watch events, turned into an [`EndpointSet`] on demand.

use std::collections::HashMap;
use std::net::SocketAddr;

use k8s_openapi::api::core::v1::Pod;

use super::pods::ServingPod;
use super::pool::PoolSpec;
use crate::config::EndpointSpec;
use crate::discovery::EndpointSet;

/// The serving pods by name, with the relist in progress.
#[derive(Debug, Default)]
pub(crate) struct PodTable {
    pods: HashMap<String, ServingPod>,
    /// Pods listed since the watch (re)started; they replace `pods` when the list is done.
    relist: Option<HashMap<String, ServingPod>>,
}

impl PodTable {
    /// A pod added or modified: kept if it serves, dropped otherwise. Returns whether the
    /// table changed.
    pub(crate) fn apply(&mut self, pod: &Pod) -> bool {
        let Some(name) = pod.metadata.name.as_deref() else {
            return false;
        };
        match ServingPod::from_pod(pod) {
            Some(serving) => {
                if self.pods.get(name) == Some(&serving) {
                    false
                } else {
                    self.pods.insert(name.to_string(), serving);
                    true
                }
            }
            None => self.pods.remove(name).is_some(),
        }
    }

    /// A pod deleted. Returns whether the table changed.
    pub(crate) fn delete(&mut self, pod: &Pod) -> bool {
        pod.metadata
            .name
            .as_deref()
            .is_some_and(|name| self.pods.remove(name).is_some())
    }

    /// A (re)list begins: the pods it lists will replace the table when it is done.
    pub(crate) fn begin_relist(&mut self) {
        self.relist = Some(HashMap::new());
    }

    /// A pod of the (re)list.
    pub(crate) fn relisted(&mut self, pod: &Pod) {
        let relist = self.relist.get_or_insert_with(HashMap::new);
        if let (Some(name), Some(serving)) =
            (pod.metadata.name.as_deref(), ServingPod::from_pod(pod))
        {
            relist.insert(name.to_string(), serving);
        }
    }

    /// The (re)list is done: its pods are the table. Returns whether the table changed.
    pub(crate) fn finish_relist(&mut self) -> bool {
        let Some(relist) = self.relist.take() else {
            return false;
        };
        let changed = relist != self.pods;
        self.pods = relist;
        changed
    }

    /// Forgets every pod (the pool is gone).
    pub(crate) fn clear(&mut self) {
        self.pods.clear();
        self.relist = None;
    }

    /// Serving pods.
    pub(crate) fn len(&self) -> usize {
        self.pods.len()
    }

    /// The endpoints of the serving pods that `spec` selects: one per pod and active
    /// target port, labelled with the pod's labels.
    pub(crate) fn endpoints(&self, spec: &PoolSpec) -> EndpointSet {
        let mut list = Vec::new();
        for pod in self.pods.values() {
            let labels = pod.labels.iter().map(|(k, v)| (k.as_str(), v.as_str()));
            if !spec.selector.matches(labels) {
                continue;
            }
            for port in pod.ports(&spec.target_ports) {
                list.push(EndpointSpec {
                    addr: SocketAddr::new(pod.ip, port),
                    labels: pod.labels.clone(),
                });
            }
        }
        EndpointSet::new(list)
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn pod(name: &str, ip: &str, ready: bool, labels: serde_json::Value) -> Pod {
        serde_json::from_value(json!({
            "metadata": {"name": name, "labels": labels},
            "status": {"podIP": ip, "conditions": [
                {"type": "Ready", "status": if ready { "True" } else { "False" }}
            ]},
        }))
        .unwrap()
    }

    fn spec(ports: &[u16]) -> PoolSpec {
        PoolSpec {
            selector: "app=vllm".parse().unwrap(),
            target_ports: ports.to_vec(),
            app_protocol: None,
            endpoint_picker: None,
        }
    }

    #[test]
    fn ready_pods_per_port_and_selector() {
        let mut table = PodTable::default();
        assert!(table.apply(&pod("a", "10.0.0.1", true, json!({"app": "vllm"}))));
        assert!(!table.apply(&pod("a", "10.0.0.1", true, json!({"app": "vllm"}))));
        assert!(table.apply(&pod("b", "10.0.0.2", true, json!({"app": "other"}))));
        assert!(!table.apply(&pod("c", "10.0.0.3", false, json!({"app": "vllm"}))));
        let set = table.endpoints(&spec(&[8000, 8001]));
        assert_eq!(set.addresses(), ["10.0.0.1:8000", "10.0.0.1:8001"]);
        assert!(table.apply(&pod("a", "10.0.0.1", false, json!({"app": "vllm"}))));
        assert!(table.endpoints(&spec(&[8000])).is_empty());
    }

    #[test]
    fn a_relist_replaces_the_table_at_its_end() {
        let mut table = PodTable::default();
        table.apply(&pod("a", "10.0.0.1", true, json!({"app": "vllm"})));
        table.begin_relist();
        table.relisted(&pod("b", "10.0.0.2", true, json!({"app": "vllm"})));
        assert_eq!(table.endpoints(&spec(&[1])).addresses(), ["10.0.0.1:1"]);
        assert!(table.finish_relist());
        assert_eq!(table.endpoints(&spec(&[1])).addresses(), ["10.0.0.2:1"]);
    }
}
