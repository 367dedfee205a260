//! Replays the seeds and every input kept in `regressions/` through the same code the fuzz
//! targets run, as a plain test that needs neither cargo-fuzz nor libFuzzer:
//! `cargo test --manifest-path fuzz/Cargo.toml`.

use std::fs;
use std::path::{Path, PathBuf};

fn inputs(target: &str) -> Vec<PathBuf> {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let mut files = Vec::new();
    for dir in [
        root.join("seeds").join(target),
        root.join("regressions").join(target),
    ] {
        let Ok(entries) = fs::read_dir(&dir) else {
            continue;
        };
        for entry in entries.flatten() {
            if entry.path().is_file() {
                files.push(entry.path());
            }
        }
    }
    files.sort();
    files
}

fn replay(target: &str, run: fn(&[u8])) -> usize {
    let files = inputs(target);
    for file in &files {
        let data = fs::read(file).unwrap_or_else(|e| panic!("{}: {e}", file.display()));
        run(&data);
        // Prefixes of small inputs too: truncated bodies are the commonest malformed input.
        let step = if data.len() <= 4096 { 7 } else { data.len() };
        for cut in (0..data.len()).step_by(step) {
            run(&data[..cut]);
        }
    }
    files.len()
}

#[test]
fn parse_body_inputs() {
    assert!(replay("parse_body", shepherd_fuzz::parse_body) >= 5);
}

#[test]
fn parse_config_inputs() {
    assert!(replay("parse_config", shepherd_fuzz::parse_config) >= 2);
}

#[test]
fn parse_metrics_inputs() {
    assert!(replay("parse_metrics", shepherd_fuzz::metrics::parse_metrics) >= 5);
}

#[test]
fn ext_proc_sequence_inputs() {
    assert!(replay("ext_proc_sequence", shepherd_fuzz::ext_proc_sequence) >= 4);
}

#[test]
fn decode_kv_events_inputs() {
    assert!(
        replay(
            "decode_kv_events",
            shepherd_fuzz::kv_events::decode_kv_events
        ) >= 12
    );
}

#[test]
fn zmtp_subscriber_inputs() {
    assert!(replay("zmtp_subscriber", shepherd_fuzz::zmtp::zmtp_subscriber) >= 8);
}

#[test]
fn replica_datagram_inputs() {
    assert!(replay("replica_datagram", shepherd_fuzz::replicas::replica_datagram) >= 3);
}
