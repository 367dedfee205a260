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
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use criterion::{BatchSize, BenchmarkId, Criterion, Throughput};
use shepherd_benches::docs_prompts::{chat, completions, docs_text, tokenizer_dir};
use shepherd_scorers::producers::TokenProducer;
use shepherd_scorers::producers::token::{TokenProducerParameters, TokenizerFiles};

const SIZES: [(&str, usize); 3] = [("1KB", 1 << 10), ("16KB", 16 << 10), ("400KB", 400 << 10)];

fn producer(cache_max_tokens: usize) -> TokenProducer {
    let dir = tokenizer_dir();
    let files = TokenizerFiles::at(&dir).expect("a tokenizer directory");
    let parameters = TokenProducerParameters {
        cache_max_tokens,
        ..TokenProducerParameters::default()
    };
    TokenProducer::load("bench", &files, &parameters).expect("the tokenizer loads")
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
        let text = docs_text(size);
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
