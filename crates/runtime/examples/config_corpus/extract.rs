//! Finding `EndpointPickerConfig` texts in a source tree: YAML documents, configs embedded
//! as strings in YAML (ConfigMaps, Helm values), fenced blocks in Markdown and raw strings in
//! Go.

use std::path::{Path, PathBuf};

use serde_norway::Value;

/// One config text found in a file.
pub(crate) struct Candidate {
    /// The file it was found in.
    pub(crate) file: PathBuf,
    /// Its first line in that file (1-based; for an embedded string, the line of the
    /// document or block holding it).
    pub(crate) line: usize,
    /// The text, dedented.
    pub(crate) text: String,
    /// Set when the text is an upstream test case that expects an error (a Go constant or
    /// variable named `error...`, `invalid...`, `bad...`).
    pub(crate) expects_error: bool,
}

const KIND: &str = "EndpointPickerConfig";

/// Whether `text` looks like a picker config: it names the kind, or has both `plugins:` and
/// `schedulingProfiles:` at its top level.
fn is_config(text: &str) -> bool {
    text.contains(&format!("kind: {KIND}"))
        || (text.lines().any(|l| l.starts_with("plugins:"))
            && text.lines().any(|l| l.starts_with("schedulingProfiles:")))
}

/// Every config text in `text`, the contents of `path`.
pub(crate) fn candidates(path: &Path, text: &str) -> Vec<Candidate> {
    if !text.contains(KIND) && !text.contains("schedulingProfiles") {
        return Vec::new();
    }
    let mut found = Vec::new();
    match path.extension().and_then(|e| e.to_str()) {
        Some("yaml" | "yml" | "tpl") => from_yaml(path, text, 1, &mut found),
        Some("md") => from_markdown(path, text, &mut found),
        Some("go") => from_go(path, text, &mut found),
        _ => {}
    }
    found
}

/// The documents of a YAML stream (split at `---` lines), each with its first line.
fn documents(text: &str) -> Vec<(usize, String)> {
    let mut docs = vec![(1, String::new())];
    for (i, line) in text.lines().enumerate() {
        if line.trim_end() == "---" || line.starts_with("--- ") {
            docs.push((i + 2, String::new()));
            continue;
        }
        if let Some((_, doc)) = docs.last_mut() {
            doc.push_str(line);
            doc.push('\n');
        }
    }
    docs
}

fn from_yaml(path: &Path, text: &str, first_line: usize, found: &mut Vec<Candidate>) {
    for (line, doc) in documents(text) {
        let line = first_line + line - 1;
        if !doc.contains(KIND) && !doc.contains("schedulingProfiles") {
            continue;
        }
        match serde_norway::from_str::<Value>(&doc) {
            Ok(value) if is_config(&doc) && is_top_level_config(&value) => {
                found.push(candidate(path, line, &doc, false));
            }
            Ok(value) => embedded(path, line, &value, found),
            // A template (Helm) is not YAML until rendered: its blocks are found by indentation.
            Err(_) => from_indented_blocks(path, line, &doc, found),
        }
    }
}

fn is_top_level_config(value: &Value) -> bool {
    let Value::Mapping(map) = value else {
        return false;
    };
    match map.get("kind") {
        Some(Value::String(kind)) => kind == KIND,
        _ => map.contains_key("schedulingProfiles") || map.contains_key("plugins"),
    }
}

/// Configs held as strings inside a YAML value (a ConfigMap's `data`, Helm values).
fn embedded(path: &Path, line: usize, value: &Value, found: &mut Vec<Candidate>) {
    match value {
        Value::String(s) if is_config(s) => from_yaml(path, s, line, found),
        Value::Sequence(items) => items.iter().for_each(|v| embedded(path, line, v, found)),
        Value::Mapping(map) => map.values().for_each(|v| embedded(path, line, v, found)),
        Value::Tagged(tagged) => embedded(path, line, &tagged.value, found),
        _ => {}
    }
}

/// In text that is not YAML (a template), the indented block around each
/// `kind: EndpointPickerConfig` line: the lines at its indentation or deeper.
fn from_indented_blocks(path: &Path, first_line: usize, text: &str, found: &mut Vec<Candidate>) {
    let lines: Vec<&str> = text.lines().collect();
    let indent = |l: &str| l.len() - l.trim_start().len();
    for (i, line) in lines.iter().enumerate() {
        if line.trim() != format!("kind: {KIND}") {
            continue;
        }
        let depth = indent(line);
        let inside = |l: &&str| l.trim().is_empty() || indent(l) >= depth;
        let start = lines[..i]
            .iter()
            .rposition(|l| !inside(l))
            .map_or(0, |p| p + 1);
        let end = lines[i..]
            .iter()
            .position(|l| !inside(l))
            .map_or(lines.len(), |p| i + p);
        let block: String = lines[start..end]
            .iter()
            .map(|l| format!("{}\n", l.get(depth..).unwrap_or("").trim_end()))
            .collect();
        found.push(candidate(path, first_line + start, &block, false));
    }
}

fn from_markdown(path: &Path, text: &str, found: &mut Vec<Candidate>) {
    let mut block: Option<(usize, String)> = None;
    for (i, line) in text.lines().enumerate() {
        if line.trim_start().starts_with("```") {
            match block.take() {
                Some((start, body)) => {
                    if is_config(&dedent(&body)) || body.contains(KIND) {
                        from_yaml(path, &dedent(&body), start, found);
                    }
                }
                None => block = Some((i + 2, String::new())),
            }
            continue;
        }
        if let Some((_, body)) = &mut block {
            body.push_str(line);
            body.push('\n');
        }
    }
}

fn from_go(path: &Path, text: &str, found: &mut Vec<Candidate>) {
    let mut rest = text;
    let mut offset = 0;
    while let Some(open) = rest.find('`') {
        let after = &rest[open + 1..];
        let Some(close) = after.find('`') else {
            break;
        };
        let body = &after[..close];
        if is_config(&dedent(body)) {
            let before = &text[..offset + open];
            let line = before.lines().count() + 1;
            let expects_error = expects_error(before);
            found.push(candidate(path, line, &dedent(body), expects_error));
        }
        let consumed = open + 1 + close + 1;
        offset += consumed;
        rest = &rest[consumed..];
    }
}

/// Whether the Go identifier or test-case name just before a raw string says the case
/// expects an error.
fn expects_error(before: &str) -> bool {
    let tail: String = before
        .lines()
        .rev()
        .take(3)
        .collect::<Vec<_>>()
        .join(" ")
        .to_lowercase();
    [
        "error",
        "invalid",
        "bad",
        "fail",
        "wrong",
        "missing",
        "duplicate",
        "unknown",
    ]
    .iter()
    .any(|word| tail.contains(word))
}

fn dedent(text: &str) -> String {
    let depth = text
        .lines()
        .filter(|l| !l.trim().is_empty())
        .map(|l| l.len() - l.trim_start().len())
        .min()
        .unwrap_or(0);
    text.lines()
        .map(|l| format!("{}\n", l.get(depth..).unwrap_or("").trim_end()))
        .collect()
}

fn candidate(path: &Path, line: usize, text: &str, expects_error: bool) -> Candidate {
    Candidate {
        file: path.to_path_buf(),
        line,
        text: text.to_string(),
        expects_error,
    }
}
