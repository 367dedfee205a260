//! Pick latency in precise mode, tokenization included, against the default (approximate)
//! profile, in one run (issue 13): 64 endpoints, prompts of about 1 KB, 16 KB and 400 KB of
//! English and Markdown (Shepherd's docs), the prompt's blocks held by 8 endpoints.
//!
//! Cases, each a dry-run `schedule` (filters, scorers, picker; no pick hooks):
//!
//! - `approx`: the default profile (prefix 3 : queue 2 : KV 2), 64-token blocks guessed from
//!   picks;
//! - `precise-pseudo`: the same weights with the prefix scorer reading a
//!   `precise-prefix-cache-producer` (16-token blocks from the events), text cut into 4-byte
//!   pseudo tokens (no tokenizer: what `shepherd-sim serve` matches);
//! - `precise-tokenized`: the same with a `token-producer` holding a real tokenizer, the
//!   completions prompt seen before (its pieces in the token cache);
//! - `precise-tokenized-uncached`: the same with the token cache off: every pick tokenizes the
//!   whole prompt (a prompt never seen);
//! - `precise-chat-next-turn`: a conversation (turns of about 1 KB) whose earlier turns were
//!   seen with the previous request, a new last turn each pick (the multi-turn case).
//!
//! A second table (issue 34: tokenize only what the decision needs), prompts the token
//! cache has never seen, beside the approximate pick of the same prompts:
//!
//! - `miss`: 64 prompts whose first block no endpoint holds (the docs text behind a
//!   per-request first line), the token cache on (its default size): the precise pick
//!   tokenizes the first block only;
//! - `hit`: the prompt the 8 endpoints hold, the token cache off (every pick is its first):
//!   the first block, then the rest; `whole` is what the same pick cost before the change,
//!   measured in the same run: the whole prompt tokenized (`prompt_for`), then the pick of
//!   its ids.
//!
//! `cargo bench -p shepherd-benches --bench precise_pick -- early-stop` runs the second
//! table only, `-- columns` the first.
//! The tokenizer is the test fixture (`crates/scorers/tests/fixtures/tokenizer`, a 3,000-token
//! BPE, slower per byte than a real 128k vocabulary: it splits words into more pieces);
//! `TOKENIZE_BENCH_TOKENIZER=/path/to/model-dir` uses a real model's.
//!
//! ```text
//! cargo bench -p shepherd-benches --bench precise_pick
//! ```

use std::borrow::Cow;
use std::time::Instant;

use shepherd_benches::docs_prompts::{chat, completions, docs_text, tokenizer_dir};
use shepherd_benches::workload::{pool, pseudo_tokens};
use shepherd_scheduler_core::config::{EndpointPickerConfig, build_scheduler_in};
use shepherd_scheduler_core::kv_events::{BlockStored, EngineBlockHash, KvEvent, KvEventBatch};
use shepherd_scheduler_core::request::{InferenceRequest, Prompt};
use shepherd_scheduler_core::scheduler::{ScheduleOptions, Scheduler};
use shepherd_scheduler_core::shared::SharedState;
use shepherd_scorers::producers::precise_prefix::feed_name;
use shepherd_scorers::producers::{PreciseKvEvents, TokenProducer};
use shepherd_scorers::{DEFAULT_CONFIG_YAML, builtin_registry};

const DRY: ScheduleOptions<'static> = ScheduleOptions {
    subset: None,
    profile: None,
    dry_run: true,
};
const SIZES: [(&str, usize); 3] = [("1KB", 1 << 10), ("16KB", 16 << 10), ("400KB", 400 << 10)];
const ENDPOINTS: usize = 64;
const HOLDERS: usize = 8;

fn precise(tokenizer: Option<usize>) -> String {
    let token = match tokenizer {
        Some(cache) => format!(
            "- type: token-producer\n  parameters: {{tokenizerPath: {}, cacheMaxTokens: {cache}}}\n",
            tokenizer_dir().display()
        ),
        None => String::new(),
    };
    format!(
        "
plugins:
{token}- type: precise-prefix-cache-producer
- type: prefix-cache-scorer
  parameters: {{prefixMatchInfoProducerName: precise-prefix-cache-producer}}
- type: queue-scorer
- type: kv-cache-utilization-scorer
- type: max-score-picker
schedulingProfiles:
- name: default
  plugins:
  - {{pluginRef: prefix-cache-scorer, weight: 3}}
  - {{pluginRef: queue-scorer, weight: 2}}
  - {{pluginRef: kv-cache-utilization-scorer, weight: 2}}
  - pluginRef: max-score-picker
"
    )
}

