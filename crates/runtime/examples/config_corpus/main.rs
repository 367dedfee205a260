//! How many real upstream `EndpointPickerConfig` texts Shepherd loads.
//!
//! Walks source trees (upstream checkouts: `scripts/config-corpus.sh` fetches them at pinned
//! commits), finds every picker config in YAML files, in configs embedded in YAML (ConfigMaps,
//! Helm values), in Markdown code blocks and in Go raw strings, and checks each unique text as
//! `shepherd-epp --config FILE --check-config` would. Left out of the count, and listed:
//! templates with placeholders (`{{ }}`, `${ }`, Go format verbs, elided `...` lines), texts declaring plugin types that are neither
//! upstream's nor Shepherd's and are named as test doubles (`test-scorer`, `mock-...`), and upstream test cases that
//! expect an error.
//!
//! ```sh
//! cargo run -p shepherd-runtime --example config_corpus -- [--list] DIR...
//! ```

mod extract;

use std::collections::{BTreeMap, BTreeSet, HashSet};
use std::path::{Path, PathBuf};
use std::process::ExitCode;

use serde_norway::Value;
use shepherd_runtime::config::RuntimeConfig;
use shepherd_runtime::{Runtime, RuntimeOptions};
use shepherd_scheduler_core::config::upstream_type;
use shepherd_scorers::builtin_registry;

use extract::Candidate;

/// Directories never searched.
const SKIPPED: [&str; 5] = [".git", "vendor", "node_modules", "third_party", "target"];

/// What became of one config text.
enum Outcome {
    Placeholder,
    TestOnly(Vec<String>),
    ExpectsError,
    Loads { needs_flag: bool },
    Refused(String),
}

fn files(dir: &Path, out: &mut Vec<PathBuf>) {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return;
    };
    let mut entries: Vec<_> = entries.flatten().map(|e| e.path()).collect();
    entries.sort();
    for path in entries {
        let name = path.file_name().and_then(|n| n.to_str()).unwrap_or("");
        if path.is_dir() {
            if !SKIPPED.contains(&name) {
                files(&path, out);
            }
        } else {
            out.push(path);
        }
    }
}

/// Whether a text is a template rather than a config: Helm or shell placeholders, Go format
/// verbs, or a line elided with dots.
fn is_template(text: &str) -> bool {
    ["{{", "${", "%s", "%q", "%d", "%v"]
        .iter()
        .any(|p| text.contains(p))
        || text.lines().any(|l| {
            let l = l.trim().trim_start_matches("- ").trim();
            l.starts_with("...") || l.starts_with("# ...")
        })
}

/// Whether a plugin type not known to upstream's table or Shepherd's registry is named as
/// upstream's test doubles are (`test-scorer`, `mock-metrics-source`, `custom-scorer`).
fn is_test_name(plugin_type: &str) -> bool {
    ["test", "mock", "custom-", "unknown-", "fake", "dummy"]
        .iter()
        .any(|w| plugin_type.contains(w))
}

/// The plugin types a config text declares (`plugins[].type`).
fn declared_types(text: &str) -> Vec<String> {
    let Ok(Value::Mapping(map)) = serde_norway::from_str::<Value>(text) else {
        return Vec::new();
    };
    let Some(Value::Sequence(plugins)) = map.get("plugins") else {
        return Vec::new();
    };
    plugins
        .iter()
        .filter_map(|p| p.get("type").and_then(Value::as_str).map(str::to_owned))
        .collect()
}

async fn judge(candidate: &Candidate) -> Outcome {
    let text = &candidate.text;
    if is_template(text) {
        return Outcome::Placeholder;
    }
    let registry = builtin_registry();
    let foreign: Vec<String> = declared_types(text)
        .into_iter()
        .filter(|t| upstream_type(t).is_none() && !registry.contains(t) && is_test_name(t))
        .collect();
    if !foreign.is_empty() {
        return Outcome::TestOnly(foreign);
    }
    if candidate.expects_error {
        return Outcome::ExpectsError;
    }
    let check = |allow| async move {
        let options = RuntimeOptions {
            allow_experimental_plugins: allow,
            ..RuntimeOptions::default()
        };
        let config = RuntimeConfig::from_yaml(text).map_err(|e| e.to_string())?;
        Runtime::check(config, &options)
            .await
            .map_err(|e| e.to_string())
    };
    match check(false).await {
        Ok(_) => Outcome::Loads { needs_flag: false },
        Err(_) => match check(true).await {
            Ok(_) => Outcome::Loads { needs_flag: true },
            Err(message) => Outcome::Refused(message),
        },
    }
}

