//! A real Envoy child process running a deployment example with the tests' changes.

use super::*;

/// An Envoy process.
pub struct Envoy {
    pub child: Child,
    pub admin: SocketAddr,
    pub listeners: BTreeMap<String, SocketAddr>,
    pub log_path: PathBuf,
}

/// An Envoy example with the tests' changes (see the module docs); the model servers listed
/// in `envoy-fallbacks.yaml` (ports 8100 and 8101) become `servers`.
pub fn envoy_config(
    example: &str,
    extproc_port: u16,
    subset: &[SocketAddr],
    servers: &[SocketAddr],
) -> String {
    let example =
        std::fs::read_to_string(workspace().join("examples/deploy/envoy").join(example)).unwrap();
    let replace_once = |text: &str, from: &str, to: &str| {
        assert_eq!(text.matches(from).count(), 1, "`{from}` in envoy.yaml");
        text.replacen(from, to, 1)
    };
    let mut config = replace_once(&example, "port_value: 9901", "port_value: 0");
    config = replace_once(&config, "port_value: 8081", "port_value: 0");
    config = replace_once(
        &config,
        "port_value: 9002",
        &format!("port_value: {extproc_port}"),
    );
    for (i, listed) in ["port_value: 8100", "port_value: 8101"].iter().enumerate() {
        if config.contains(listed) {
            config = replace_once(
                &config,
                listed,
                &format!("port_value: {}", servers[i].port()),
            );
        }
    }
    config = replace_once(
        &config,
        "              - match: { prefix: \"/\" }\n",
        "              - match: { prefix: \"/\" }\n\
         \x20               response_headers_to_add:\n\
         \x20               - header:\n\
         \x20                   key: x-test-picked\n\
         \x20                   value: \"%DYNAMIC_METADATA(envoy.lb:x-gateway-destination-endpoint)%\"\n",
    );
    // The second listener: the first one plus a subset hint set before ext_proc.
    let start = config.find("  - name: inference\n").unwrap();
    let end = config.find("\n  clusters:").unwrap();
    let subset_list: Vec<String> = subset.iter().map(|a| format!("\"{a}\"")).collect();
    let hinted = replace_once(
        &config[start..end],
        "          - name: envoy.filters.http.ext_proc\n",
        &format!(
            "          - name: envoy.filters.http.set_metadata\n\
             \x20           typed_config:\n\
             \x20             \"@type\": type.googleapis.com/envoy.extensions.filters.http.set_metadata.v3.Config\n\
             \x20             metadata:\n\
             \x20             - metadata_namespace: envoy.lb.subset_hint\n\
             \x20               value:\n\
             \x20                 x-gateway-destination-endpoint-subset: [{}]\n\
             \x20         - name: envoy.filters.http.ext_proc\n",
            subset_list.join(", ")
        ),
    )
    .replacen("  - name: inference\n", "  - name: inference-subset\n", 1);
    config.insert_str(end, &format!("\n{}", hinted.trim_end_matches('\n')));
    config
}

impl Envoy {
    /// Starts Envoy on `config` and waits until it is live; returns its listeners by name.
    pub async fn start(binary: &Path, dir: &Path, config: &str) -> Envoy {
        let config_path = dir.join("envoy.yaml");
        std::fs::write(&config_path, config).unwrap();
        let admin_path = dir.join("envoy-admin-address");
        let log_path = dir.join("envoy.log");
        let child = Command::new(binary)
            .arg("-c")
            .arg(&config_path)
            .args([
                "--disable-hot-restart",
                "--concurrency",
                "1",
                "-l",
                "warning",
            ])
            .arg("--admin-address-path")
            .arg(&admin_path)
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(std::fs::File::create(&log_path).unwrap())
            .kill_on_drop(true)
            .spawn()
            .expect("start envoy");
        let deadline = Instant::now() + Duration::from_secs(20);
        let admin: SocketAddr = loop {
            if let Ok(text) = std::fs::read_to_string(&admin_path)
                && let Ok(addr) = text.trim().parse()
            {
                break addr;
            }
            assert!(
                Instant::now() < deadline,
                "envoy did not start; its log:\n{}",
                std::fs::read_to_string(&log_path).unwrap_or_default()
            );
            sleep(Duration::from_millis(20)).await;
        };
        let client = reqwest::Client::new();
        let listeners: Value = loop {
            let ready = client
                .get(format!("http://{admin}/ready"))
                .send()
                .await
                .is_ok_and(|r| r.status().is_success());
            if ready
                && let Ok(r) = client
                    .get(format!("http://{admin}/listeners?format=json"))
                    .send()
                    .await
                && let Ok(v) = r.json::<Value>().await
            {
                break v;
            }
            assert!(Instant::now() < deadline, "envoy never ready");
            sleep(Duration::from_millis(20)).await;
        };
        let mut by_name = BTreeMap::new();
        for status in listeners["listener_statuses"].as_array().unwrap() {
            let socket = &status["local_address"]["socket_address"];
            let addr = format!(
                "{}:{}",
                socket["address"].as_str().unwrap(),
                socket["port_value"]
            );
            by_name.insert(
                status["name"].as_str().unwrap().to_string(),
                addr.parse().unwrap(),
            );
        }
        Envoy {
            child,
            admin,
            listeners: by_name,
            log_path,
        }
    }

    pub fn log(&self) -> String {
        std::fs::read_to_string(&self.log_path).unwrap_or_default()
    }
}
