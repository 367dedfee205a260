//! Tokenizing a request with the `token-producer`'s real tokenizer: what precise prefix routing
//! pays per request before it can hash blocks.
//!
//! Prompts of about 1 KB, 16 KB and 400 KB of English and Markdown (Shepherd's own docs):
//!
//! - `tokenize/completions-uncached/…`: a completions prompt, the segment cache off: the
//!   tokenizer's own speed;
//! - `tokenize/completions-cached/…`: the same prompt again, cache on (every piece a hit);
//! - `tokenize/chat-render/…`: rendering the chat template alone (no tokenizing);
//! - `tokenize/chat-uncached/…`: a conversation (turns of about 1 KB), cache off;
//! - `tokenize/chat-next-turn/…`: the same conversation with a new last user turn, cache on:
//!   the multi-turn case, where every earlier turn was seen with the previous request.
//!
//! The tokenizer is the test fixture (`crates/scorers/tests/fixtures/tokenizer`, a 3000-token
//! Llama-3-like BPE); `TOKENIZE_BENCH_TOKENIZER=/path/to/model-dir` measures a real model's
//! instead (a local directory with `tokenizer.json` and `tokenizer_config.json`).
//!
//! ```text
//! cargo bench -p shepherd-benches --bench tokenize
//! TOKENIZE_BENCH_TOKENIZER=~/models/Llama-3.1-8B-Instruct cargo bench -p shepherd-benches --bench tokenize
//! ```

use std::hint::black_box;
use std::path::PathBuf;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use criterion::{BatchSize, BenchmarkId, Criterion, Throughput};
use shepherd_scheduler_core::request::{InferenceRequest, ParseLimits, parse_openai_request};
use shepherd_scorers::producers::TokenProducer;
use shepherd_scorers::producers::token::{TokenProducerParameters, TokenizerFiles};

const SIZES: [(&str, usize); 3] = [("1KB", 1 << 10), ("16KB", 16 << 10), ("400KB", 400 << 10)];

fn workspace() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("..")
}

fn producer(cache_max_tokens: usize) -> TokenProducer {
    let dir = std::env::var_os("TOKENIZE_BENCH_TOKENIZER")
        .map(PathBuf::from)
        .unwrap_or_else(|| workspace().join("crates/scorers/tests/fixtures/tokenizer"));
    let files = TokenizerFiles::at(&dir).expect("a tokenizer directory");
    let parameters = TokenProducerParameters {
        cache_max_tokens,
        ..TokenProducerParameters::default()
    };
    TokenProducer::load("bench", &files, &parameters).expect("the tokenizer loads")
}

/// Shepherd's docs, repeated as needed, cut to `size` bytes (on a char boundary).
fn text(size: usize) -> String {
    let mut corpus = String::new();
    let mut files: Vec<PathBuf> = std::fs::read_dir(workspace().join("docs"))
        .map(|dir| dir.filter_map(Result::ok).map(|e| e.path()).collect())
        .unwrap_or_default();
    files.sort();
    for file in files {
        corpus.push_str(&std::fs::read_to_string(file).unwrap_or_default());
    }
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

fn completions(text: &str) -> InferenceRequest {
    let body = serde_json::json!({"model": "m", "prompt": text}).to_string();
    parse_openai_request("/v1/completions", body.as_bytes(), &ParseLimits::default())
        .expect("a completions body")
}

/// A conversation of turns of about 1 KB covering `text`, then `last` as the final user turn.
fn chat(text: &str, last: &str) -> InferenceRequest {
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
    let body = serde_json::json!({"model": "m", "messages": messages}).to_string();
    parse_openai_request(
        "/v1/chat/completions",
        body.as_bytes(),
        &ParseLimits::default(),
    )
    .expect("a chat body")
}

fn main() {
    let mut criterion = Criterion::default()
        .configure_from_args()
        .warm_up_time(Duration::from_millis(500))
        .measurement_time(Duration::from_secs(3))
        .sample_size(20);
    let uncached = producer(0);
    let cached = producer(1 << 22);
    let mut group = criterion.benchmark_group("tokenize");
    for (label, size) in SIZES {
        let text = text(size);
        group.throughput(Throughput::Bytes(text.len() as u64));

        let request = completions(&text);
        group.bench_function(BenchmarkId::new("completions-uncached", label), |b| {
            b.iter(|| {
                uncached
                    .prompt_for(black_box(&request))
                    .map(|p| p.len_bytes())
            })
        });
        group.bench_function(BenchmarkId::new("completions-cached", label), |b| {
            b.iter(|| {
                cached
                    .prompt_for(black_box(&request))
                    .map(|p| p.len_bytes())
            })
        });

        let conversation = chat(&text, "And what about the last question?");
        let messages = conversation.chat.as_deref().expect("kept messages");
        group.bench_function(BenchmarkId::new("chat-render", label), |b| {
            b.iter(|| cached.render_chat(black_box(messages)).map(|t| t.len()))
        });
        group.bench_function(BenchmarkId::new("chat-uncached", label), |b| {
            b.iter(|| {
                uncached
                    .prompt_for(black_box(&conversation))
                    .map(|p| p.len_bytes())
            })
        });
        let turn = AtomicUsize::new(0);
        cached.prompt_for(&conversation).expect("tokenizes");
        group.bench_function(BenchmarkId::new("chat-next-turn", label), |b| {
            b.iter_batched(
                || {
                    let n = turn.fetch_add(1, Ordering::Relaxed);
                    chat(
                        &text,
                        &format!("Follow-up question number {n}: what changes then?"),
                    )
                },
                |request| {
                    cached
                        .prompt_for(black_box(&request))
                        .map(|p| p.len_bytes())
                },
                BatchSize::LargeInput,
            )
        });
    }
    group.finish();
    criterion.final_summary();
}
