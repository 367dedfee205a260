//! A real Prometheus for Shepherd's observability tests: Debian's `prometheus` started on a
//! loopback port with a temporary config and storage directory, its HTTP API queried, and
//! `promtool` run on the shipped rules.
//!
//! The binaries come from `SHEPHERD_PROMETHEUS` and `SHEPHERD_PROMTOOL`
//! (`scripts/install-prometheus.sh` installs the package and prints both paths;
//! `scripts/test.sh` exports them). Without them a test says it is skipped and passes, unless
//! `SHEPHERD_REQUIRE_E2E=1`, which makes their absence a failure.
//!
//! ```no_run
//! use shepherd_observability_tests::{Prometheus, Target, prometheus_binary};
//!
//! # async fn run() {
//! let Some(binary) = prometheus_binary("example") else { return };
//! let prometheus = Prometheus::start(&binary, &[Target::new("shepherd-gateway", "127.0.0.1:9090".parse().unwrap())]).await;
//! let result = prometheus.query("up").await;
//! println!("{result:?}");
//! # }
//! ```
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::missing_panics_doc)]

use std::net::{SocketAddr, TcpListener};
use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::Duration;

use serde_json::Value;
use tokio::process::{Child, Command};

/// The workspace root.
pub fn workspace() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

/// The binary named by `var`, or `None` after saying the test `test` is skipped (a panic
/// with `SHEPHERD_REQUIRE_E2E=1`).
fn binary(var: &str, test: &str) -> Option<PathBuf> {
    match std::env::var_os(var).filter(|v| !v.is_empty()) {
        Some(path) => Some(PathBuf::from(path)),
        None if std::env::var("SHEPHERD_REQUIRE_E2E").is_ok_and(|v| v == "1") => panic!(
            "SHEPHERD_REQUIRE_E2E=1 but {var} is not set: run scripts/install-prometheus.sh and export what it prints"
        ),
        None => {
            eprintln!("skipped {test}: {var} is not set (run scripts/install-prometheus.sh)");
            None
        }
    }
}

/// The `prometheus` binary, if the environment names one.
pub fn prometheus_binary(test: &str) -> Option<PathBuf> {
    binary("SHEPHERD_PROMETHEUS", test)
}

/// The `promtool` binary, if the environment names one.
pub fn promtool_binary(test: &str) -> Option<PathBuf> {
    binary("SHEPHERD_PROMTOOL", test)
}

/// A free loopback port (bound and released: another process may take it meanwhile, which
/// the callers' retries absorb).
pub fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

/// One scrape job.
#[derive(Debug, Clone)]
pub struct Target {
    /// The job's name (the `job` label).
    pub job: String,
    /// The address whose `/metrics` is scraped.
    pub addr: SocketAddr,
}

impl Target {
    /// A job named `job` scraping `addr`.
    pub fn new(job: &str, addr: SocketAddr) -> Self {
        Target {
            job: job.to_owned(),
            addr,
        }
    }
}

/// A Prometheus server of the test's own, killed when dropped.
#[derive(Debug)]
pub struct Prometheus {
    child: Child,
    addr: SocketAddr,
    client: reqwest::Client,
    _dir: tempfile::TempDir,
}

/// How often the test Prometheus scrapes and evaluates.
pub const SCRAPE_INTERVAL: Duration = Duration::from_secs(1);

impl Prometheus {
    /// Starts `binary` scraping `targets` every second, with a config and storage in a
    /// temporary directory, and waits (at most 60 s) until it is ready.
    pub async fn start(binary: &Path, targets: &[Target]) -> Prometheus {
        let dir = tempfile::tempdir().unwrap();
        let mut config = String::from(
            "global:\n  scrape_interval: 1s\n  evaluation_interval: 1s\nscrape_configs:\n",
        );
        for t in targets {
            config.push_str(&format!(
                "  - job_name: {}\n    static_configs:\n      - targets: ['{}']\n",
                t.job, t.addr
            ));
        }
        let config_path = dir.path().join("prometheus.yml");
        std::fs::write(&config_path, config).unwrap();
        for _attempt in 0..5 {
            let addr: SocketAddr = format!("127.0.0.1:{}", free_port()).parse().unwrap();
            let mut child = Command::new(binary)
                .arg(format!("--config.file={}", config_path.display()))
                .arg(format!(
                    "--storage.tsdb.path={}",
                    dir.path().join("data").display()
                ))
                .arg(format!("--web.listen-address={addr}"))
                .arg("--log.level=warn")
                .stdout(Stdio::null())
                .stderr(Stdio::inherit())
                .kill_on_drop(true)
                .spawn()
                .unwrap();
            let client = reqwest::Client::new();
            let deadline = tokio::time::Instant::now() + Duration::from_secs(60);
            while tokio::time::Instant::now() < deadline {
                if child.try_wait().unwrap().is_some() {
                    break; // the port was taken: try another
                }
                let ready = client
                    .get(format!("http://{addr}/-/ready"))
                    .send()
                    .await
                    .is_ok_and(|r| r.status().is_success());
                if ready {
                    return Prometheus {
                        child,
                        addr,
                        client,
                        _dir: dir,
                    };
                }
                tokio::time::sleep(Duration::from_millis(200)).await;
            }
            let _ = child.start_kill();
        }
        panic!("prometheus did not become ready");
    }

