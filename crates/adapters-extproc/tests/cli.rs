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