/// A scheduler for `yaml` over a fresh pool of 64 endpoints.
fn scheduler(yaml: &str) -> (Scheduler, SharedState) {
    let (pool, _clock) = pool(ENDPOINTS);
    let shared = SharedState::new(pool);
    let config = EndpointPickerConfig::from_yaml(yaml).expect("bench config");
    let scheduler = build_scheduler_in(&config, &builtin_registry(), &shared).expect("builds");
    (scheduler, shared)
}

/// The blocks of `request` (as the precise producer hashes it) reported by `HOLDERS` endpoints.
fn feed(shared: &SharedState, request: &InferenceRequest) {
    let feed = shared
        .resources
        .get::<PreciseKvEvents>(&feed_name("precise-prefix-cache-producer"))
        .expect("a precise producer");
    let tokens = shared.resources.get::<TokenProducer>("token-producer");
    let prompt = match tokens.as_ref().map(|t| t.prompt_for(request)) {
        Some(Ok(Cow::Owned(prompt))) => prompt,
        _ => request.prompt.clone(),
    };
    let ids: Vec<u32> = match &prompt {
        Prompt::Tokens(ids) => ids.clone(),
        Prompt::Text(text) => pseudo_tokens(text),
    };
    let blocks = ids.len() / 16;
    for (i, endpoint) in shared
        .pool
        .snapshot()
        .endpoints()
        .iter()
        .take(HOLDERS)
        .enumerate()
    {
        let stored = BlockStored {
            block_hashes: (0..blocks as u64)
                .map(|b| EngineBlockHash((i as u64) << 40 | b))
                .collect(),
            token_ids: ids[..blocks * 16].to_vec(),
            block_size: 16,
            ..BlockStored::default()
        };
        let batch = KvEventBatch {
            events: vec![KvEvent::BlockStored(stored)],
            ..KvEventBatch::default()
        };
        feed.index.apply(endpoint.id(), &batch);
    }
}

/// Median microseconds per call of `f` over `samples` timed batches sized to about 50 ms.
fn median_us(samples: usize, mut f: impl FnMut(usize)) -> f64 {
    let start = Instant::now();
    f(0);
    let one = start.elapsed().as_secs_f64().max(1e-7);
    let batch = ((0.05 / one) as usize).clamp(1, 100_000);
    let mut times: Vec<f64> = (0..samples)
        .map(|s| {
            let start = Instant::now();
            for i in 0..batch {
                f(s * batch + i);
            }
            start.elapsed().as_secs_f64() * 1e6 / batch as f64
        })
        .collect();
    times.sort_by(f64::total_cmp);
    times[times.len() / 2]
}

fn main() {
    // `cargo bench` passes `--bench`; a word without a dash selects a table.
    let filter = std::env::args()
        .skip(1)
        .find(|a| !a.starts_with('-'))
        .unwrap_or_default();
    if "columns".contains(filter.as_str()) {
        columns();
    }
    if "early-stop".contains(filter.as_str()) {
        early_stop();
    }
}

