//! End to end with the official `openai` Python package: the `shepherd-gateway` binary in
//! front of simulated vLLM servers, exercised by `tests/python/test_openai_client.py`.
//!
//! Needs a Python with `openai` and `pytest`: `scripts/install-python-e2e.sh` makes one and
//! prints its path. Contract:
//!
//! - `SHEPHERD_PYTHON` unset: the test prints "skipped: SHEPHERD_PYTHON not set" and passes,
//!   unless `SHEPHERD_REQUIRE_E2E=1`, when it fails;
//! - set: this test starts five simulated servers in-process and five gateway processes:
//!   - `main`, in front of three servers, with a client key and a concurrency cap;
//!   - `empty`, with no endpoint;
//!   - `flow`, with a `flowControl` section in front of one slow server that one request in
//!     flight saturates (`concurrency-detector`, `maxConcurrency: 1`);
//!   - `scale`, with a `flowControl` section and no endpoint until pytest asks for one (scale
//!     from zero: the driver writes the fifth server into its config file, which it re-reads
//!     every [`CONFIG_POLL_MS`]);
//!   - `ttl`, with a `flowControl` section, a short `defaultRequestTTL` and no endpoint;
//!
//!   then runs pytest with their URLs in the environment, does what pytest asks through files
//!   in `SHEPHERD_E2E_CONTROL` (`stop-N`: stop simulated server N of `main`, answered with
//!   `stopped-N`; `add-endpoint`: give `scale` its server, answered with `endpoint-added`),
//!   asserts pytest passed, and finally stops every gateway with SIGTERM and checks it exits
//!   cleanly.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::Duration;

use tokio::io::{AsyncBufReadExt, BufReader};
use tokio::process::{Child, Command};

const KEY: &str = "sk-e2e-client";
const LIMIT: usize = 16;
/// How often the gateways look at their config file.
const CONFIG_POLL_MS: u64 = 50;
/// Output tokens of the request that keeps the `flow` gateway's server busy: at real speed
/// (a decode step of about 6 ms) it runs for about a second.
const LONG_TOKENS: u32 = 180;
/// The `ttl` gateway's `defaultRequestTTL`.
const TTL: &str = "500ms";

/// The flow-control sections: a detector that one request in flight per endpoint saturates,
/// and the upstream `flowControl` section referring to it; the test's clients are trusted to
/// set their priority.
fn flow_control(ttl: &str) -> String {
    format!(
        "gateway:\n  trustedHeaders: [x-shepherd-priority]\n\
         plugins:\n  - name: one-at-a-time\n    type: concurrency-detector\n    \
         parameters: {{maxConcurrency: 1}}\n\
         flowControl:\n  defaultRequestTTL: {ttl}\n  \
         saturationDetector: {{pluginRef: one-at-a-time}}\n"
    )
}

/// A config with these endpoints and more sections.
fn config(endpoints: &[std::net::SocketAddr], more: &str) -> String {
    let endpoints: Vec<String> = endpoints.iter().map(|a| format!("\"{a}\"")).collect();
    format!(
        "endpoints: [{}]\nserver: {{httpPort: 0, metricsPort: 0}}\nscraping: {{intervalMs: 20}}\n{more}",
        endpoints.join(", ")
    )
}

fn python() -> Option<String> {
    match std::env::var("SHEPHERD_PYTHON") {
        Ok(python) if !python.is_empty() => Some(python),
        _ => {
            assert!(
                std::env::var("SHEPHERD_REQUIRE_E2E").as_deref() != Ok("1"),
                "SHEPHERD_REQUIRE_E2E=1 but SHEPHERD_PYTHON is not set \
                 (SHEPHERD_PYTHON=\"$(scripts/install-python-e2e.sh)\")"
            );
            println!("skipped: SHEPHERD_PYTHON not set");
            None
        }
    }
}

/// A `shepherd-gateway` process, and the address it printed.
struct GatewayProcess {
    child: Child,
    url: String,
    config: PathBuf,
}

async fn start_gateway(dir: &Path, name: &str, yaml: &str) -> GatewayProcess {
    let config = dir.join(format!("{name}.yaml"));
    std::fs::write(&config, yaml).unwrap();
    let mut child = Command::new(env!("CARGO_BIN_EXE_shepherd-gateway"))
        .arg("--config")
        .arg(&config)
        .arg("--shutdown-timeout")
        .arg("5")
        .arg("--config-poll-ms")
        .arg(CONFIG_POLL_MS.to_string())
        .env("SHEPHERD_LOG", "warn")
        .stdout(Stdio::piped())
        .kill_on_drop(true)
        .spawn()
        .unwrap();
    let mut lines = BufReader::new(child.stdout.take().unwrap()).lines();
    let url = tokio::time::timeout(Duration::from_secs(30), async {
        while let Some(line) = lines.next_line().await.unwrap() {
            if let Some(url) = line.strip_prefix("shepherd-gateway: listening on ") {
                return url.to_owned();
            }
        }
        panic!("shepherd-gateway exited before listening");
    })
    .await
    .expect("shepherd-gateway did not start");
    // Keep draining its stdout so it never blocks on a full pipe.
    tokio::spawn(async move { while let Ok(Some(_)) = lines.next_line().await {} });
    GatewayProcess { child, url, config }
}

