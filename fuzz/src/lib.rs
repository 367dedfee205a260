//! The fuzz targets' bodies, shared by the libFuzzer binaries (`fuzz_targets/`) and the plain
//! replay test (`tests/replay.rs`), so both check the same properties on the same inputs.
//!
//! - [`parse_body`]: the first input byte picks the API path (and whether a tiny body limit
//!   and a LoRA map apply); the rest is the request body, read by the OpenAI parser and, at a
//!   path of [`NATIVE_PATHS`], by a parser set with every parser.
//! - [`parse_config`]: the input, if UTF-8, is a YAML picker configuration; when it loads, it
//!   is built into a scheduler with a small registry of test plugins. The text's limits
//!   measure (`config::limits`) is also checked against what the YAML parser builds from it.
//! - [`ext_proc_sequence`]: the input is a sequence of ext_proc messages for the endpoint
//!   picker's stream state machine (see [`ext_proc`]).
//! - [`kv_events::decode_kv_events`]: the input is a KV-event payload, also tried as a topic
//!   and a sequence frame.
//! - [`zmtp::zmtp_subscriber`]: the input is what a publisher sends a KV-event subscriber on a
//!   loopback TCP connection (first byte: a valid handshake first, small limits).
#![forbid(unsafe_code)]
#![warn(missing_docs)]

pub mod ext_proc;

pub use ext_proc::ext_proc_sequence;

use std::sync::Arc;

use shepherd_scheduler_core::config::{EndpointPickerConfig, Registry, build_scheduler, limits};
use shepherd_scheduler_core::endpoint::{Endpoint, Pool};
use shepherd_scheduler_core::plugin::{
    Category, CycleState, Picker, PluginInstance, Score, Scorer,
};
use shepherd_scheduler_core::prelude::{ManualClock, Timestamp};
use shepherd_scheduler_core::request::{
    ApiKind, InferenceRequest, ParseError, ParseLimits, ParserKind, ParserSet, Prompt,
    parse_openai_request,
};
use shepherd_scheduler_core::rng::PickRng;

/// The paths [`parse_body`] chooses from (the last is not an inference API).
pub const PATHS: [&str; 5] = [
    "/v1/completions",
    "/v1/chat/completions",
    "/v1/responses",
    "/v1/embeddings",
    "/v1/models",
];

/// The paths the parser set of [`parse_body`] reads at (one per parser, and an unclaimed
/// path for the fallback).
pub const NATIVE_PATHS: [&str; 6] = [
    "/v1/messages",
    "/inference/v1/generate",
    "/generate",
    "/v1/messages/count_tokens",
    "/openai/v1/chat/completions",
    "/v1/audio/speech",
];

/// Runs one body through the parsers and checks what comes out. Panics only on a broken
/// invariant (which is what the fuzzer reports).
pub fn parse_body(data: &[u8]) {
    let Some((&selector, body)) = data.split_first() else {
        return;
    };
    let path = PATHS[usize::from(selector) % PATHS.len()];
    let mut limits = ParseLimits::default();
    if selector & 0x80 != 0 {
        limits = limits.with_max_body_bytes(64);
    }
    if selector & 0x40 != 0 {
        limits = limits.with_lora_adapter("m", "base");
    }
    match parse_openai_request(path, body, &limits) {
        Ok(request) => {
            assert!(body.len() <= limits.max_body_bytes);
            assert!(!request.model.is_empty());
            assert!(!request.prompt.is_empty());
            assert_eq!(request.body_size, body.len());
            match &request.prompt {
                Prompt::Text(text) => {
                    assert_eq!(request.prompt.estimated_tokens(), text.len().div_ceil(4));
                }
                Prompt::Tokens(ids) => assert_eq!(request.prompt.estimated_tokens(), ids.len()),
            }
            if request.lora.is_some() {
                assert_eq!(request.model, "base");
            }
        }
        Err(error) => check_error(&error),
    }

    let every = ParserSet::new(
        [
            ParserKind::OpenAi,
            ParserKind::Anthropic,
            ParserKind::VllmHttp,
            ParserKind::SglangHttp,
            ParserKind::Passthrough,
        ]
        .map(|kind| (kind.type_name(), kind)),
    );
    let path = NATIVE_PATHS[usize::from(selector) % NATIVE_PATHS.len()];
    match every.parse(path, body, &limits) {
        Ok(request) => check_native(&request, body, &limits),
        Err(error) => check_error(&error),
    }

    // The gRPC parsers: the body as a gRPC frame (5-byte prefix and a protobuf message).
    let grpc = ParserSet::new(
        [ParserKind::VllmGrpc, ParserKind::VertexAi].map(|kind| (kind.type_name(), kind)),
    );
    let path = GRPC_PATHS[usize::from(selector) % GRPC_PATHS.len()];
    match grpc.parse(path, body, &limits) {
        Ok(request) => {
            assert!(body.len() <= limits.max_body_bytes);
            assert_eq!(request.body_size, body.len());
        }
        Err(error) => check_error(&error),
    }
}

