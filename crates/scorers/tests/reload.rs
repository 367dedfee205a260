//! Config reloads under load: a new scheduler swapped in 1,000 times while two threads pick.
//! In-flight counts stay exact, plugin state shared through the resources survives, and
//! nothing of the replaced schedulers is left behind.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Weak};
use std::thread;

use shepherd_scheduler_core::prefix::PrefixIndex;
use shepherd_scheduler_core::prelude::*;
use shepherd_scorers::scorers::SessionAffinityScorer;
use shepherd_scorers::{DEFAULT_CONFIG_YAML, builtin_registry};

const WITH_SESSIONS: &str = "
plugins:
- type: prefix-cache-scorer
- type: session-affinity-scorer
- type: queue-scorer
schedulingProfiles:
- name: default
  plugins:
  - pluginRef: prefix-cache-scorer
    weight: 2
  - pluginRef: session-affinity-scorer
  - pluginRef: queue-scorer
";

fn in_flight(pool: &Pool) -> u64 {
    pool.snapshot().in_flight_requests()
}

#[test]
fn a_thousand_reloads_under_concurrent_picks_lose_and_leak_nothing() {
    let shared = SharedState::new(Arc::new(Pool::new()));
    shared
        .pool
        .set_members((0..6).map(|i| format!("127.0.0.1:{}", 8000 + i)));
    let registry = builtin_registry();
    let configs = [
        EndpointPickerConfig::from_yaml(DEFAULT_CONFIG_YAML).unwrap(),
        EndpointPickerConfig::from_yaml(WITH_SESSIONS).unwrap(),
    ];
    let reloadable =
        Arc::new(ReloadableScheduler::build(&configs[0], &registry, shared.clone()).unwrap());
    let first_index = shared
        .resources
        .get::<PrefixIndex>("prefix-cache-scorer")
        .unwrap();

    let stop = Arc::new(AtomicBool::new(false));
    let pickers: Vec<_> = (0..2)
        .map(|t| {
            let reloadable = Arc::clone(&reloadable);
            let stop = Arc::clone(&stop);
            thread::spawn(move || {
                let mut held = Vec::new();
                let mut i = 0u64;
                while !stop.load(Ordering::Relaxed) || i < 200 {
                    let prompt = format!("{}{i}", "system prompt ".repeat(40));
                    let mut r =
                        InferenceRequest::new(format!("t{t}-{i}"), "llama", Prompt::Text(prompt));
                    r.session_key = Some(format!("s{}", i % 5));
                    let d = reloadable.schedule(&r).unwrap();
                    if i.is_multiple_of(4) {
                        held.push(d.into_handle());
                    } else {
                        d.finish(Completion::success(None));
                    }
                    i += 1;
                }
                held
            })
        })
        .collect();

    let mut replaced: Vec<Weak<Scheduler>> = Vec::new();
    for r in 0..1_000 {
        replaced.push(Arc::downgrade(&reloadable.load_full()));
        reloadable.reload(&configs[r % 2], &registry).unwrap();
    }
    stop.store(true, Ordering::Relaxed);
    let held: Vec<RequestHandle> = pickers
        .into_iter()
        .flat_map(|p| p.join().unwrap())
        .collect();
    assert!(held.len() >= 100);

    // Exact in-flight counts, while old schedulers' requests are still out.
    assert_eq!(in_flight(&shared.pool), held.len() as u64);
    drop(held);
    assert_eq!(in_flight(&shared.pool), 0);

    // Every replaced scheduler is gone; one listener per shared plugin state is left.
    assert!(replaced.iter().all(|w| w.strong_count() == 0));
    assert_eq!(reloadable.generation(), 1_000);
    assert_eq!(
        shared.pool.listener_count(),
        2,
        "the prefix index and the session table"
    );
    // The same index served every generation (same settings), and learned along the way.
    let index = shared
        .resources
        .get::<PrefixIndex>("prefix-cache-scorer")
        .unwrap();
    assert!(Arc::ptr_eq(&index, &first_index));
    assert!(index.entries() > 0);
    let sessions = shared
        .resources
        .get::<SessionAffinityScorer>("session-affinity-scorer")
        .unwrap();
    assert!(sessions.sessions() <= 5);
    // Memory flat: exactly the shared resources, no per-generation state.
    assert_eq!(
        shared.resources.names(),
        vec!["prefix-cache-scorer", "session-affinity-scorer"]
    );
}

