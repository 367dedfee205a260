//! The Kubernetes manifests of `examples/deploy/kubernetes/` are valid: the InferencePool
//! against a structural check written from the upstream CRD
//! (`inferencepools.inference.networking.k8s.io`, version `v1`, of the Gateway API Inference
//! Extension: its required fields, types, enums, patterns and limits), and the objects
//! against each other (the pool's picker is the Service, the Service reaches the Deployment's
//! ports, the ConfigMap is a Shepherd config listening where they say, the Deployment names
//! the pool with `--pool-name` and runs as a service account whose Role can watch what the
//! picker watches, the HTTPRoute sends to the pool).
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::collections::BTreeSet;
use std::path::Path;

use serde::Deserialize;
use serde_json::{Value, json};

fn manifests() -> Vec<Value> {
    manifest_file("shepherd-epp.yaml")
}

fn manifest_file(name: &str) -> Vec<Value> {
    let path = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../../examples/deploy/kubernetes")
        .join(name);
    let text = std::fs::read_to_string(path).unwrap();
    serde_norway::Deserializer::from_str(&text)
        .map(|doc| Value::deserialize(doc).unwrap())
        .collect()
}

fn object<'a>(docs: &'a [Value], kind: &str) -> &'a Value {
    let found: Vec<&Value> = docs.iter().filter(|d| d["kind"] == kind).collect();
    assert_eq!(found.len(), 1, "one {kind}");
    found[0]
}

/// Whether `s` matches `^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$`
/// (a DNS subdomain; the empty string is allowed separately).
fn is_dns_subdomain(s: &str) -> bool {
    let label_ok = |l: &str| {
        !l.is_empty()
            && l.bytes()
                .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-')
            && !l.starts_with('-')
            && !l.ends_with('-')
    };
    s.split('.').all(label_ok)
}

/// `^[a-zA-Z]([-a-zA-Z0-9]*[a-zA-Z0-9])?$`
fn is_kind(s: &str) -> bool {
    let b = s.as_bytes();
    !b.is_empty()
        && b[0].is_ascii_alphabetic()
        && b.iter().all(|c| c.is_ascii_alphanumeric() || *c == b'-')
        && !s.ends_with('-')
}

/// `^(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?$`, at most 63 characters.
fn is_label_value(s: &str) -> bool {
    let b = s.as_bytes();
    s.len() <= 63
        && (b.is_empty()
            || (b[0].is_ascii_alphanumeric()
                && b[b.len() - 1].is_ascii_alphanumeric()
                && b.iter()
                    .all(|c| c.is_ascii_alphanumeric() || matches!(c, b'-' | b'_' | b'.'))))
}

fn port_number(v: &Value, at: &str, errors: &mut Vec<String>) -> Option<i64> {
    match v.as_i64() {
        Some(n) if (1..=65535).contains(&n) => Some(n),
        _ => {
            errors.push(format!("{at}: an integer in 1..=65535"));
            None
        }
    }
}

/// Checks a port object `{number}` (required, nothing else).
fn port_object(v: &Value, at: &str, errors: &mut Vec<String>) -> Option<i64> {
    let Some(map) = v.as_object() else {
        errors.push(format!("{at}: an object"));
        return None;
    };
    for key in map.keys().filter(|k| *k != "number") {
        errors.push(format!("{at}.{key}: unknown field"));
    }
    match map.get("number") {
        Some(n) => port_number(n, &format!("{at}.number"), errors),
        None => {
            errors.push(format!("{at}.number: required"));
            None
        }
    }
}

fn string<'a>(v: &'a Value, at: &str, errors: &mut Vec<String>) -> Option<&'a str> {
    let s = v.as_str();
    if s.is_none() {
        errors.push(format!("{at}: a string"));
    }
    s
}