    /// Where its HTTP API listens.
    pub fn addr(&self) -> SocketAddr {
        self.addr
    }

    /// Evaluates `expr` now (`/api/v1/query`): the result vector (or an error's text).
    pub async fn try_query(&self, expr: &str) -> Result<Vec<Value>, String> {
        let response = self
            .client
            .get(format!("http://{}/api/v1/query", self.addr))
            .query(&[("query", expr)])
            .send()
            .await
            .map_err(|e| e.to_string())?;
        let body: Value = response.json().await.map_err(|e| e.to_string())?;
        if body["status"] != "success" {
            return Err(format!("{}: {}", body["errorType"], body["error"]));
        }
        match &body["data"]["result"] {
            Value::Array(result) => Ok(result.clone()),
            // A scalar or string result: one value.
            other => Ok(vec![other.clone()]),
        }
    }

    /// Evaluates `expr` now; panics on a query error.
    pub async fn query(&self, expr: &str) -> Vec<Value> {
        self.try_query(expr)
            .await
            .unwrap_or_else(|e| panic!("query {expr} failed: {e}"))
    }

    /// The health of every scrape target: `(job, health, last error)`.
    pub async fn targets(&self) -> Vec<(String, String, String)> {
        let body: Value = self
            .client
            .get(format!("http://{}/api/v1/targets", self.addr))
            .send()
            .await
            .unwrap()
            .json()
            .await
            .unwrap();
        body["data"]["activeTargets"]
            .as_array()
            .cloned()
            .unwrap_or_default()
            .iter()
            .map(|t| {
                (
                    t["labels"]["job"].as_str().unwrap_or("").to_owned(),
                    t["health"].as_str().unwrap_or("").to_owned(),
                    t["lastError"].as_str().unwrap_or("").to_owned(),
                )
            })
            .collect()
    }

    /// Stops the server.
    pub async fn stop(mut self) {
        let _ = self.child.kill().await;
    }
}

/// A result vector has at least one sample whose value is a number (not NaN).
pub fn has_number(result: &[Value]) -> bool {
    result.iter().any(|r| {
        let value = if r["value"].is_array() {
            &r["value"][1]
        } else {
            &r[1]
        };
        value
            .as_str()
            .and_then(|v| v.parse::<f64>().ok())
            .is_some_and(|v| !v.is_nan())
    })
}

/// Every Prometheus expression of a Grafana dashboard's panels (rows' nested panels too):
/// `(panel title, expression)`.
pub fn dashboard_queries(dashboard: &Value) -> Vec<(String, String)> {
    fn walk(panels: &Value, out: &mut Vec<(String, String)>) {
        for panel in panels.as_array().into_iter().flatten() {
            let title = panel["title"].as_str().unwrap_or("").to_owned();
            for target in panel["targets"].as_array().into_iter().flatten() {
                if let Some(expr) = target["expr"].as_str() {
                    out.push((title.clone(), expr.to_owned()));
                }
            }
            walk(&panel["panels"], out);
        }
    }
    let mut out = Vec::new();
    walk(&dashboard["panels"], &mut out);
    out
}

/// `expr` with Grafana's template variables replaced as Grafana does when "All" is selected
/// (`.*`), and its range variables by fixed windows.
pub fn substitute_variables(expr: &str, variables: &[&str]) -> String {
    let mut out = expr.to_owned();
    for v in variables {
        out = out.replace(&format!("${{{v}}}"), ".*");
        out = out.replace(&format!("${v}"), ".*");
    }
    out.replace("$__rate_interval", "1m")
        .replace("$__interval", "15s")
}

/// Runs `promtool` with `args` in `deploy/prometheus`: its exit status and output.
pub fn promtool(binary: &Path, args: &[&str]) -> (bool, String) {
    let output = std::process::Command::new(binary)
        .args(args)
        .current_dir(workspace().join("deploy/prometheus"))
        .output()
        .unwrap();
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr)
    );
    (output.status.success(), text)
}
