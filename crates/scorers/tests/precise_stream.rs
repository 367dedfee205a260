//! Tokenizing only what the decision needs: the ids tokenized a piece at a time equal the
//! whole text's, and a precise pick that stops at a first block no server holds decides as
//! the pick over the whole prompt's ids does (property tests on the fixture tokenizer, and on
//! the same tokenizer behind an NFC normalizer); the rest is finished after the pick.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::borrow::Cow;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

use proptest::prelude::*;
use proptest::test_runner::{Config, RngAlgorithm, TestRng, TestRunner};
use shepherd_scheduler_core::config::{EndpointPickerConfig, build_scheduler_in};
use shepherd_scheduler_core::decision::Decision;
use shepherd_scheduler_core::endpoint::Pool;
use shepherd_scheduler_core::kv_events::{BlockStored, EngineBlockHash, KvEvent, KvEventBatch};
use shepherd_scheduler_core::request::{
    InferenceRequest, ParseLimits, Prompt, parse_openai_request,
};
use shepherd_scheduler_core::scheduler::{ScheduleOptions, Scheduler};
use shepherd_scheduler_core::shared::SharedState;
use shepherd_scorers::builtin_registry;
use shepherd_scorers::producers::precise_prefix::feed_name;
use shepherd_scorers::producers::token::BegunPrompt;
use shepherd_scorers::producers::{PreciseKvEvents, TokenProducer};

const SERVERS: [&str; 4] = [
    "10.0.0.1:8000",
    "10.0.0.2:8000",
    "10.0.0.3:8000",
    "10.0.0.4:8000",
];

const DRY: ScheduleOptions<'static> = ScheduleOptions {
    subset: None,
    profile: None,
    dry_run: true,
};

/// Pieces of text that stress word boundaries: runs of spaces and newlines, digits,
/// contractions, punctuation, accents (composed and not), other scripts, emoji, the
/// fixture's added tokens (and pieces of them).
const FRAGMENTS: &[&str] = &[
    "Hello",
    " world",
    "  ",
    "   ",
    "\n",
    "\n\n",
    " \n ",
    "\t",
    "123",
    "4567",
    "'s",
    "'re",
    "'ll",
    "don't",
    " it's",
    "!!",
    "?!\n",
    "...",
    " -",
    "é",
    "e\u{301}",
    "\u{301}",
    "ü",
    "日本語",
    "テスト",
    "🦀",
    "😀👍",
    "Привет",
    " Grüße",
    "<|eot_id|>",
    "<|start_header_id|>",
    "<|end_header_id|>",
    "<|begin_of_text|>",
    "<|eot",
    "|>",
    "##",
    "```rust\n",
    "    let x = 1;\n",
    "http://x.y/z?q=1",
    " a",
    "b",
    "\r\n",
    " 12,345.67",
    "ÀÉÎ",
    "\u{200b}",
    " tokenizer",
    " the prefix cache",
    " Shepherd",
    "_",
    "(",
    ")",
    "{\"k\": [1, 2]}",
];

fn fixture() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/tokenizer")
}

/// The fixture with an NFC normalizer in front (a copy in the test's scratch directory).
fn nfc_fixture() -> PathBuf {
    let dir = Path::new(env!("CARGO_TARGET_TMPDIR")).join("nfc-tokenizer");
    std::fs::create_dir_all(&dir).unwrap();
    let mut json: serde_json::Value =
        serde_json::from_slice(&std::fs::read(fixture().join("tokenizer.json")).unwrap()).unwrap();
    json["normalizer"] = serde_json::json!({"type": "NFC"});
    std::fs::write(dir.join("tokenizer.json"), json.to_string()).unwrap();
    std::fs::copy(
        fixture().join("tokenizer_config.json"),
        dir.join("tokenizer_config.json"),
    )
    .unwrap();
    dir
}

fn token_producer(dir: &Path, cache: usize) -> Arc<TokenProducer> {
    let shared = SharedState::new(Arc::new(Pool::new()));
    let yaml = format!(
        "plugins:\n- type: token-producer\n  parameters: {{tokenizerPath: {}, cacheMaxTokens: {cache}}}\n",
        dir.display()
    );
    build_scheduler_in(
        &EndpointPickerConfig::from_yaml(&yaml).unwrap(),
        &builtin_registry(),
        &shared,
    )
    .unwrap();
    shared
        .resources
        .get::<TokenProducer>("token-producer")
        .unwrap()
}

fn prompt_text() -> impl Strategy<Value = String> {
    let fragment = prop_oneof![
        3 => proptest::sample::select(FRAGMENTS).prop_map(str::to_string),
        1 => "[a-zA-Z0-9 \n.,'!]{0,24}",
    ];
    proptest::collection::vec(fragment, 1..160)
        .prop_map(|parts| parts.concat())
        .prop_filter("a prompt is not empty", |text| !text.trim().is_empty())
}

fn completions(text: &str) -> InferenceRequest {
    let body = serde_json::json!({"model": "m", "prompt": text});
    parse_openai_request(
        "/v1/completions",
        body.to_string().as_bytes(),
        &ParseLimits::default(),
    )
    .unwrap()
}

