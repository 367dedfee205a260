//! The report code is a pipeline a reader follows one way: runs → measures → summaries →
//! aggregates → judgements → documents → renderers. Each file of `src/report` may only use the
//! stages before it, and the simulation (runner, policy, engine, workload) uses none of the
//! report. This test reads the sources and checks those imports.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::path::Path;

/// The report's modules in pipeline order (a module may use those before it).
const ORDER: &[&str] = &[
    "measure",
    "attainment",
    "latency_error",
    "summary",
    "aggregate",
    "judge",
    "best",
    "max_goodput",
    "document",
    "cell",
    "slo_columns",
    "latency_table",
    "table",
];

/// The code of `path` before its unit tests.
fn code(path: &Path) -> String {
    let text = std::fs::read_to_string(path).unwrap();
    match text.find("#[cfg(test)]") {
        Some(i) => text[..i].to_string(),
        None => text,
    }
}

/// Report modules named in `code` (as `super::m` or `crate::report::m`), doc comments aside.
fn uses(code: &str) -> Vec<String> {
    let mut out = Vec::new();
    for line in code.lines().filter(|l| !l.trim_start().starts_with("//")) {
        for prefix in ["super::", "crate::report::"] {
            for (i, _) in line.match_indices(prefix) {
                let rest = &line[i + prefix.len()..];
                let name: String = rest
                    .chars()
                    .take_while(|c| c.is_ascii_alphanumeric() || *c == '_')
                    .collect();
                if ORDER.contains(&name.as_str()) {
                    out.push(name);
                }
            }
        }
    }
    out
}

#[test]
fn report_stages_only_use_earlier_stages() {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("src/report");
    for (rank, module) in ORDER.iter().enumerate() {
        let used = uses(&code(&dir.join(format!("{module}.rs"))));
        for u in used {
            let at = ORDER.iter().position(|m| *m == u).unwrap();
            assert!(
                at < rank,
                "report/{module}.rs uses report/{u}.rs, a later (or the same) stage of the pipeline"
            );
        }
    }
    // Every file of the directory is placed in the order.
    for entry in std::fs::read_dir(&dir).unwrap() {
        let name = entry.unwrap().file_name().into_string().unwrap();
        let stem = name.trim_end_matches(".rs");
        assert!(
            stem == "mod" || ORDER.contains(&stem),
            "report/{name} has no place in the pipeline order"
        );
    }
}

/// Every `.rs` file under `dir`.
fn sources(dir: &Path) -> Vec<std::path::PathBuf> {
    let mut out = Vec::new();
    for entry in std::fs::read_dir(dir).unwrap() {
        let path = entry.unwrap().path();
        if path.is_dir() {
            out.extend(sources(&path));
        } else if path.extension().is_some_and(|e| e == "rs") {
            out.push(path);
        }
    }
    out
}

#[test]
fn the_simulation_uses_no_report_and_policies_no_runner() {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    for (part, banned) in [
        ("runner", &["crate::report", "crate::compare"][..]),
        (
            "engine",
            &["crate::report", "crate::compare", "crate::runner"][..],
        ),
        (
            "workload",
            &["crate::report", "crate::compare", "crate::runner"][..],
        ),
        (
            "policy",
            &["crate::report", "crate::compare", "crate::runner"][..],
        ),
    ] {
        for file in sources(&src.join(part)) {
            let text = code(&file);
            for line in text.lines().filter(|l| !l.trim_start().starts_with("//")) {
                for b in banned {
                    assert!(
                        !line.contains(b),
                        "{} uses {b}: the simulation must not depend on what reads it",
                        file.display()
                    );
                }
            }
        }
    }
}