/// The InferencePool `v1` schema, structurally. Returns every violation.
fn check_inference_pool(pool: &Value) -> Vec<String> {
    let mut errors = Vec::new();
    if pool["apiVersion"] != "inference.networking.k8s.io/v1" {
        errors.push("apiVersion: inference.networking.k8s.io/v1".into());
    }
    if pool["kind"] != "InferencePool" {
        errors.push("kind: InferencePool".into());
    }
    if !pool["metadata"]["name"]
        .as_str()
        .is_some_and(is_dns_subdomain)
    {
        errors.push("metadata.name: a DNS subdomain".into());
    }
    let Some(spec) = pool["spec"].as_object() else {
        errors.push("spec: required object".into());
        return errors;
    };
    let known = [
        "selector",
        "targetPorts",
        "appProtocol",
        "endpointPickerRef",
    ];
    for key in spec.keys().filter(|k| !known.contains(&k.as_str())) {
        errors.push(format!("spec.{key}: unknown field"));
    }

    // selector: required {matchLabels: 1..=64 label values}.
    match spec.get("selector").and_then(Value::as_object) {
        None => errors.push("spec.selector: required object".into()),
        Some(selector) => {
            for key in selector.keys().filter(|k| *k != "matchLabels") {
                errors.push(format!("spec.selector.{key}: unknown field"));
            }
            match selector.get("matchLabels").and_then(Value::as_object) {
                None => errors.push("spec.selector.matchLabels: required object".into()),
                Some(labels) => {
                    if !(1..=64).contains(&labels.len()) {
                        errors.push("spec.selector.matchLabels: 1 to 64 entries".into());
                    }
                    for (key, value) in labels {
                        let at = format!("spec.selector.matchLabels.{key}");
                        if let Some(value) = string(value, &at, &mut errors)
                            && !is_label_value(value)
                        {
                            errors.push(format!("{at}: not a label value: {value:?}"));
                        }
                    }
                }
            }
        }
    }

    // targetPorts: required, 1..=8 items of {number}, numbers unique.
    match spec.get("targetPorts").and_then(Value::as_array) {
        None => errors.push("spec.targetPorts: required array".into()),
        Some(ports) => {
            if !(1..=8).contains(&ports.len()) {
                errors.push("spec.targetPorts: 1 to 8 items".into());
            }
            let mut seen = BTreeSet::new();
            for (i, port) in ports.iter().enumerate() {
                if let Some(n) = port_object(port, &format!("spec.targetPorts[{i}]"), &mut errors)
                    && !seen.insert(n)
                {
                    errors.push(format!("spec.targetPorts: port number {n} must be unique"));
                }
            }
        }
    }

    // appProtocol: optional enum (default http).
    if let Some(protocol) = spec.get("appProtocol")
        && !matches!(protocol.as_str(), Some("http" | "kubernetes.io/h2c"))
    {
        errors.push(format!(
            "spec.appProtocol: http or kubernetes.io/h2c, not {protocol}"
        ));
    }

    // endpointPickerRef: optional; name required; port required when kind is Service.
    if let Some(picker) = spec.get("endpointPickerRef") {
        match picker.as_object() {
            None => errors.push("spec.endpointPickerRef: an object".into()),
            Some(map) => {
                let known = ["group", "kind", "name", "port", "failureMode"];
                for key in map.keys().filter(|k| !known.contains(&k.as_str())) {
                    errors.push(format!("spec.endpointPickerRef.{key}: unknown field"));
                }
                if let Some(group) = map.get("group")
                    && let Some(group) = string(group, "spec.endpointPickerRef.group", &mut errors)
                    && !(group.is_empty() || (group.len() <= 253 && is_dns_subdomain(group)))
                {
                    errors.push(format!("spec.endpointPickerRef.group: {group:?}"));
                }
                let kind = match map.get("kind") {
                    None => "Service",
                    Some(kind) => {
                        let kind =
                            string(kind, "spec.endpointPickerRef.kind", &mut errors).unwrap_or("");
                        if kind.len() > 63 || !is_kind(kind) {
                            errors.push(format!("spec.endpointPickerRef.kind: {kind:?}"));
                        }
                        kind
                    }
                };
                match map.get("name") {
                    None => errors.push("spec.endpointPickerRef.name: required".into()),
                    Some(name) => {
                        if let Some(name) = string(name, "spec.endpointPickerRef.name", &mut errors)
                            && !(1..=253).contains(&name.len())
                        {
                            errors.push("spec.endpointPickerRef.name: 1 to 253 characters".into());
                        }
                    }
                }
                match map.get("port") {
                    Some(port) => {
                        port_object(port, "spec.endpointPickerRef.port", &mut errors);
                    }
                    None if kind == "Service" => errors.push(
                        "spec.endpointPickerRef.port: required when kind is 'Service' or unspecified"
                            .into(),
                    ),
                    None => {}
                }
                if let Some(mode) = map.get("failureMode")
                    && !matches!(mode.as_str(), Some("FailOpen" | "FailClose"))
                {
                    errors.push(format!(
                        "spec.endpointPickerRef.failureMode: FailOpen or FailClose, not {mode}"
                    ));
                }
            }
        }
    }
    errors
}