fn chat(system: &str, question: &str) -> InferenceRequest {
    let body = serde_json::json!({"model": "m", "messages": [
        {"role": "system", "content": system},
        {"role": "user", "content": question},
    ]});
    parse_openai_request(
        "/v1/chat/completions",
        body.to_string().as_bytes(),
        &ParseLimits::default(),
    )
    .unwrap()
}

fn whole_ids(tokens: &TokenProducer, request: &InferenceRequest) -> Vec<u32> {
    match tokens.prompt_for(request).unwrap() {
        Cow::Owned(Prompt::Tokens(ids)) => ids,
        other => panic!("token ids expected, got {other:?}"),
    }
}

/// The ids of `request` asked for `steps` ids more at a time.
fn streamed_ids(tokens: &TokenProducer, request: &InferenceRequest, steps: &[usize]) -> Vec<u32> {
    let mut partial = match tokens.begin(request).unwrap() {
        BegunPrompt::Partial(partial) => partial,
        BegunPrompt::Whole(_) => panic!("the fixture is tokenized a piece at a time"),
    };
    let mut want = 0;
    let mut step = steps.iter().cycle();
    while !partial.is_complete() {
        want += step.next().copied().unwrap_or(16);
        tokens.extend(request, &mut partial, want).unwrap();
        assert!(partial.is_complete() || partial.ids().len() >= want);
    }
    partial.into_ids().unwrap()
}

fn runner(cases: u32) -> TestRunner {
    let seed = *b"shepherd-tokenize-stream-seed-32";
    TestRunner::new_with_rng(
        Config {
            cases,
            failure_persistence: None,
            ..Config::default()
        },
        TestRng::from_seed(RngAlgorithm::ChaCha, &seed),
    )
}

#[test]
fn ids_tokenized_a_piece_at_a_time_equal_the_whole_texts() {
    for dir in [fixture(), nfc_fixture()] {
        let uncached = token_producer(&dir, 0);
        let cached = token_producer(&dir, 1 << 20);
        let strategy = (
            prompt_text(),
            prompt_text(),
            proptest::collection::vec(1usize..80, 1..8),
        );
        runner(300)
            .run(&strategy, |(first, second, steps)| {
                for request in [completions(&first), chat(&first, &second)] {
                    let whole = whole_ids(&uncached, &request);
                    prop_assert_eq!(&streamed_ids(&uncached, &request, &steps), &whole);
                    // Through the cache: once filling it, once reading it.
                    prop_assert_eq!(&streamed_ids(&cached, &request, &steps), &whole);
                    prop_assert_eq!(&streamed_ids(&cached, &request, &steps), &whole);
                }
                Ok(())
            })
            .unwrap_or_else(|e| panic!("{}: {e}", dir.display()));
    }
}

#[test]
fn long_documents_stream_the_same_ids() {
    let tokens = token_producer(&fixture(), 0);
    let docs = [
        "README.md",
        "docs/kv-events.md",
        "crates/scorers/src/prefix_cache.rs",
    ];
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
    for doc in docs {
        let text = std::fs::read_to_string(root.join(doc)).unwrap();
        let request = completions(&text);
        assert_eq!(
            streamed_ids(&tokens, &request, &[16, 300, 5000]),
            whole_ids(&tokens, &request),
            "{doc}"
        );
    }
}

/// A scheduler scoring by the precise prefix match (and queue depth) over `SERVERS`, with a
/// token producer on the fixture; `speculative` turns on speculative indexing.
fn precise(speculative: bool) -> (Scheduler, SharedState, Arc<TokenProducer>) {
    let shared = SharedState::new(Arc::new(Pool::new()));
    shared.pool.set_members(SERVERS);
    let yaml = format!(
        "plugins:
- type: token-producer
  parameters: {{tokenizerPath: {}}}
- type: precise-prefix-cache-producer
  parameters: {{speculativeIndexing: {speculative}}}
- type: prefix-cache-scorer
  parameters: {{prefixMatchInfoProducerName: precise-prefix-cache-producer}}
- type: queue-scorer
- type: max-score-picker
schedulingProfiles:
- name: default
  plugins:
  - {{pluginRef: prefix-cache-scorer, weight: 3}}
  - {{pluginRef: queue-scorer, weight: 1}}
  - pluginRef: max-score-picker
",
        fixture().display()
    );
    let config = EndpointPickerConfig::from_yaml(&yaml).unwrap();
    let scheduler = build_scheduler_in(&config, &builtin_registry(), &shared).unwrap();
    let tokens = shared
        .resources
        .get::<TokenProducer>("token-producer")
        .unwrap();
    (scheduler, shared, tokens)
}

