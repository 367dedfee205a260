//! Prompts of natural text for the tokenizer benchmarks: Shepherd's own docs, as completions
//! prompts and as conversations, and the test fixture tokenizer.
//!
//! ```
//! use shepherd_benches::docs_prompts::{chat, completions, docs_text};
//!
//! let text = docs_text(2048);
//! assert_eq!(text.len(), 2048);
//! assert!(completions(&text).chat.is_none());
//! assert!(chat(&text, "and then?").chat.is_some());
//! ```

use std::path::PathBuf;

use shepherd_scheduler_core::request::{InferenceRequest, ParseLimits, parse_openai_request};

/// The workspace root.
pub fn workspace() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("..")
}

/// The tokenizer the benches use: `TOKENIZE_BENCH_TOKENIZER` (a model directory with
/// `tokenizer.json` and `tokenizer_config.json`), else the test fixture
/// (`crates/scorers/tests/fixtures/tokenizer`, a 3,000-token Llama-3-like BPE).
pub fn tokenizer_dir() -> PathBuf {
    std::env::var_os("TOKENIZE_BENCH_TOKENIZER")
        .map(PathBuf::from)
        .unwrap_or_else(|| workspace().join("crates/scorers/tests/fixtures/tokenizer"))
}

/// Shepherd's docs, repeated as needed, cut to `size` bytes (on a char boundary).
pub fn docs_text(size: usize) -> String {
    let mut files: Vec<PathBuf> = std::fs::read_dir(workspace().join("docs"))
        .map(|dir| dir.filter_map(Result::ok).map(|e| e.path()).collect())
        .unwrap_or_default();
    files.sort();
    let mut corpus: String = files
        .iter()
        .map(|f| std::fs::read_to_string(f).unwrap_or_default())
        .collect();
    if corpus.is_empty() {
        corpus = "The quick brown fox jumps over the lazy dog. ".into();
    }
    let mut text = String::with_capacity(size + corpus.len());
    while text.len() < size {
        text.push_str(&corpus);
    }
    let mut cut = size;
    while !text.is_char_boundary(cut) {
        cut -= 1;
    }
    text.truncate(cut);
    text
}

fn parse(path: &str, body: serde_json::Value) -> InferenceRequest {
    parse_openai_request(path, body.to_string().as_bytes(), &ParseLimits::default())
        .unwrap_or_else(|e| panic!("a valid {path} body: {e}"))
}

/// A completions request for `text`.
pub fn completions(text: &str) -> InferenceRequest {
    parse(
        "/v1/completions",
        serde_json::json!({"model": "m", "prompt": text}),
    )
}

/// A conversation of turns of about 1 KB covering `text`, then `last` as the final user turn.
pub fn chat(text: &str, last: &str) -> InferenceRequest {
    let mut messages = vec![
        serde_json::json!({"role": "system", "content": "You answer from the documentation."}),
    ];
    let mut rest = text;
    let mut user = true;
    while !rest.is_empty() {
        let mut cut = rest.len().min(1024);
        while !rest.is_char_boundary(cut) {
            cut += 1;
        }
        let (turn, tail) = rest.split_at(cut);
        let role = if user { "user" } else { "assistant" };
        messages.push(serde_json::json!({"role": role, "content": turn}));
        user = !user;
        rest = tail;
    }
    messages.push(serde_json::json!({"role": "user", "content": last}));
    parse(
        "/v1/chat/completions",
        serde_json::json!({"model": "m", "messages": messages}),
    )
}
