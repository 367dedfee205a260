//! Parsing a request body: the cost every request pays before it is scheduled.
//!
//! - `request_parse/openai/{completions-1KB,chat-8KB,chat-200KB}`: `parse_openai_request` on
//!   a completions body and on chat conversations (10 and 250 turns);
//! - `request_parse/parser-set/…`: the same bodies through `ParserSet::upstream_default()`
//!   (path resolution, then the same parser), what the adapters run;
//! - `request_parse/parser-set/vllm-generate-8k-tokens` and `anthropic-8KB`: the other
//!   parsers.
//!
//! ```text
//! cargo bench -p shepherd-benches --bench request_parse
//! ```

use std::hint::black_box;
use std::time::Duration;

use criterion::{BenchmarkId, Criterion, Throughput};
use shepherd_scheduler_core::request::{ParseLimits, ParserSet, parse_openai_request};

fn chat_body(turns: usize) -> String {
    let messages: Vec<String> = (0..turns)
        .map(|i| {
            let role = if i % 2 == 0 { "user" } else { "assistant" };
            let text = format!("turn {i}: ").repeat(80);
            format!(r#"{{"role":"{role}","content":"{text}"}}"#)
        })
        .collect();
    format!(
        r#"{{"model":"llama","stream":true,"max_tokens":128,"messages":[{}]}}"#,
        messages.join(",")
    )
}

fn completions_body() -> String {
    let prompt = "The quick brown fox jumps over the lazy dog. ".repeat(22);
    format!(r#"{{"model":"llama","max_tokens":64,"prompt":"{prompt}"}}"#)
}

fn main() {
    let mut criterion = Criterion::default()
        .configure_from_args()
        .warm_up_time(Duration::from_millis(500))
        .measurement_time(Duration::from_secs(2));
    let limits = ParseLimits::default();
    let cases = [
        ("completions-1KB", "/v1/completions", completions_body()),
        ("chat-8KB", "/v1/chat/completions", chat_body(10)),
        ("chat-200KB", "/v1/chat/completions", chat_body(250)),
    ];
    let mut group = criterion.benchmark_group("request_parse");
    for (label, path, body) in &cases {
        group.throughput(Throughput::Bytes(body.len() as u64));
        group.bench_function(BenchmarkId::new("openai", label), |b| {
            b.iter(|| parse_openai_request(black_box(path), black_box(body.as_bytes()), &limits))
        });
    }
    let parsers = ParserSet::upstream_default();
    let tokens: Vec<u32> = (0..8192).map(|i| (i * 7919) % 150_000).collect();
    let generate = format!(
        r#"{{"model":"llama","token_ids":{tokens:?},"sampling_params":{{"max_tokens":64}}}}"#
    );
    let anthropic =
        chat_body(10).replacen(r#""messages""#, r#""system":"Be brief.","messages""#, 1);
    let native = [
        (
            "vllm-generate-8k-tokens",
            "/inference/v1/generate",
            generate,
        ),
        ("anthropic-8KB", "/v1/messages", anthropic),
    ];
    for (label, path, body) in cases.iter().chain(&native) {
        group.throughput(Throughput::Bytes(body.len() as u64));
        group.bench_function(BenchmarkId::new("parser-set", label), |b| {
            b.iter(|| parsers.parse(black_box(path), black_box(body.as_bytes()), &limits))
        });
    }
    group.finish();
    criterion.final_summary();
}