#[test]
fn the_inference_pool_matches_the_upstream_schema() {
    let docs = manifests();
    let pool = object(&docs, "InferencePool");
    assert_eq!(check_inference_pool(pool), Vec::<String>::new());
}

#[test]
fn the_schema_check_catches_what_the_crd_rejects() {
    let docs = manifests();
    let good = object(&docs, "InferencePool").clone();
    let broken = |edit: &dyn Fn(&mut Value)| {
        let mut pool = good.clone();
        edit(&mut pool);
        check_inference_pool(&pool)
    };
    type Edit = Box<dyn Fn(&mut Value)>;
    let cases: Vec<(&str, Edit)> = vec![
        (
            "targetPorts",
            Box::new(|p| {
                p["spec"].as_object_mut().unwrap().remove("targetPorts");
            }),
        ),
        (
            "selector",
            Box::new(|p| {
                p["spec"].as_object_mut().unwrap().remove("selector");
            }),
        ),
        (
            "must be unique",
            Box::new(|p| p["spec"]["targetPorts"] = json!([{"number": 8000}, {"number": 8000}])),
        ),
        (
            "1 to 8 items",
            Box::new(|p| p["spec"]["targetPorts"] = json!([])),
        ),
        (
            "1..=65535",
            Box::new(|p| p["spec"]["targetPorts"] = json!([{"number": 70000}])),
        ),
        (
            "not a label value",
            Box::new(|p| p["spec"]["selector"]["matchLabels"]["app"] = json!("-bad-")),
        ),
        (
            "required when kind",
            Box::new(|p| {
                p["spec"]["endpointPickerRef"]
                    .as_object_mut()
                    .unwrap()
                    .remove("port");
            }),
        ),
        (
            "FailOpen or FailClose",
            Box::new(|p| p["spec"]["endpointPickerRef"]["failureMode"] = json!("Maybe")),
        ),
        (
            "http or kubernetes.io/h2c",
            Box::new(|p| p["spec"]["appProtocol"] = json!("grpc")),
        ),
        (
            "unknown field",
            Box::new(|p| p["spec"]["targetPortNumber"] = json!(8000)),
        ),
        (
            "apiVersion",
            Box::new(|p| p["apiVersion"] = json!("inference.networking.x-k8s.io/v1alpha2")),
        ),
    ];
    for (expected, edit) in cases {
        let errors = broken(edit.as_ref());
        assert!(
            errors.iter().any(|e| e.contains(expected)),
            "expected an error containing {expected:?}, got {errors:?}"
        );
    }
    // A picker that is not a Service needs no port.
    let errors = broken(&|p| {
        p["spec"]["endpointPickerRef"] =
            json!({"kind": "Backend", "group": "example.com", "name": "x"})
    });
    assert_eq!(errors, Vec::<String>::new());
}