/// A refusal's reason without what differs between configs (plugin names, lines).
fn reason(message: &str) -> String {
    let first = message.lines().next().unwrap_or(message);
    let mut out = String::new();
    let mut quoted = false;
    for c in first.chars() {
        match c {
            '\'' => {
                quoted = !quoted;
                out.push_str(if quoted { "'…" } else { "'" });
            }
            _ if quoted => {}
            _ => out.push(c),
        }
    }
    out.chars().take(180).collect()
}

fn normalized(text: &str) -> String {
    text.lines()
        .map(str::trim_end)
        .filter(|l| !l.is_empty() && !l.trim_start().starts_with('#'))
        .collect::<Vec<_>>()
        .join("\n")
}

#[tokio::main(flavor = "current_thread")]
async fn main() -> ExitCode {
    let mut list = false;
    let mut dirs = Vec::new();
    for arg in std::env::args().skip(1) {
        match arg.as_str() {
            "--list" => list = true,
            "-h" | "--help" => {
                println!("usage: config_corpus [--list] DIR...");
                return ExitCode::SUCCESS;
            }
            _ => dirs.push(PathBuf::from(arg)),
        }
    }
    if dirs.is_empty() {
        eprintln!("usage: config_corpus [--list] DIR...");
        return ExitCode::FAILURE;
    }
    let mut seen = HashSet::new();
    let mut candidates = Vec::new();
    for dir in &dirs {
        let mut paths = Vec::new();
        files(dir, &mut paths);
        for path in paths {
            let Ok(text) = std::fs::read_to_string(&path) else {
                continue;
            };
            for candidate in extract::candidates(&path, &text) {
                if seen.insert(normalized(&candidate.text)) {
                    candidates.push(candidate);
                }
            }
        }
    }

    let (mut loads, mut flagged, mut counted) = (0, 0, 0);
    let (mut placeholders, mut expects_error) = (0, 0);
    let mut test_only = BTreeSet::new();
    let mut test_only_count = 0;
    let mut reasons: BTreeMap<String, usize> = BTreeMap::new();
    for candidate in &candidates {
        let outcome = judge(candidate).await;
        let verdict = match &outcome {
            Outcome::Placeholder => {
                placeholders += 1;
                "placeholder".to_string()
            }
            Outcome::TestOnly(types) => {
                test_only_count += 1;
                test_only.extend(types.iter().cloned());
                format!("test-only types {types:?}")
            }
            Outcome::ExpectsError => {
                expects_error += 1;
                "upstream test expecting an error".to_string()
            }
            Outcome::Loads { needs_flag } => {
                counted += 1;
                loads += 1;
                if *needs_flag {
                    flagged += 1;
                    "loads with --allow-experimental-plugins".to_string()
                } else {
                    "loads".to_string()
                }
            }
            Outcome::Refused(message) => {
                counted += 1;
                *reasons.entry(reason(message)).or_default() += 1;
                format!("REFUSED: {}", message.lines().next().unwrap_or(""))
            }
        };
        if list {
            println!("{}:{}: {verdict}", candidate.file.display(), candidate.line);
        }
    }

    let share = if counted == 0 {
        0.0
    } else {
        100.0 * f64::from(loads) / f64::from(counted)
    };
    println!();
    println!("unique config texts found: {}", candidates.len());
    println!(
        "left out: {placeholders} templates with placeholders, {test_only_count} with upstream's test-only plugin types, {expects_error} upstream test cases expecting an error"
    );
    println!(
        "counted: {counted}; load: {loads} ({share:.1} %), of which {flagged} need --allow-experimental-plugins"
    );
    if !test_only.is_empty() {
        println!(
            "test-only types: {}",
            test_only.into_iter().collect::<Vec<_>>().join(", ")
        );
    }
    if !reasons.is_empty() {
        println!();
        println!("| refused | reason |");
        println!("|---:|---|");
        let mut sorted: Vec<_> = reasons.into_iter().collect();
        sorted.sort_by(|a, b| b.1.cmp(&a.1).then(a.0.cmp(&b.0)));
        for (reason, count) in sorted {
            println!("| {count} | {} |", reason.replace('|', "\\|"));
        }
    }
    ExitCode::SUCCESS
}
