//! The whole stack (simulated servers, pickers, Envoy) and the requests the tests send through it.

use super::*;

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
    /// Every response header.
    pub headers: reqwest::header::HeaderMap,
    pub body: String,
}

impl Reply {
    /// The text of response header `name`, when present, non-empty and not Envoy's `-`.
    pub fn header(&self, name: &str) -> Option<String> {
        self.headers
            .get(name)
            .and_then(|v| v.to_str().ok())
            .map(str::to_string)
            .filter(|v| !v.is_empty() && v != "-")
    }
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
        sim.aliases = options
            .model_aliases
            .iter()
            .map(|m| m.to_string())
            .collect();
        if options.kv_events {
            sim.kv_events = Some(KvEventsConfig::ephemeral());
        }
        if let Some(blocks) = options.num_gpu_blocks {
            sim.engine.num_gpu_blocks = blocks;
        }
        if !options.roles.is_empty() {
            // The simulated servers take the roles the endpoints are labelled with (their
            // decode servers run the routing sidecar's protocol); unlabelled ones do both.
            sim.roles = (0..options.servers)
                .map(|i| {
                    options
                        .roles
                        .get(i)
                        .copied()
                        .flatten()
                        .unwrap_or("both")
                        .to_owned()
                })
                .collect();
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
        let ready = options.wait_ready.unwrap_or(holds || !listed.is_empty());
        let replicas = options.replicas.max(1);
        let udp: Vec<SocketAddr> = {
            let sockets: Vec<std::net::UdpSocket> = (0..replicas)
                .map(|_| std::net::UdpSocket::bind("127.0.0.1:0").unwrap())
                .collect();
            sockets.iter().map(|s| s.local_addr().unwrap()).collect()
        };
        // The replicas' shared secret, in a file as an operator would mount it.
        let key_path = dir.path().join("replicas.key");
        std::fs::write(&key_path, "e2e-replicas-shared-secret-0123456789\n").unwrap();
        let replica_config = |i: usize| {
            if let Some(url) = &options.redis_url {
                return format!(
                    "{config_text}\nreplicas:\n  backend: redis\n  redis:\n    url: {url}\n    name: epp-{i}\n"
                );
            }
            let peers: Vec<String> = (0..replicas)
                .filter(|&j| j != i)
                .map(|j| udp[j].to_string())
                .collect();
            format!(
                "{config_text}\nreplicas:\n  listen: {}\n  peers: [{}]\n  key: {{file: {}}}\n",
                udp[i],
                peers.join(", "),
                key_path.display()
            )
        };
        if replicas > 1 {
            std::fs::write(&config_path, replica_config(0)).unwrap();
        }
        let epp = Epp::start_with_env(&config_path, &args, ready, &options.epp_env).await;
        let mut more_epps = Vec::new();
        for i in 1..replicas {
            let path = dir.path().join(format!("shepherd-{i}.yaml"));
            std::fs::write(&path, replica_config(i)).unwrap();
            more_epps.push(Epp::start_with_env(&path, &args, ready, &options.epp_env).await);
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
        self.post_to(listener, "/v1/completions", body, headers)
            .await
    }

    /// Sends `body` to `path` through `listener`, with `headers`.
    pub async fn post_to(
        &self,
        listener: &str,
        path: &str,
        body: impl Into<reqwest::Body>,
        headers: &[(&str, &str)],
    ) -> Reply {
        let mut request = self
            .http
            .post(format!("{}{path}", self.url(listener)))
            .header("content-type", "application/json")
            .timeout(Duration::from_secs(30))
            .body(body);
        for (name, value) in headers {
            request = request.header(*name, *value);
        }
        let response = request.send().await.expect("envoy answers");
        let status = response.status().as_u16();
        let headers = response.headers().clone();
        let body = response.text().await.unwrap_or_default();
        let mut reply = Reply {
            status,
            picked: None,
            served: None,
            reason: None,
            headers,
            body,
        };
        (reply.picked, reply.served, reply.reason) = (
            reply.header(PICKED),
            reply.header(SERVED),
            reply.header(REASON),
        );
        reply
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
