//! The precise producer with a real tokenizer: blocks a server reports with its own token ids
//! (as vLLM's events carry them) match the requests the `token-producer` tokenizes the way
//! the server does, for chat and completions; without a tokenizer, text is cut into 4-byte
//! pseudo tokens, which match only a server that does the same.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::borrow::Cow;
use std::path::Path;
use std::sync::Arc;

use shepherd_scheduler_core::config::{EndpointPickerConfig, build_scheduler_in};
use shepherd_scheduler_core::endpoint::Pool;
use shepherd_scheduler_core::kv_events::{BlockStored, EngineBlockHash, KvEvent, KvEventBatch};
use shepherd_scheduler_core::request::{
    InferenceRequest, ParseLimits, Prompt, parse_openai_request,
};
use shepherd_scheduler_core::shared::SharedState;
use shepherd_scorers::builtin_registry;
use shepherd_scorers::producers::precise_prefix::feed_name;
use shepherd_scorers::producers::{PreciseKvEvents, TokenProducer};

const SERVERS: [&str; 3] = ["10.0.0.1:8000", "10.0.0.2:8000", "10.0.0.3:8000"];

/// The precise policy (prefix scorer, max-score picker) with the producer's `parameters`
/// (a flow mapping, or empty) and, with `tokenizer`, a token producer on the test fixture.
fn config(tokenizer: bool, parameters: &str) -> EndpointPickerConfig {
    let fixture = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/tokenizer");
    let token = if tokenizer {
        format!(
            "- type: token-producer\n  parameters: {{tokenizerPath: {}}}\n",
            fixture.display()
        )
    } else {
        String::new()
    };
    EndpointPickerConfig::from_yaml(&format!(
        "plugins:
- type: prefix-cache-scorer
  parameters: {{prefixMatchInfoProducerName: precise-prefix-cache-producer}}
- type: precise-prefix-cache-producer
  parameters: {{{parameters}}}
{token}- type: max-score-picker
schedulingProfiles:
- name: default
  plugins:
  - pluginRef: prefix-cache-scorer
  - pluginRef: max-score-picker
"
    ))
    .unwrap()
}

/// The server at `address` reports the complete 16-token blocks of `ids` cached.
fn report(shared: &SharedState, address: &str, ids: &[u32]) {
    let feed = shared
        .resources
        .get::<PreciseKvEvents>(&feed_name("precise-prefix-cache-producer"))
        .unwrap();
    let blocks = ids.len() / 16;
    let stored = BlockStored {
        block_hashes: (0..blocks as u64)
            .map(|b| EngineBlockHash(0xABC0 + b))
            .collect(),
        token_ids: ids[..blocks * 16].to_vec(),
        block_size: 16,
        medium: Some("GPU".into()),
        ..BlockStored::default()
    };
    let id = shared.pool.snapshot().get_by_address(address).unwrap().id();
    let batch = KvEventBatch {
        events: vec![KvEvent::BlockStored(stored)],
        ..KvEventBatch::default()
    };
    feed.index.apply(id, &batch);
}

fn parse(path: &str, body: serde_json::Value) -> InferenceRequest {
    parse_openai_request(path, body.to_string().as_bytes(), &ParseLimits::default()).unwrap()
}

fn chat(question: &str) -> InferenceRequest {
    let system =
        "You are a meticulous assistant who answers questions about tokenizers. ".repeat(12);
    parse(
        "/v1/chat/completions",
        serde_json::json!({"model": "m", "messages": [
            {"role": "system", "content": system},
            {"role": "user", "content": question},
        ]}),
    )
}