#[test]
fn a_failed_reload_keeps_the_current_scheduler() {
    let shared = SharedState::new(Arc::new(Pool::new()));
    shared.pool.set_members(["127.0.0.1:8000"]);
    let registry = builtin_registry();
    let good = EndpointPickerConfig::from_yaml(DEFAULT_CONFIG_YAML).unwrap();
    let reloadable = ReloadableScheduler::build(&good, &registry, shared).unwrap();
    let bad = EndpointPickerConfig::from_yaml(
        "plugins:\n- type: no-such-scorer\nschedulingProfiles:\n- name: default\n",
    )
    .unwrap();
    assert!(reloadable.reload(&bad, &registry).is_err());
    assert_eq!(reloadable.generation(), 0);
    let r = InferenceRequest::new("r", "llama", Prompt::Text("hi".into()));
    assert!(reloadable.schedule(&r).is_ok());
}

#[test]
fn changed_index_settings_get_a_fresh_index() {
    let shared = SharedState::new(Arc::new(Pool::new()));
    shared.pool.set_members(["127.0.0.1:8000"]);
    let registry = builtin_registry();
    let reloadable = ReloadableScheduler::build(
        &EndpointPickerConfig::from_yaml(DEFAULT_CONFIG_YAML).unwrap(),
        &registry,
        shared.clone(),
    )
    .unwrap();
    let before = shared
        .resources
        .get::<PrefixIndex>("prefix-cache-scorer")
        .unwrap();
    let smaller_blocks = DEFAULT_CONFIG_YAML.replace(
        "- type: prefix-cache-scorer\n",
        "- type: prefix-cache-scorer\n  parameters:\n    blockSize: 16\n",
    );
    reloadable
        .reload(
            &EndpointPickerConfig::from_yaml(&smaller_blocks).unwrap(),
            &registry,
        )
        .unwrap();
    let after = shared
        .resources
        .get::<PrefixIndex>("prefix-cache-scorer")
        .unwrap();
    assert!(!Arc::ptr_eq(&before, &after));
    assert_eq!(after.config().layout.block_tokens(), 16);
    drop(before);
    assert_eq!(shared.pool.listener_count(), 1, "the old index is gone");
}

#[test]
fn the_prefix_index_is_reachable_and_exported_without_downcasts() {
    let shared = SharedState::new(Arc::new(Pool::new()));
    shared
        .pool
        .set_members(["127.0.0.1:8000", "127.0.0.1:8001"]);
    let scheduler = shepherd_scheduler_core::config::build_scheduler_in(
        &EndpointPickerConfig::from_yaml(DEFAULT_CONFIG_YAML).unwrap(),
        &builtin_registry(),
        &shared,
    )
    .unwrap();
    // Typed handle by name: what a KV-event feed or a debug view uses.
    let index: Arc<PrefixIndex> = shared.resources.get("prefix-cache-scorer").unwrap();
    let prompt = "x".repeat(4096);
    let d = scheduler
        .schedule(&InferenceRequest::new("r", "llama", Prompt::Text(prompt)))
        .unwrap();
    let stats = index.stats();
    assert_eq!(stats.entries, 16, "4 KB = 16 blocks of 256 bytes");
    assert_eq!(stats.inserts, 1);
    d.finish(Completion::success(None));
    let text = shepherd_scheduler_core::metrics::render_prometheus(&[&scheduler]);
    assert!(
        text.contains("shepherd_prefix_index_entries{plugin=\"prefix-cache-scorer\"} 16"),
        "{text}"
    );
    assert!(
        text.contains("shepherd_picked_prompt_tokens_total{profile=\"default\"} 1024"),
        "{text}"
    );
}
