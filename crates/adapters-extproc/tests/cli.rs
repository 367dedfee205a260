//! `shepherd-epp` that cannot start says why in words — the error's message and its causes,
//! never a `Debug` dump — and exits with a failure status.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::io::Write as _;
use std::process::{Command, Output};

fn epp(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_shepherd-epp"))
        .args(args)
        .env("RUST_LOG", "warn")
        .output()
        .unwrap()
}

fn failed_with(output: &Output, needles: &[&str]) -> String {
    let stderr = String::from_utf8_lossy(&output.stderr).into_owned();
    assert_eq!(output.status.code(), Some(1), "stderr: {stderr}");
    assert!(
        stderr.contains("shepherd-epp: error: "),
        "no error line in {stderr}"
    );
    for needle in needles {
        assert!(stderr.contains(needle), "{needle:?} not in {stderr}");
    }
    // Not `main`'s `Error: Syntax { path: Some(…), … }`.
    assert!(!stderr.contains("Error: "), "a Debug dump in {stderr}");
    assert!(!stderr.contains("Some("), "a Debug dump in {stderr}");
    stderr
}

#[test]
fn a_bad_config_file_is_reported_by_file_line_and_message() {
    let mut file = tempfile::Builder::new().suffix(".yaml").tempfile().unwrap();
    file.write_all(b"endpoints: []\nscheduler: [\n").unwrap();
    let path = file.path().display().to_string();
    let output = epp(&["--config", &path]);
    failed_with(&output, &[&path, "line 2"]);

    let output = epp(&["--config", "/nonexistent/shepherd.yaml"]);
    failed_with(&output, &["/nonexistent/shepherd.yaml", "not found"]);
}

#[test]
fn a_taken_port_is_reported_with_its_cause() {
    let taken = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = taken.local_addr().unwrap().port().to_string();
    let output = epp(&[
        "--endpoints",
        "127.0.0.1:1",
        "--port",
        &port,
        "--health-port",
        "0",
        "--metrics-port",
        "0",
    ]);
    failed_with(&output, &["ext_proc", &port, "in use"]);
}

#[test]
fn limits_that_cannot_work_together_are_refused() {
    let output = epp(&[
        "--endpoints",
        "127.0.0.1:1",
        "--max-body-bytes",
        "1048576",
        "--max-buffered-bytes",
        "1000000",
    ]);
    failed_with(&output, &["--max-buffered-bytes", "1198372"]);
}

#[test]
fn check_config_builds_the_policy_binds_nothing_and_says_what_it_would_run() {
    // An upstream config as it is, with a Shepherd-unknown key it warns about: loads.
    let mut good = tempfile::Builder::new().suffix(".yaml").tempfile().unwrap();
    good.write_all(
        b"apiVersion: llm-d.ai/v1alpha1
kind: EndpointPickerConfig
featureGates: [dataLayer]
plugins:
- type: queue-scorer
- type: kv-cache-utilization-scorer
- type: max-score-picker
schedulingProfiles:
- name: default
  plugins:
  - {pluginRef: queue-scorer, weight: 2}
  - {pluginRef: kv-cache-utilization-scorer, weight: 2}
  - pluginRef: max-score-picker
server: {extprocPort: 1, healthPort: 1, metricsPort: 1}
",
    )
    .unwrap();
    let path = good.path().display().to_string();
    // Ports 1 are never bound: a check starts nothing.
    let output = epp(&["--config", &path, "--check-config"]);
    let stdout = String::from_utf8_lossy(&output.stdout);
    assert!(output.status.success(), "{output:?}");
    assert!(
        stdout.starts_with(&format!("{path}: config OK: profiles default")),
        "{stdout}"
    );
    assert!(stdout.contains("warning: "), "the dataLayer gate: {stdout}");

    // A plugin parameter upstream's picker refuses: the same error a start gives.
    let mut bad = tempfile::Builder::new().suffix(".yaml").tempfile().unwrap();
    bad.write_all(
        b"plugins:
- type: prefix-cache-scorer
  parameters: {blockSize: -3}
- type: max-score-picker
schedulingProfiles:
- name: default
  plugins:
  - pluginRef: prefix-cache-scorer
  - pluginRef: max-score-picker
",
    )
    .unwrap();
    let path = bad.path().display().to_string();
    let output = epp(&["--config", &path, "--check-config"]);
    failed_with(&output, &["prefix-cache-scorer"]);

    // Alpha types follow --allow-experimental-plugins, as on a start.
    let mut alpha = tempfile::Builder::new().suffix(".yaml").tempfile().unwrap();
    alpha
        .write_all(
            b"plugins:
- type: session-affinity-scorer
- type: max-score-picker
schedulingProfiles:
- name: default
  plugins:
  - pluginRef: session-affinity-scorer
  - pluginRef: max-score-picker
",
        )
        .unwrap();
    let path = alpha.path().display().to_string();
    let output = epp(&["--config", &path, "--check-config"]);
    failed_with(&output, &["--allow-experimental-plugins"]);
    let output = epp(&[
        "--config",
        &path,
        "--check-config",
        "--allow-experimental-plugins",
    ]);
    assert!(output.status.success(), "{output:?}");

    let output = epp(&["--check-config", "--endpoints", "127.0.0.1:1"]);
    failed_with(&output, &["--check-config", "--config"]);
}
