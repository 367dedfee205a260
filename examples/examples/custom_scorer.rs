//! A plugin author's custom scorer: prefer the endpoints with the fewest prompt tokens in
//! flight from this scheduler (long prompts cost prefill time that request counts miss).
//!
//! The scorer is registered under a new type name next to the built-ins and used from a YAML
//! configuration together with them.
//!
//! Run with `cargo run -p shepherd-examples --example custom_scorer`.

use std::error::Error;
use std::sync::Arc;

use serde::Deserialize;
use shepherd_scheduler_core::config::PluginArgs;
use shepherd_scheduler_core::plugin::PluginInstance;
use shepherd_scheduler_core::prelude::*;
use shepherd_scorers::builtin_registry;

/// Scores 1 − (prompt tokens in flight / budget), floored at 0.
struct PromptTokensInFlightScorer {
    token_budget: u64,
}

impl Scorer for PromptTokensInFlightScorer {
    fn category(&self) -> Category {
        // It spreads load, so the adaptive weights treat it like the queue scorer.
        Category::Distribution
    }

    fn score(&self, _cycle: &mut CycleState<'_>, candidates: &[&Arc<Endpoint>], out: &mut [Score]) {
        for (slot, endpoint) in out.iter_mut().zip(candidates) {
            let load = endpoint.in_flight_prompt_tokens() as f64 / self.token_budget as f64;
            *slot = Score::new(1.0 - load);
        }
    }
}

/// Its parameters: unknown keys are errors, so a typo in the YAML is reported.
#[derive(Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase", default)]
struct Parameters {
    token_budget: u64,
}

impl Default for Parameters {
    fn default() -> Self {
        Parameters {
            token_budget: 32_768,
        }
    }
}

const CONFIG: &str = "
plugins:
- type: prompt-tokens-in-flight-scorer
  parameters:
    tokenBudget: 16384
- type: queue-scorer
- type: kv-cache-utilization-scorer
- type: max-score-picker
schedulingProfiles:
- name: default
  plugins:
  - pluginRef: prompt-tokens-in-flight-scorer
    weight: 3
  - pluginRef: queue-scorer
    weight: 1
  - pluginRef: kv-cache-utilization-scorer
    weight: 1
  - pluginRef: max-score-picker
";

fn main() -> Result<(), Box<dyn Error>> {
    // One call adds the new type to the built-in registry.
    let mut registry = builtin_registry();
    registry.register("prompt-tokens-in-flight-scorer", |args: &PluginArgs<'_>| {
        let parameters: Parameters = args.parse()?;
        if parameters.token_budget == 0 {
            return Err("`tokenBudget` must be at least 1".into());
        }
        Ok(PluginInstance::scorer(Arc::new(
            PromptTokensInFlightScorer {
                token_budget: parameters.token_budget,
            },
        )))
    });

    let pool = Arc::new(Pool::new());
    pool.set_members(["127.0.0.1:9000", "127.0.0.1:9001", "127.0.0.1:9002"]);
    let config = EndpointPickerConfig::from_yaml(CONFIG)?;
    let scheduler = build_scheduler(&config, &registry, Arc::clone(&pool))?;

    // Equal scraped metrics everywhere: only the prompt tokens in flight tell them apart.
    for endpoint in pool.snapshot().endpoints() {
        endpoint.set_metrics(EndpointMetrics {
            waiting: 1,
            running: 8,
            kv_utilization: 0.4,
            ..Default::default()
        });
    }

    // Three requests with long prompts, kept in flight.
    let mut in_flight = Vec::new();
    for (i, kib) in [48usize, 24, 8].into_iter().enumerate() {
        let request = InferenceRequest::new(
            format!("long-{i}"),
            "llama-3-8b",
            Prompt::Text("x".repeat(kib * 1024)),
        );
        let decision = scheduler.schedule(&request)?;
        println!(
            "{} ({} KiB prompt) → {}",
            request.id,
            kib,
            decision.primary().address()
        );
        in_flight.push(decision);
    }

    // A fourth request goes where the fewest prompt tokens are being processed.
    let request = InferenceRequest::new("short", "llama-3-8b", Prompt::Text("Hello!".into()));
    let decision = scheduler.schedule(&request)?;
    println!("\n{} → {}\n", request.id, decision.primary().address());
    for endpoint in pool.snapshot().endpoints() {
        println!(
            "  {} has {} prompt tokens in flight",
            endpoint.address(),
            endpoint.in_flight_prompt_tokens()
        );
    }
    println!("\n{}", decision.breakdown);
    Ok(())
}