#[test]
fn the_manifests_agree_with_each_other_and_with_shepherd() {
    let docs = manifests();
    assert_eq!(docs.len(), 8);
    let (config_map, deployment, service, pool) = (
        object(&docs, "ConfigMap"),
        object(&docs, "Deployment"),
        object(&docs, "Service"),
        object(&docs, "InferencePool"),
    );

    // The ConfigMap holds a Shepherd config that loads, listening on every interface.
    let text = config_map["data"]["shepherd.yaml"].as_str().unwrap();
    let config = shepherd_runtime::config::RuntimeConfig::from_yaml(text).unwrap();
    assert!(config.warnings().is_empty());
    assert!(config.server.bind_address.is_unspecified());
    // No endpoint list anywhere: the pool's pods are discovered.
    assert!(config.endpoints.is_empty());

    // The pool's picker is the Service, on the ext_proc port of the config.
    let picker = &pool["spec"]["endpointPickerRef"];
    assert_eq!(picker["name"], service["metadata"]["name"]);
    assert_eq!(picker["failureMode"], "FailClose");
    let picker_port = picker["port"]["number"].as_u64().unwrap();
    assert_eq!(picker_port, u64::from(config.server.extproc_port));

    // The Service selects the Deployment's pods and reaches its named ports.
    let pod = &deployment["spec"]["template"];
    let pod_labels = pod["metadata"]["labels"].as_object().unwrap();
    for (key, value) in service["spec"]["selector"].as_object().unwrap() {
        assert_eq!(pod_labels.get(key), Some(value), "service selector {key}");
    }
    assert_eq!(
        deployment["spec"]["selector"]["matchLabels"],
        pod["metadata"]["labels"]
    );
    // ... and the pool does not select the picker's own pods.
    let pool_labels = pool["spec"]["selector"]["matchLabels"].as_object().unwrap();
    assert!(
        pool_labels
            .iter()
            .any(|(k, v)| pod_labels.get(k) != Some(v))
    );
    let container = &pod["spec"]["containers"][0];
    let container_ports: Vec<(&str, u64)> = container["ports"]
        .as_array()
        .unwrap()
        .iter()
        .map(|p| {
            (
                p["name"].as_str().unwrap(),
                p["containerPort"].as_u64().unwrap(),
            )
        })
        .collect();
    let service_ports = service["spec"]["ports"].as_array().unwrap();
    let grpc = service_ports
        .iter()
        .find(|p| p["port"].as_u64() == Some(picker_port))
        .expect("the Service exposes the picker port");
    assert_eq!(grpc["appProtocol"], "http2", "ext_proc is gRPC: HTTP/2");
    for port in service_ports {
        let target = port["targetPort"].as_str().unwrap();
        let (_, container_port) = container_ports
            .iter()
            .find(|(name, _)| *name == target)
            .unwrap_or_else(|| panic!("container port {target}"));
        assert_eq!(Some(*container_port), port["port"].as_u64());
    }
    let expect = [
        ("grpc", config.server.extproc_port),
        ("grpc-health", config.server.health_port),
        ("metrics", config.server.metrics_port),
    ];
    for (name, port) in expect {
        assert!(container_ports.contains(&(name, u64::from(port))), "{name}");
    }

    // The container runs shepherd-epp on the mounted ConfigMap.
    let args: Vec<&str> = container["args"]
        .as_array()
        .unwrap()
        .iter()
        .map(|a| a.as_str().unwrap())
        .collect();
    let config_arg = args[args.iter().position(|a| *a == "--config").unwrap() + 1];
    let mount = container["volumeMounts"][0]["mountPath"].as_str().unwrap();
    assert_eq!(config_arg, format!("{mount}/shepherd.yaml"));
    assert_eq!(
        pod["spec"]["volumes"][0]["configMap"]["name"],
        config_map["metadata"]["name"]
    );
    assert_eq!(container["readinessProbe"]["httpGet"]["path"], "/readyz");
    assert_eq!(
        container["livenessProbe"]["grpc"]["port"].as_u64(),
        Some(u64::from(config.server.health_port))
    );
    // Liveness never depends on leadership: a follower must not be restarted.
    assert_eq!(
        container["livenessProbe"]["grpc"]["service"],
        shepherd_adapters_extproc::LIVENESS_SERVICE
    );
    // The grace period outlasts the drain timeout.
    let drain: u64 = args[args
        .iter()
        .position(|a| *a == "--drain-timeout-secs")
        .unwrap()
        + 1]
    .parse()
    .unwrap();
    assert!(
        pod["spec"]["terminationGracePeriodSeconds"]
            .as_u64()
            .unwrap()
            > drain
    );

    // Kubernetes discovery: --pool-name names the pool, the namespace comes from the pod.
    let pool_arg = args[args.iter().position(|a| *a == "--pool-name").unwrap() + 1];
    assert_eq!(pool_arg, pool["metadata"]["name"]);
    let env = container["env"].as_array().unwrap();
    assert!(env.iter().any(|e| e["name"] == "NAMESPACE"
        && e["valueFrom"]["fieldRef"]["fieldPath"] == "metadata.namespace"));
}

