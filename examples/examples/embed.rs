//! Embedding Shepherd's scheduling core in a few lines: build the default policy over a pool of
//! four model servers, feed it their metrics, pick an endpoint for a request, and print why.
//!
//! Run with `cargo run -p shepherd-examples --example embed`.

use std::error::Error;
use std::sync::Arc;

use shepherd_scheduler_core::plugin::{Completion, Usage};
use shepherd_scheduler_core::prelude::*;
use shepherd_scorers::build_default_scheduler;

fn main() -> Result<(), Box<dyn Error>> {
    // 1. The pool: four model servers (loopback addresses for the example).
    let clock = Arc::new(SystemClock::new());
    let pool = Arc::new(Pool::new());
    pool.set_members([
        "127.0.0.1:8000",
        "127.0.0.1:8001",
        "127.0.0.1:8002",
        "127.0.0.1:8003",
    ]);

    // 2. The default policy: prefix cache 3 : queue 2 : KV-cache utilization 2, max-score picker.
    let scheduler = build_default_scheduler(Arc::clone(&pool), clock.clone())?;

    // 3. Metrics, as a scraper would report them: (address, waiting, running, KV utilization).
    let scraped = [
        ("127.0.0.1:8000", 4, 12, 0.71),
        ("127.0.0.1:8001", 0, 9, 0.35),
        ("127.0.0.1:8002", 1, 10, 0.20),
        ("127.0.0.1:8003", 7, 16, 0.93),
    ];
    let members = pool.snapshot();
    for (address, waiting, running, kv_utilization) in scraped {
        if let Some(endpoint) = members.get_by_address(address) {
            endpoint.set_metrics(EndpointMetrics {
                waiting,
                running,
                kv_utilization,
                scraped_at: Some(clock.now()),
                ..Default::default()
            });
        }
    }

    // 4. A request: parsed from an OpenAI body, as an adapter would.
    let body = br#"{"model": "llama-3-8b", "messages": [
        {"role": "system", "content": "You are a helpful assistant."},
        {"role": "user", "content": "Which server should serve me?"}]}"#;
    let request = match parse_openai_request("/v1/chat/completions", body, &ParseLimits::default())
    {
        Ok(mut request) => {
            request.id = "req-1".into();
            request
        }
        Err(e) => {
            println!("could not parse the body ({e}); building the request by hand\n");
            InferenceRequest::new(
                "req-1",
                "llama-3-8b",
                Prompt::Text("You are a helpful assistant. Which server should serve me?".into()),
            )
        }
    };

    // 5. Pick, and explain the pick.
    let decision = scheduler.schedule(&request)?;
    println!("request {} for model {}", request.id, request.model);
    println!("primary:   {}", decision.primary().address());
    let fallbacks: Vec<&str> = decision.fallbacks().iter().map(|e| e.address()).collect();
    println!("fallbacks: {}", fallbacks.join(", "));
    println!(
        "x-gateway-destination-endpoint: {}\n",
        decision.destination_header()
    );
    println!("{}\n", decision.breakdown);

    // 6. When the response ends, report it; dropping the decision releases the in-flight count.
    scheduler.complete(
        &request,
        decision.primary(),
        &Completion {
            success: true,
            usage: Some(Usage {
                prompt_tokens: 24,
                completion_tokens: 12,
                cached_tokens: None,
            }),
        },
    );
    println!(
        "in flight on {} while the response streams: {}",
        decision.primary().address(),
        decision.primary().in_flight_requests()
    );
    let primary = Arc::clone(decision.primary());
    drop(decision);
    println!(
        "in flight on {} after it ended: {}",
        primary.address(),
        primary.in_flight_requests()
    );
    Ok(())
}