/// The server at `address` reports the complete 16-token blocks of `ids` cached.
fn report(shared: &SharedState, address: &str, ids: &[u32], salt: u64) {
    let feed = shared
        .resources
        .get::<PreciseKvEvents>(&feed_name("precise-prefix-cache-producer"))
        .unwrap();
    let blocks = ids.len() / 16;
    if blocks == 0 {
        return;
    }
    let stored = BlockStored {
        block_hashes: (0..blocks as u64)
            .map(|b| EngineBlockHash(salt << 32 | b))
            .collect(),
        token_ids: ids[..blocks * 16].to_vec(),
        block_size: 16,
        ..BlockStored::default()
    };
    let id = shared.pool.snapshot().get_by_address(address).unwrap().id();
    let batch = KvEventBatch {
        events: vec![KvEvent::BlockStored(stored)],
        ..KvEventBatch::default()
    };
    feed.index.apply(id, &batch);
}

/// Every candidate's address, scores and total.
fn scores(decision: &Decision) -> Vec<(String, Vec<f64>, f64)> {
    decision
        .breakdown
        .rows()
        .iter()
        .map(|row| {
            (
                row.address.to_string(),
                row.scores.iter().map(|s| s.value).collect(),
                row.total,
            )
        })
        .collect()
}

/// What each server holds: nothing, the first `n` blocks of the prompt, or another text's.
#[derive(Debug, Clone)]
enum Holds {
    Nothing,
    Blocks(usize),
    Other(String),
}

fn holds() -> impl Strategy<Value = Holds> {
    prop_oneof![
        4 => Just(Holds::Nothing),
        1 => (0usize..40).prop_map(Holds::Blocks),
        2 => prompt_text().prop_map(Holds::Other),
    ]
}

#[test]
fn early_stopped_picks_decide_as_picks_over_the_whole_ids() {
    let strategy = (
        prompt_text(),
        proptest::collection::vec(holds(), SERVERS.len()),
        any::<bool>(),
    );
    // Picks that stopped early (the token cache learned nothing) and picks that did not.
    let stopped = AtomicUsize::new(0);
    let went_on = AtomicUsize::new(0);
    // The reference ids, from another producer: the scheduler's cache starts empty.
    let reference = token_producer(&fixture(), 0);
    runner(200)
        .run(&strategy, |(text, held, as_chat)| {
            let (scheduler, shared, tokens) = precise(false);
            let request = if as_chat {
                chat("You answer briefly.", &text)
            } else {
                completions(&text)
            };
            let ids = whole_ids(&reference, &request);
            for (i, (server, holds)) in SERVERS.iter().zip(&held).enumerate() {
                match holds {
                    Holds::Nothing => {}
                    Holds::Blocks(n) => {
                        report(&shared, server, &ids[..(n * 16).min(ids.len())], i as u64)
                    }
                    Holds::Other(other) => {
                        let other = whole_ids(&reference, &completions(other));
                        report(&shared, server, &other, i as u64);
                    }
                }
            }
            // The same request with the whole ids given: nothing to tokenize, nothing stops.
            let mut given = request.clone();
            given.prompt = Prompt::Tokens(ids);
            let cached = tokens.cache_stats().unwrap().entries;
            let early = scheduler.schedule_with(&request, DRY).unwrap();
            let counter = if tokens.cache_stats().unwrap().entries == cached {
                &stopped
            } else {
                &went_on
            };
            counter.fetch_add(1, Ordering::Relaxed);
            let whole = scheduler.schedule_with(&given, DRY).unwrap();
            prop_assert_eq!(scores(&early), scores(&whole));
            Ok(())
        })
        .unwrap();
    let (stopped, went_on) = (stopped.into_inner(), went_on.into_inner());
    assert!(
        stopped > 20 && went_on > 20,
        "{stopped} stopped, {went_on} went on"
    );
}

#[test]
fn the_rest_is_tokenized_after_the_pick_for_the_cache_and_speculation() {
    let (scheduler, shared, tokens) = precise(true);
    let text = "A prompt no server has seen, long enough for many blocks. ".repeat(40);
    let request = completions(&text);
    let before = tokens.cache_stats().unwrap();
    let first = scheduler.schedule(&request).unwrap();
    let picked = first.primary().address().to_string();
    tokens.wait_finished();
    assert_eq!(tokens.finish_stats().finished, 1);
    assert_eq!(tokens.finish_stats().dropped, 0);
    // The whole prompt is in the token cache now.
    let ids = whole_ids(&tokens, &request);
    let after = tokens.cache_stats().unwrap();
    assert_eq!(after.hits, before.hits + 1, "{before:?} → {after:?}");
    // And the picked server's speculative entries cover every block: the same prompt follows.
    let again = scheduler.schedule_with(&request, DRY).unwrap();
    assert_eq!(again.primary().address(), picked);
    let feed = shared
        .resources
        .get::<PreciseKvEvents>(&feed_name("precise-prefix-cache-producer"))
        .unwrap();
    let prompt = Prompt::Tokens(ids.clone());
    let index = feed.index.index();
    let mut chain = index.chain(
        shepherd_scheduler_core::kv_events::precise_seed(None),
        &prompt,
    );
    assert_eq!(
        index.match_prefix(&mut chain, &prompt).longest(),
        ids.len() / 16
    );
}