/// The gRPC methods the gRPC parsers of [`parse_body`] read.
pub const GRPC_PATHS: [&str; 5] = [
    "/vllm.grpc.engine.VllmEngine/Generate",
    "/vllm.grpc.engine.VllmEngine/Embed",
    "/google.cloud.aiplatform.v1.PredictionService/ChatCompletions",
    "/google.cloud.aiplatform.v1.PredictionService/RawPredict",
    "/google.cloud.aiplatform.v1.PredictionService/StreamRawPredict",
];

fn check_native(request: &InferenceRequest, body: &[u8], limits: &ParseLimits) {
    assert!(body.len() <= limits.max_body_bytes);
    assert_eq!(request.body_size, body.len());
    match request.api {
        ApiKind::Unparsed => {
            assert!(request.model.is_empty() && request.prompt.is_empty());
        }
        ApiKind::VllmGenerate | ApiKind::SglangGenerate => {
            assert!(matches!(&request.prompt, Prompt::Tokens(ids) if !ids.is_empty()));
        }
        _ => {
            assert!(!request.model.is_empty());
            assert!(matches!(&request.prompt, Prompt::Text(text) if !text.is_empty()));
        }
    }
}

fn check_error(error: &ParseError) {
    assert!(!error.to_string().is_empty());
    let status = error.http_status();
    assert!(matches!(status, 400 | 404 | 413));
    if let ParseError::BodyTooLarge { size, limit } = error {
        assert!(size > limit);
    }
}

struct ConstantScorer;

impl Scorer for ConstantScorer {
    fn category(&self) -> Category {
        Category::Balance
    }

    fn score(&self, _: &mut CycleState<'_>, _: &[&Arc<Endpoint>], out: &mut [Score]) {
        out.fill(Score::new(1.0));
    }
}

struct FirstPicker;

impl Picker for FirstPicker {
    fn pick(&self, totals: &[f64], count: usize, _: &mut PickRng) -> Vec<usize> {
        (0..totals.len().min(count)).collect()
    }
}

fn registry() -> Registry {
    let mut registry = Registry::new();
    registry.register("constant-scorer", |args| {
        if !args.parameters.is_null() && !args.parameters.is_object() {
            return Err("parameters must be a mapping".into());
        }
        Ok(PluginInstance::scorer(Arc::new(ConstantScorer)))
    });
    registry.register("first-picker", |_| {
        Ok(PluginInstance::picker(Arc::new(FirstPicker)))
    });
    registry
}

/// Nodes of a parsed document (a mapping entry counts its key and its value).
fn nodes(value: &serde_json::Value) -> usize {
    1 + match value {
        serde_json::Value::Array(items) => items.iter().map(nodes).sum(),
        serde_json::Value::Object(entries) => entries.values().map(|v| 1 + nodes(v)).sum(),
        _ => 0,
    }
}

fn depth(value: &serde_json::Value) -> usize {
    match value {
        serde_json::Value::Array(items) => 1 + items.iter().map(depth).max().unwrap_or(0),
        serde_json::Value::Object(entries) => 1 + entries.values().map(depth).max().unwrap_or(0),
        _ => 0,
    }
}

/// Checks that the limits' pass never measures less than the YAML parser builds: a text that
/// passes the check and parses has at most two nodes per byte of text and of alias
/// expansion, and (without aliases) at most about twice the measured depth.
fn check_limits(text: &str) {
    let measure = limits::measure(text);
    if limits::check(text).is_err() {
        return;
    }
    let Ok(value) = serde_norway::from_str::<serde_json::Value>(text) else {
        return;
    };
    assert!(
        nodes(&value) <= 2 * (measure.bytes + measure.alias_expansion) + 2,
        "{measure:?}"
    );
    if measure.aliases == 0 {
        assert!(depth(&value) <= 2 * measure.depth + 1, "{measure:?}");
    }
}

/// Loads one configuration text and, when it loads, builds a scheduler from it; also checks
/// the pre-parse limits against what the YAML parser builds.
pub fn parse_config(data: &[u8]) {
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    check_limits(text);
    let Ok(config) = EndpointPickerConfig::from_yaml(text) else {
        return;
    };
    let clock = Arc::new(ManualClock::at(Timestamp::ZERO));
    let pool = Arc::new(Pool::with_clock(clock));
    pool.set_members(["127.0.0.1:8000", "127.0.0.1:8001"]);
    if let Err(error) = build_scheduler(&config, &registry(), pool) {
        assert!(!error.to_string().is_empty());
    }
}

pub mod kv_events;
pub mod metrics;
pub mod replicas;
pub mod zmtp;