/// The second table (see the module docs).
fn early_stop() {
    let mut rows = Vec::new();
    for (label, size) in SIZES {
        let body = docs_text(size);
        let samples = if size > 100_000 { 7 } else { 15 };
        let held = completions(&body);
        let misses: Vec<InferenceRequest> = (0..64)
            .map(|i| completions(&format!("Request {i} of a user never seen.\n{body}")))
            .collect();

        let (approx, _) = scheduler(DEFAULT_CONFIG_YAML);
        for _ in 0..HOLDERS {
            drop(approx.schedule(&held));
        }
        let approx_miss = median_us(samples, |i| {
            drop(approx.schedule_with(&misses[i % misses.len()], DRY))
        });
        let approx_hit = median_us(samples, |_| drop(approx.schedule_with(&held, DRY)));

        let (cached, shared) = scheduler(&precise(Some(2_097_152)));
        feed(&shared, &held);
        let precise_miss = median_us(samples, |i| {
            drop(cached.schedule_with(&misses[i % misses.len()], DRY))
        });

        let (uncached, shared) = scheduler(&precise(Some(0)));
        feed(&shared, &held);
        let precise_hit = median_us(samples, |_| drop(uncached.schedule_with(&held, DRY)));
        let tokens = shared
            .resources
            .get::<TokenProducer>("token-producer")
            .expect("a token producer");
        let whole = median_us(samples, |_| {
            let given = match tokens.prompt_for(&held) {
                Ok(Cow::Owned(prompt)) => {
                    let mut given = held.clone();
                    given.prompt = prompt;
                    given
                }
                _ => held.clone(),
            };
            drop(uncached.schedule_with(&given, DRY));
        });
        rows.push((
            label,
            approx_miss,
            precise_miss,
            approx_hit,
            precise_hit,
            whole,
        ));
    }
    println!(
        "\nprompts never seen, {ENDPOINTS} endpoints (median µs; miss: ratio to approx on the same prompts; hit: ratio to approx and to `whole`):"
    );
    println!(
        "{:>6} | {:>11} | {:>20} | {:>10} | {:>20} | {:>12} | {:>10}",
        "prompt", "approx miss", "precise miss", "approx hit", "precise hit", "whole", "hit/whole"
    );
    for (label, approx_miss, precise_miss, approx_hit, precise_hit, whole) in rows {
        println!(
            "{label:>6} | {approx_miss:>11.1} | {:>20} | {approx_hit:>10.1} | {:>20} | {whole:>12.1} | {:>10.2}",
            format!("{precise_miss:.1} ({:.2}×)", precise_miss / approx_miss),
            format!("{precise_hit:.1} ({:.0}×)", precise_hit / approx_hit),
            precise_hit / whole,
        );
    }
}

/// The first table (see the module docs).
fn columns() {
    let mut rows = Vec::new();
    for (label, size) in SIZES {
        let body = docs_text(size);
        let samples = if size > 100_000 { 7 } else { 15 };

        let (approx, _) = scheduler(DEFAULT_CONFIG_YAML);
        let request = completions(&body);
        for _ in 0..HOLDERS {
            drop(approx.schedule(&request));
        }
        let approx_us = median_us(samples, |_| drop(approx.schedule_with(&request, DRY)));

        let (pseudo, shared) = scheduler(&precise(None));
        feed(&shared, &request);
        let pseudo_us = median_us(samples, |_| drop(pseudo.schedule_with(&request, DRY)));

        let (cached, shared) = scheduler(&precise(Some(1 << 22)));
        feed(&shared, &request);
        let cached_us = median_us(samples, |_| drop(cached.schedule_with(&request, DRY)));

        let (uncached, shared) = scheduler(&precise(Some(0)));
        feed(&shared, &request);
        let uncached_us = median_us(samples, |_| drop(uncached.schedule_with(&request, DRY)));

        let (turns, shared) = scheduler(&precise(Some(1 << 22)));
        feed(&shared, &chat(&body, "first question"));
        let questions: Vec<InferenceRequest> = (0..64)
            .map(|i| chat(&body, &format!("question number {i}: what changed?")))
            .collect();
        let chat_us = median_us(samples, |i| {
            drop(turns.schedule_with(&questions[i % questions.len()], DRY));
        });
        rows.push((label, approx_us, pseudo_us, cached_us, uncached_us, chat_us));
    }
    println!(
        "\npick latency, {ENDPOINTS} endpoints, prompt held by {HOLDERS} (median µs, ratio to approx):"
    );
    println!(
        "{:>6} | {:>10} | {:>16} | {:>18} | {:>27} | {:>22}",
        "prompt",
        "approx",
        "precise-pseudo",
        "precise-tokenized",
        "precise-tokenized-uncached",
        "precise-chat-next-turn"
    );
    for (label, approx, pseudo, cached, uncached, chat) in rows {
        let cell = |v: f64| format!("{v:.1} ({:.2}×)", v / approx);
        println!(
            "{label:>6} | {approx:>10.1} | {:>16} | {:>18} | {:>27} | {:>22}",
            cell(pseudo),
            cell(cached),
            cell(uncached),
            cell(chat)
        );
    }
}