/// Replaces `path` with `text` at once (written aside, then renamed over it), so that a
/// watcher never reads half of it.
fn replace_file(path: &Path, text: &str) {
    let aside = path.with_extension("new");
    std::fs::write(&aside, text).unwrap();
    std::fs::rename(&aside, path).unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_official_openai_client_works_through_the_gateway() {
    let Some(python) = python() else {
        return;
    };
    let mut pool = common::sims(3, 2.0).await;
    // Real speed: a request of LONG_TOKENS tokens stays in flight for about a second.
    let slow = common::sims(2, 1.0).await;
    let dir = tempfile::tempdir().unwrap();
    let control = dir.path().join("control");
    std::fs::create_dir(&control).unwrap();

    let main = start_gateway(
        dir.path(),
        "main",
        &config(
            pool.addrs(),
            &format!("gateway:\n  apiKeys: [{KEY}]\n  maxConcurrentRequests: {LIMIT}\n"),
        ),
    )
    .await;
    let empty = start_gateway(
        dir.path(),
        "empty",
        "endpoints: []\nserver: {httpPort: 0, metricsPort: 0}\n",
    )
    .await;
    let flow = start_gateway(
        dir.path(),
        "flow",
        &config(&slow.addrs()[..1], &flow_control("30s")),
    )
    .await;
    let scale_config = |endpoints: &[std::net::SocketAddr]| config(endpoints, &flow_control("30s"));
    let scale = start_gateway(dir.path(), "scale", &scale_config(&[])).await;
    let ttl = start_gateway(dir.path(), "ttl", &config(&[], &flow_control(TTL))).await;

    let script: PathBuf = [env!("CARGO_MANIFEST_DIR"), "tests", "python"]
        .iter()
        .collect::<PathBuf>()
        .join("test_openai_client.py");
    let mut pytest = Command::new(&python)
        .args([
            "-m",
            "pytest",
            "-q",
            "-p",
            "no:cacheprovider",
            "-x",
            "--durations=0",
        ])
        .arg(&script)
        .env("PYTHONDONTWRITEBYTECODE", "1")
        .env("SHEPHERD_GATEWAY_URL", format!("{}/v1", main.url))
        .env("SHEPHERD_GATEWAY_KEY", KEY)
        .env("SHEPHERD_GATEWAY_LIMIT", LIMIT.to_string())
        .env("SHEPHERD_EMPTY_GATEWAY_URL", format!("{}/v1", empty.url))
        .env("SHEPHERD_FLOW_GATEWAY_URL", format!("{}/v1", flow.url))
        .env("SHEPHERD_FLOW_LONG_TOKENS", LONG_TOKENS.to_string())
        .env("SHEPHERD_SCALE_GATEWAY_URL", format!("{}/v1", scale.url))
        .env("SHEPHERD_TTL_GATEWAY_URL", format!("{}/v1", ttl.url))
        .env("SHEPHERD_TTL", TTL)
        .env("SHEPHERD_MODEL", common::MODEL)
        .env("SHEPHERD_E2E_CONTROL", &control)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .kill_on_drop(true)
        .spawn()
        .unwrap();
    let stdout = pytest.stdout.take().unwrap();
    let stderr = pytest.stderr.take().unwrap();
    let collect = |stream| {
        tokio::spawn(async move {
            let mut text = String::new();
            let mut lines = BufReader::new(stream).lines();
            while let Ok(Some(line)) = lines.next_line().await {
                text.push_str(&line);
                text.push('\n');
            }
            text
        })
    };
    let out = collect(Box::new(stdout) as Box<dyn tokio::io::AsyncRead + Send + Unpin>);
    let err = collect(Box::new(stderr) as Box<dyn tokio::io::AsyncRead + Send + Unpin>);

    // Do what pytest asks, until it ends.
    let status = tokio::time::timeout(Duration::from_secs(120), async {
        loop {
            for index in 0..pool.len() {
                let asked = control.join(format!("stop-{index}"));
                if asked.exists() && pool.is_running(index) {
                    pool.stop(index).await;
                    std::fs::write(control.join(format!("stopped-{index}")), "").unwrap();
                }
            }
            let added = control.join("endpoint-added");
            if control.join("add-endpoint").exists() && !added.exists() {
                replace_file(&scale.config, &scale_config(&slow.addrs()[1..]));
                std::fs::write(added, "").unwrap();
            }
            tokio::select! {
                status = pytest.wait() => return status.unwrap(),
                () = tokio::time::sleep(Duration::from_millis(10)) => {}
            }
        }
    })
    .await
    .expect("pytest ran for over two minutes");
    let out = out.await.unwrap();
    let err = err.await.unwrap();
    println!("{out}");
    assert!(status.success(), "pytest failed ({status}):\n{out}\n{err}");

    // SIGTERM: the gateway drains and exits cleanly.
    for mut gateway in [main, empty, flow, scale, ttl] {
        let pid = gateway.child.id().unwrap();
        let sent = std::process::Command::new("kill")
            .args(["-TERM", &pid.to_string()])
            .status()
            .unwrap();
        assert!(sent.success());
        let exited = tokio::time::timeout(Duration::from_secs(10), gateway.child.wait())
            .await
            .expect("shepherd-gateway did not stop on SIGTERM")
            .unwrap();
        assert!(exited.success(), "shepherd-gateway exited with {exited}");
    }
}
