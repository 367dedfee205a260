//! The runtime's KV-event subscription against a publisher on pyzmq (libzmq) and msgspec, the
//! stack vLLM publishes with (`tests/python/kv_publisher.py`, vLLM's message layout and struct
//! shapes), in both payload encodings: stored blocks match, a batch lost on the way is
//! replayed from the ROUTER socket, removals and `AllBlocksCleared` take blocks out.
//!
//! Needs a Python with pyzmq and msgspec: `SHEPHERD_PYTHON="$(scripts/install-python-e2e.sh)"`
//! (what `scripts/test.sh` sets). Without it the test says it is skipped and passes, unless
//! `SHEPHERD_REQUIRE_E2E=1`.

#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use std::io::{BufRead, BufReader, Write};
use std::path::PathBuf;
use std::process::{Child, ChildStdin, ChildStdout, Command, Stdio};
use std::time::Duration;

use common::wait_until;
use shepherd_runtime::config::RuntimeConfig;
use shepherd_runtime::{Runtime, RuntimeHandle, RuntimeOptions};
use shepherd_scheduler_core::kv_events::precise_seed;
use shepherd_scheduler_core::prelude::*;
use shepherd_scorers::producers::PreciseKvEvents;
use shepherd_scorers::producers::precise_prefix::feed_name;

const WAIT: Duration = Duration::from_secs(10);
const ENDPOINT: &str = "127.0.0.1:9";

fn python() -> Option<PathBuf> {
    match std::env::var_os("SHEPHERD_PYTHON") {
        Some(path) => Some(PathBuf::from(path)),
        None => {
            assert!(
                std::env::var_os("SHEPHERD_REQUIRE_E2E").is_none(),
                "SHEPHERD_REQUIRE_E2E=1 but SHEPHERD_PYTHON is not set \
                 (SHEPHERD_PYTHON=\"$(scripts/install-python-e2e.sh)\")"
            );
            println!("skipped: SHEPHERD_PYTHON not set");
            None
        }
    }
}

struct Publisher {
    child: Child,
    stdin: ChildStdin,
    stdout: BufReader<ChildStdout>,
    ports: (u16, u16),
}

impl Publisher {
    fn start(python: &PathBuf, encoding: &str) -> Publisher {
        let script = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/python/kv_publisher.py");
        let mut child = Command::new(python)
            .arg(script)
            .arg(encoding)
            .arg(format!("kv@{ENDPOINT}@meta-llama/Llama-3.1-8B-Instruct"))
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .spawn()
            .expect("the publisher starts");
        let stdin = child.stdin.take().unwrap();
        let mut stdout = BufReader::new(child.stdout.take().unwrap());
        let mut line = String::new();
        stdout.read_line(&mut line).unwrap();
        let ports: Vec<u16> = line
            .split_whitespace()
            .skip(1)
            .map(|p| p.parse().unwrap())
            .collect();
        assert_eq!(ports.len(), 2, "publisher said {line:?}");
        Publisher {
            child,
            stdin,
            stdout,
            ports: (ports[0], ports[1]),
        }
    }

    /// Sends one command and waits for the publisher's acknowledgement.
    fn send(&mut self, command: &str) {
        writeln!(self.stdin, "{command}").unwrap();
        self.stdin.flush().unwrap();
        if command != "drop" {
            let mut line = String::new();
            self.stdout.read_line(&mut line).unwrap();
            assert!(
                line.starts_with("sent") || line.starts_with("dropped"),
                "{line:?}"
            );
        }
    }
}

impl Drop for Publisher {
    fn drop(&mut self) {
        let _ = writeln!(self.stdin, "quit");
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

async fn runtime(publisher: &Publisher) -> RuntimeHandle {
    let (publish, replay) = publisher.ports;
    let yaml = format!(
        "endpoints:
- address: {ENDPOINT}
  labels:
    shepherd.dev/kv-events-endpoint: tcp://127.0.0.1:{publish}
    shepherd.dev/kv-events-replay-endpoint: tcp://127.0.0.1:{replay}
plugins:
- type: precise-prefix-cache-producer
- type: prefix-cache-scorer
  parameters: {{prefixMatchInfoProducerName: precise-prefix-cache-producer}}
schedulingProfiles:
- name: default
  plugins:
  - pluginRef: prefix-cache-scorer
"
    );
    let options = RuntimeOptions {
        scrape: false,
        serve_admin: false,
        watch_config: false,
        adaptive: false,
        ..RuntimeOptions::default()
    };
    let handle = Runtime::start(RuntimeConfig::from_yaml(&yaml).unwrap(), options)
        .await
        .unwrap();
    assert!(
        wait_until(WAIT, || handle
            .render_metrics()
            .contains("shepherd_kv_events_connected_publishers 1"))
        .await,
        "{}",
        handle.render_metrics()
    );
    handle
}

fn matched(handle: &RuntimeHandle, tokens: u32) -> usize {
    let feed = handle
        .shared()
        .resources
        .get::<PreciseKvEvents>(&feed_name("precise-prefix-cache-producer"))
        .unwrap();
    let id = handle
        .pool()
        .snapshot()
        .get_by_address(ENDPOINT)
        .unwrap()
        .id();
    let prompt = Prompt::Tokens((0..tokens).collect());
    let index = feed.index.index();
    let mut chain = index.chain(precise_seed(None), &prompt);
    index.match_prefix(&mut chain, &prompt).matched_blocks(id)
}

fn tokens(range: std::ops::Range<u32>) -> String {
    range.map(|t| t.to_string()).collect::<Vec<_>>().join(",")
}

async fn follows_a_libzmq_publisher(encoding: &str) {
    let Some(python) = python() else {
        return;
    };
    let mut publisher = Publisher::start(&python, encoding);
    let handle = runtime(&publisher).await;

    publisher.send(&format!("store 100 - {} 16", tokens(0..64)));
    assert!(
        wait_until(WAIT, || matched(&handle, 112) == 4).await,
        "{}",
        handle.render_metrics()
    );

    // Blocks 200-201 are published but lost on the way; the next batch shows the gap and the
    // replay socket returns them.
    publisher.send("drop");
    publisher.send(&format!("store 200 103 {} 16", tokens(64..96)));
    publisher.send(&format!("store 300 201 {} 16", tokens(96..112)));
    assert!(
        wait_until(WAIT, || matched(&handle, 112) == 7).await,
        "{}",
        handle.render_metrics()
    );
    assert!(
        handle
            .render_metrics()
            .contains("shepherd_kv_events_gaps_total{outcome=\"replayed\"} 1")
    );

    // The engine evicts block 201: the match stops before it. Then it clears everything.
    publisher.send("remove 201");
    assert!(wait_until(WAIT, || matched(&handle, 112) == 5).await);
    publisher.send("clear");
    assert!(wait_until(WAIT, || matched(&handle, 112) == 0).await);
    handle.shutdown(Duration::from_secs(2)).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn follows_a_libzmq_publisher_with_positional_events() {
    follows_a_libzmq_publisher("array").await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn follows_a_libzmq_publisher_with_map_events() {
    follows_a_libzmq_publisher("map").await;
}
