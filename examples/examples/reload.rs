//! Reloading the configuration while requests are being scheduled: every reload builds a new
//! scheduler over the same shared state and swaps it in. In-flight counts live in the pool's
//! endpoints and stay exact; the prefix index lives in the shared resources and keeps what it
//! learned; the old scheduler is freed once its last request ends.
//!
//! Run with `cargo run -p shepherd-examples --example reload`.

use std::error::Error;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::thread;

use shepherd_scheduler_core::prefix::PrefixIndex;
use shepherd_scheduler_core::prelude::*;
use shepherd_scorers::{DEFAULT_CONFIG_YAML, builtin_registry};

const QUEUE_HEAVY: &str = "
apiVersion: llm-d.ai/v1alpha1
kind: EndpointPickerConfig
plugins:
- type: prefix-cache-scorer
- type: queue-scorer
- type: max-score-picker
schedulingProfiles:
- name: default
  plugins:
  - pluginRef: prefix-cache-scorer
    weight: 1
  - pluginRef: queue-scorer
    weight: 5
  - pluginRef: max-score-picker
";

fn main() -> Result<(), Box<dyn Error>> {
    let shared = SharedState::new(Arc::new(Pool::new()));
    shared
        .pool
        .set_members((0..8).map(|i| format!("127.0.0.1:{}", 8000 + i)));
    let registry = builtin_registry();
    let configs = [
        EndpointPickerConfig::from_yaml(DEFAULT_CONFIG_YAML)?,
        EndpointPickerConfig::from_yaml(QUEUE_HEAVY)?,
    ];
    let scheduler = Arc::new(ReloadableScheduler::build(
        &configs[0],
        &registry,
        shared.clone(),
    )?);

    // Two threads schedule requests and keep every third one in flight.
    let stop = Arc::new(AtomicBool::new(false));
    let scheduled = Arc::new(AtomicU64::new(0));
    let workers: Vec<_> = (0..2)
        .map(|t| {
            let scheduler = Arc::clone(&scheduler);
            let stop = Arc::clone(&stop);
            let scheduled = Arc::clone(&scheduled);
            thread::spawn(move || {
                let mut held = Vec::new();
                let mut i = 0u64;
                while !stop.load(Ordering::Relaxed) {
                    let prompt = format!("{} question {i}", "shared system prompt ".repeat(60));
                    let request =
                        InferenceRequest::new(format!("t{t}-{i}"), "llama", Prompt::Text(prompt));
                    if let Ok(decision) = scheduler.schedule(&request) {
                        scheduled.fetch_add(1, Ordering::Relaxed);
                        if i.is_multiple_of(3) {
                            held.push(decision.into_handle());
                        } else {
                            decision.finish(Completion::success(None));
                        }
                    }
                    i += 1;
                }
                held
            })
        })
        .collect();

    // Meanwhile: 200 reloads, alternating between the two configs.
    for r in 0..200 {
        scheduler.reload(&configs[r % 2], &registry)?;
    }
    stop.store(true, Ordering::Relaxed);
    let held: Vec<RequestHandle> = workers
        .into_iter()
        .flat_map(|w| w.join().unwrap_or_default())
        .collect();

    let in_flight: u64 = shared.pool.snapshot().in_flight_requests();
    println!(
        "{} reloads while {} requests were scheduled",
        scheduler.generation(),
        scheduled.load(Ordering::Relaxed)
    );
    println!(
        "requests held in flight: {}; in-flight count across the pool: {in_flight}",
        held.len()
    );
    assert_eq!(in_flight, held.len() as u64);
    println!(
        "membership listeners registered with the pool: {} (one prefix index, shared by every generation)",
        shared.pool.listener_count()
    );
    if let Some(index) = shared.resources.get::<PrefixIndex>("prefix-cache-scorer") {
        println!(
            "prefix index entries kept across reloads: {}",
            index.entries()
        );
    }
    drop(held);
    let after: u64 = shared.pool.snapshot().in_flight_requests();
    println!("after the held requests end: {after} in flight");
    assert_eq!(after, 0);
    Ok(())
}