#[test]
fn the_service_account_may_watch_what_the_picker_watches() {
    let docs = manifests();
    let (account, role, binding, deployment) = (
        object(&docs, "ServiceAccount"),
        object(&docs, "Role"),
        object(&docs, "RoleBinding"),
        object(&docs, "Deployment"),
    );
    assert_eq!(
        deployment["spec"]["template"]["spec"]["serviceAccountName"],
        account["metadata"]["name"]
    );
    assert_eq!(binding["roleRef"]["kind"], "Role");
    assert_eq!(binding["roleRef"]["name"], role["metadata"]["name"]);
    assert_eq!(binding["subjects"][0]["kind"], "ServiceAccount");
    assert_eq!(binding["subjects"][0]["name"], account["metadata"]["name"]);
    let allows = |group: &str, resource: &str, verb: &str| {
        role["rules"].as_array().unwrap().iter().any(|rule| {
            let has =
                |key: &str, value: &str| rule[key].as_array().unwrap().iter().any(|v| v == value);
            has("apiGroups", group) && has("resources", resource) && has("verbs", verb)
        })
    };
    for (group, resource) in [
        ("", "pods"),
        ("inference.networking.k8s.io", "inferencepools"),
        ("inference.networking.x-k8s.io", "inferencepools"),
        ("llm-d.ai", "inferenceobjectives"),
        ("llm-d.ai", "inferencemodelrewrites"),
    ] {
        for verb in ["get", "list", "watch"] {
            assert!(allows(group, resource, verb), "{verb} {group}/{resource}");
        }
    }
    for verb in ["get", "create", "update"] {
        assert!(
            allows("coordination.k8s.io", "leases", verb),
            "{verb} leases"
        );
    }
}

#[test]
fn the_http_route_sends_to_the_pool() {
    let docs = manifests();
    let (route, pool) = (object(&docs, "HTTPRoute"), object(&docs, "InferencePool"));
    assert_eq!(route["apiVersion"], "gateway.networking.k8s.io/v1");
    let backend = &route["spec"]["rules"][0]["backendRefs"][0];
    assert_eq!(backend["group"], "inference.networking.k8s.io");
    assert_eq!(backend["kind"], "InferencePool");
    assert_eq!(backend["name"], pool["metadata"]["name"]);
    assert!(route["spec"]["parentRefs"][0]["name"].is_string());
}

/// `spec.poolRef` as both policy CRDs define it (`llm-d.ai_inferenceobjectives.yaml`,
/// `llm-d.ai_inferencemodelrewrites.yaml` at llm-d/llm-d-router `ebab687`): `name` required
/// (1..=253), `group` a DNS subdomain or empty, `kind` a kind; nothing else.
fn check_pool_ref(pool_ref: &Value, errors: &mut Vec<String>) {
    let Some(map) = pool_ref.as_object() else {
        errors.push("spec.poolRef: an object".into());
        return;
    };
    for key in map.keys() {
        if !["group", "kind", "name"].contains(&key.as_str()) {
            errors.push(format!("spec.poolRef.{key}: unknown field"));
        }
    }
    match map.get("name").and_then(Value::as_str) {
        Some(name) if !name.is_empty() && name.len() <= 253 => {}
        _ => errors.push("spec.poolRef.name: required, 1 to 253 characters".into()),
    }
    if let Some(group) = map.get("group") {
        match group.as_str() {
            Some(g) if g.len() <= 253 && (g.is_empty() || is_dns_subdomain(g)) => {}
            _ => errors.push("spec.poolRef.group: a DNS subdomain".into()),
        }
    }
    if let Some(kind) = map.get("kind") {
        match kind.as_str() {
            Some(k) if k.len() <= 63 && is_kind(k) => {}
            _ => errors.push("spec.poolRef.kind: a kind".into()),
        }
    }
}

/// An InferenceObjective against its CRD: `spec.poolRef` required, `priority` an integer.
fn check_inference_objective(object: &Value) -> Vec<String> {
    let mut errors = Vec::new();
    let spec = &object["spec"];
    for key in spec.as_object().into_iter().flat_map(|m| m.keys()) {
        if !["priority", "poolRef"].contains(&key.as_str()) {
            errors.push(format!("spec.{key}: unknown field"));
        }
    }
    check_pool_ref(&spec["poolRef"], &mut errors);
    if let Some(priority) = spec.get("priority")
        && (priority.as_i64().is_none_or(|p| i32::try_from(p).is_err()))
    {
        errors.push("spec.priority: a 32-bit integer".into());
    }
    errors
}

