//! What the replica tests read off a runtime: its approximate index, its peer load, its
//! counters; and the picks and prompts they make.

use shepherd_runtime::config::RuntimeConfig;
use shepherd_runtime::{Runtime, RuntimeHandle, RuntimeOptions};
use shepherd_scheduler_core::prefix::chain_seed;
use shepherd_scheduler_core::request::{InferenceRequest, Prompt};
use shepherd_scorers::producers::approximate_indexes;

/// Blocks of `prompt` (model `m`) that `handle`'s approximate index believes `address` holds.
pub(crate) fn known_blocks(handle: &RuntimeHandle, prompt: &Prompt, address: &str) -> usize {
    let indexes = approximate_indexes(&handle.shared().resources);
    let (_, index) = indexes
        .first()
        .expect("the preset has an approximate index");
    let Some(endpoint) = handle.pool().snapshot().get_by_address(address).cloned() else {
        return 0;
    };
    let mut chain = index.chain(chain_seed("m", None, ""), prompt);
    index
        .match_prefix(&mut chain, prompt)
        .matched_blocks(endpoint.id())
}

/// The value of `series` (a name with its labels) on `handle`'s `/metrics`, 0 when absent.
pub(crate) fn counter(handle: &RuntimeHandle, series: &str) -> f64 {
    handle
        .render_metrics()
        .lines()
        .find_map(|l| l.strip_prefix(series)?.strip_prefix(' ')?.parse().ok())
        .unwrap_or(0.0)
}

/// Requests the other replicas have in flight on `address`, as `handle` knows them.
pub(crate) fn peer_requests(handle: &RuntimeHandle, address: &str) -> u64 {
    handle
        .pool()
        .snapshot()
        .get_by_address(address)
        .map_or(0, |e| e.peer_load().requests)
}

/// Picks for `prompt` (model `m`) on `handle` and lets the request end at once; the endpoint
/// picked.
pub(crate) fn pick(handle: &RuntimeHandle, id: &str, prompt: &Prompt) -> String {
    let decision = handle
        .scheduler()
        .schedule(&InferenceRequest::new(id, "m", prompt.clone()))
        .unwrap();
    decision.primary().address().to_string()
}

/// Group `g`'s system prompt (16 blocks of the preset's index) and question `q`.
pub(crate) fn group_prompt(g: usize, q: usize) -> Prompt {
    Prompt::Text(format!(
        "{}question {q}: what is {g} times {q}?",
        format!("system prompt of group {g}: you answer briefly. ").repeat(24)
    ))
}

/// Starts a runtime from `yaml` with no scraping, no admin server and no config watch, as
/// the replica tests run theirs.
pub(crate) async fn start_quiet(yaml: &str) -> RuntimeHandle {
    let options = RuntimeOptions {
        scrape: false,
        serve_admin: false,
        watch_config: false,
        ..RuntimeOptions::default()
    };
    Runtime::start(RuntimeConfig::from_yaml(yaml).unwrap(), options)
        .await
        .unwrap()
}