#[test]
fn server_token_ids_match_tokenized_chat_and_completions() {
    let shared = SharedState::new(Arc::new(Pool::new()));
    shared.pool.set_members(SERVERS);
    let scheduler = build_scheduler_in(&config(true, ""), &builtin_registry(), &shared).unwrap();
    let tokens = shared
        .resources
        .get::<TokenProducer>("token-producer")
        .unwrap();
    assert!(tokens.is_exact());

    // What server 2 computed for the first chat request: the ids vLLM renders and encodes.
    let first = chat("What is a byte-level BPE?");
    let Cow::Owned(Prompt::Tokens(ids)) = tokens.prompt_for(&first).unwrap() else {
        panic!("token ids expected");
    };
    assert!(ids.len() > 64, "{}", ids.len());
    report(&shared, SERVERS[1], &ids);

    // Another question after the same system prompt goes where its prefix is cached.
    for question in [
        "And WordPiece?",
        "Why do merges matter?",
        "Is Unigram better?",
    ] {
        let decision = scheduler.schedule(&chat(question)).unwrap();
        assert_eq!(decision.primary().address(), SERVERS[1], "{question}");
    }

    // Completions: the prompt encoded with the tokenizer's special tokens.
    let text = "Once upon a time, in a land of merges and vocabularies, ".repeat(20);
    let completion = parse(
        "/v1/completions",
        serde_json::json!({"model": "m", "prompt": text}),
    );
    let Cow::Owned(Prompt::Tokens(ids)) = tokens.prompt_for(&completion).unwrap() else {
        panic!("token ids expected");
    };
    report(&shared, SERVERS[2], &ids);
    let longer = parse(
        "/v1/completions",
        serde_json::json!({"model": "m", "prompt": format!("{text} the end.")}),
    );
    assert_eq!(
        scheduler.schedule(&longer).unwrap().primary().address(),
        SERVERS[2]
    );
}

#[test]
fn without_a_tokenizer_text_is_cut_into_pseudo_tokens() {
    let shared = SharedState::new(Arc::new(Pool::new()));
    shared.pool.set_members(SERVERS);
    let scheduler = build_scheduler_in(&config(false, ""), &builtin_registry(), &shared).unwrap();
    let text = "pseudo tokens are four bytes each. ".repeat(20);
    let pseudo: Vec<u32> = text
        .as_bytes()
        .chunks_exact(4)
        .map(|c| u32::from_le_bytes([c[0], c[1], c[2], c[3]]))
        .collect();
    report(&shared, SERVERS[0], &pseudo);
    let request = InferenceRequest::new("r", "m", Prompt::Text(format!("{text}?")));
    assert_eq!(
        scheduler.schedule(&request).unwrap().primary().address(),
        SERVERS[0]
    );
}

#[test]
fn speculative_entries_bridge_the_time_before_the_servers_report() {
    use shepherd_scheduler_core::clock::{ManualClock, Timestamp};
    let clock = Arc::new(ManualClock::at(Timestamp::from_millis(1_000)));
    let shared = SharedState::new(Arc::new(Pool::with_clock(clock.clone())));
    shared.pool.set_members(SERVERS);
    let config = config(false, "speculativeIndexing: true, speculativeTTL: 500ms");
    let scheduler = build_scheduler_in(&config, &builtin_registry(), &shared).unwrap();
    let system = "a long shared system prompt, ".repeat(40);
    let ask = |q: &str| InferenceRequest::new(q, "m", Prompt::Text(format!("{system}{q}")));
    // No server reported anything: the first pick is a tie; the ones right after follow it.
    let first = scheduler
        .schedule(&ask("q0"))
        .unwrap()
        .primary()
        .address()
        .to_string();
    for i in 1..6 {
        let next = scheduler.schedule(&ask(&format!("q{i}"))).unwrap();
        assert_eq!(next.primary().address(), first, "request {i}");
    }
    // The server never confirms: after the TTL the entries are gone.
    clock.set(Timestamp::from_millis(1_600));
    let feed = shared
        .resources
        .get::<PreciseKvEvents>(&feed_name("precise-prefix-cache-producer"))
        .unwrap();
    drop(scheduler.schedule(&InferenceRequest::new(
        "other",
        "m",
        Prompt::Text("x".repeat(512)),
    )));
    assert!(feed.index.stats().speculative_expired > 0);
    let prompt = Prompt::Text(format!("{system}q9"));
    let index = feed.index.index();
    let mut chain = index.chain(
        shepherd_scheduler_core::kv_events::precise_seed(None),
        &prompt,
    );
    assert_eq!(index.match_prefix(&mut chain, &prompt).longest(), 0);
}

#[test]
fn bad_speculative_ttls_are_refused() {
    let shared = SharedState::new(Arc::new(Pool::new()));
    for ttl in ["0s", "soon", "-1s"] {
        let yaml = format!(
            "plugins:\n- type: precise-prefix-cache-producer\n  parameters: {{speculativeIndexing: true, speculativeTTL: \"{ttl}\"}}\n"
        );
        let config = EndpointPickerConfig::from_yaml(&yaml).unwrap();
        let err = build_scheduler_in(&config, &builtin_registry(), &shared).unwrap_err();
        assert!(err.to_string().contains("speculativeTTL"), "{ttl}: {err}");
    }
}