/// An InferenceModelRewrite against its CRD: `poolRef` and `rules` required; a match is
/// `{model: {type: Exact, value}}`; targets at least one, each with `modelRewrite` and a
/// weight in 1..=1,000,000, weights on all targets or none.
fn check_inference_model_rewrite(object: &Value) -> Vec<String> {
    let mut errors = Vec::new();
    let spec = &object["spec"];
    check_pool_ref(&spec["poolRef"], &mut errors);
    let Some(rules) = spec["rules"].as_array() else {
        errors.push("spec.rules: required, an array".into());
        return errors;
    };
    for (i, rule) in rules.iter().enumerate() {
        for (j, m) in rule["matches"].as_array().into_iter().flatten().enumerate() {
            let model = &m["model"];
            if model["value"].as_str().is_none() {
                errors.push(format!(
                    "spec.rules[{i}].matches[{j}].model.value: required"
                ));
            }
            if model.get("type").is_some_and(|t| t != "Exact") {
                errors.push(format!("spec.rules[{i}].matches[{j}].model.type: Exact"));
            }
        }
        let targets = rule["targets"].as_array().map_or(&[][..], Vec::as_slice);
        if targets.is_empty() {
            errors.push(format!("spec.rules[{i}].targets: at least one"));
        }
        let weighted = targets.iter().filter(|t| t.get("weight").is_some()).count();
        if weighted != 0 && weighted != targets.len() {
            errors.push(format!("spec.rules[{i}].targets: weights on all or none"));
        }
        for (j, t) in targets.iter().enumerate() {
            if t["modelRewrite"].as_str().is_none_or(str::is_empty) {
                errors.push(format!(
                    "spec.rules[{i}].targets[{j}].modelRewrite: required"
                ));
            }
            if let Some(w) = t.get("weight")
                && w.as_i64().is_none_or(|w| !(1..=1_000_000).contains(&w))
            {
                errors.push(format!("spec.rules[{i}].targets[{j}].weight: 1 to 1000000"));
            }
        }
    }
    errors
}

#[test]
fn the_policy_examples_match_the_upstream_schemas_and_name_the_pool() {
    let pool = manifests()
        .into_iter()
        .find(|d| d["kind"] == "InferencePool")
        .unwrap();
    let docs = manifest_file("policies.yaml");
    let mut kinds = Vec::new();
    for doc in &docs {
        assert_eq!(doc["apiVersion"], "llm-d.ai/v1alpha2");
        let errors = match doc["kind"].as_str().unwrap() {
            "InferenceObjective" => check_inference_objective(doc),
            "InferenceModelRewrite" => check_inference_model_rewrite(doc),
            other => panic!("unexpected kind {other}"),
        };
        assert!(errors.is_empty(), "{}: {errors:?}", doc["metadata"]["name"]);
        assert_eq!(doc["spec"]["poolRef"]["name"], pool["metadata"]["name"]);
        assert!(shepherd_runtime::discovery::kubernetes::references_pool(
            doc,
            pool["metadata"]["name"].as_str().unwrap(),
            "inference.networking.k8s.io"
        ));
        kinds.push(doc["kind"].as_str().unwrap().to_string());
    }
    kinds.sort();
    assert_eq!(
        kinds,
        [
            "InferenceModelRewrite",
            "InferenceObjective",
            "InferenceObjective"
        ]
    );
    // The rewrite reads as Shepherd reads it: a 90/10 split of one exact model.
    let rewrite = docs
        .iter()
        .find(|d| d["kind"] == "InferenceModelRewrite")
        .unwrap();
    let object = shepherd_runtime::discovery::kubernetes::rewrite_object(rewrite);
    assert_eq!(object.rules.len(), 1);
    assert_eq!(object.rules[0].matches, ["food-review"]);
    let weights: Vec<_> = object.rules[0].targets.iter().map(|t| t.weight).collect();
    assert_eq!(weights, [Some(90), Some(10)]);
}

#[test]
fn the_policy_schema_checks_catch_what_the_crds_reject() {
    let bad_objective = json!({"spec": {"priority": "high", "poolRef": {"group": "Bad_Group"}}});
    assert_eq!(check_inference_objective(&bad_objective).len(), 3);
    let bad_rewrite = json!({"spec": {
        "poolRef": {"name": "p"},
        "rules": [
            {"matches": [{"model": {"type": "Prefix"}}], "targets": []},
            {"targets": [{"modelRewrite": "a", "weight": 0}, {"modelRewrite": "b"}]}
        ]
    }});
    assert_eq!(check_inference_model_rewrite(&bad_rewrite).len(), 5);
}
