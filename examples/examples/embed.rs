//! Embedding Shepherd's scheduling core, the way a gateway does it: build the default policy
//! over a pool of four model servers, feed it their metrics, parse an OpenAI request, pick an
//! endpoint and explain why, stream a (fake) response while holding only the request's small
//! handle, then finish it with the usage the server reported — and watch the completion hook
//! and the metrics see it.
//!
//! Run with `cargo run -p shepherd-examples --example embed`.

use std::error::Error;
use std::sync::Arc;

use parking_lot::Mutex;
use shepherd_scheduler_core::completion::{CompletedRequest, CompletionHook};
use shepherd_scheduler_core::config::PluginSpec;
use shepherd_scheduler_core::metrics::render_prometheus;
use shepherd_scheduler_core::plugin::PluginInstance;
use shepherd_scheduler_core::prelude::*;
use shepherd_scorers::{builtin_registry, default_config};

/// A completion hook that logs what it learns (a real one might feed a latency model).
#[derive(Default)]
struct LogCompletions(Mutex<Vec<String>>);

impl CompletionHook for LogCompletions {
    fn on_complete(&self, request: &CompletedRequest<'_>, completion: &Completion) {
        let ttft = completion
            .first_token_at
            .map(|t| t.saturating_since(request.scheduled_at));
        self.0.lock().push(format!(
            "request {} on {}: {} (usage {:?}, time to first token {:?})",
            request.id,
            request.endpoint.address(),
            completion.outcome.as_str(),
            completion.usage,
            ttft,
        ));
    }
}

fn main() -> Result<(), Box<dyn Error>> {
    // 1. The pool: four model servers (loopback addresses for the example). The pool owns the
    //    clock that stamps their metrics.
    let pool = Arc::new(Pool::new());
    pool.set_members([
        "127.0.0.1:8000",
        "127.0.0.1:8001",
        "127.0.0.1:8002",
        "127.0.0.1:8003",
    ]);

    // 2. The default policy (prefix cache 3 : queue 2 : KV-cache utilization 2, max-score
    //    picker), plus a completion hook of our own registered as a plugin type.
    let log = Arc::new(LogCompletions::default());
    let mut registry = builtin_registry();
    let hook = Arc::clone(&log);
    registry.register("log-completions", move |_args| {
        Ok(PluginInstance::default().with_completion_hook(hook.clone()))
    });
    let mut config = default_config();
    config.plugins.push(PluginSpec {
        plugin_type: "log-completions".into(),
        name: None,
        parameters: serde_json::Value::Null,
    });
    let scheduler = build_scheduler(&config, &registry, Arc::clone(&pool))?;

    // 3. Metrics, as a scraper reports them: (address, waiting, running, KV utilization).
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
                ..Default::default()
            });
        }
    }

    // 4. A request, parsed from an OpenAI body; its id comes from the caller's x-request-id.
    let body = br#"{"model": "llama-3-8b", "stream": true, "messages": [
        {"role": "system", "content": "You are a helpful assistant."},
        {"role": "user", "content": "Which server should serve me?"}]}"#;
    let mut request = parse_openai_request("/v1/chat/completions", body, &ParseLimits::default())?;
    request.assign_id(Some("req-1"));

    // 5. Pick, and explain the pick.
    let decision = scheduler.schedule(&request)?;
    println!(
        "request {} for model {}",
        decision.request_id(),
        request.model
    );
    println!("primary:   {}", decision.primary().address());
    let fallbacks: Vec<&str> = decision.fallbacks().iter().map(|e| e.address()).collect();
    println!("fallbacks: {}", fallbacks.join(", "));
    println!(
        "x-gateway-destination-endpoint: {}\n",
        decision.destination_header()
    );
    println!("{}\n", decision.breakdown);

    // 6. Forward it. From here on the adapter keeps only the handle: the request (whose prompt
    //    can be megabytes) and the breakdown are dropped.
    drop(request);
    let mut handle = decision.into_handle();
    let endpoint = Arc::clone(handle.endpoint());
    let chunks = ["Server", " 8002", " has", " the", " most", " room."];
    for (i, chunk) in chunks.iter().enumerate() {
        if i == 0 {
            handle.first_token(); // prefill done: its pending-prefill tokens are released
        }
        println!(
            "  streamed {chunk:?} ({} in flight on {})",
            endpoint.in_flight_requests(),
            endpoint.address()
        );
    }

    // 7. The stream ended with a usage chunk: finish. The hooks run once, then the in-flight
    //    count is released.
    handle.finish(Completion::success(Some(Usage {
        prompt_tokens: 24,
        completion_tokens: chunks.len() as u64,
        cached_tokens: Some(0),
    })));
    println!(
        "\nin flight on {} after it ended: {}",
        endpoint.address(),
        endpoint.in_flight_requests()
    );
    for line in log.0.lock().iter() {
        println!("completion hook: {line}");
    }

    // 8. A second request whose client goes away: dropping the handle counts as cancelled.
    let second = InferenceRequest::new("", "llama-3-8b", Prompt::Text("Hello?".into()));
    let dropped = scheduler.schedule(&second)?;
    println!("\nrequest {} dropped unfinished", dropped.request_id());
    drop(dropped);
    if let Some(line) = log.0.lock().last() {
        println!("completion hook: {line}");
    }

    // 9. What a runtime would export on /metrics.
    println!("\nmetrics (excerpt):");
    for line in render_prometheus(&[&scheduler]).lines() {
        if line.starts_with("shepherd_picks_total")
            || line.starts_with("shepherd_completions_total")
            || line.starts_with("shepherd_endpoint_picks_total")
        {
            println!("  {line}");
        }
    }
    Ok(())
}
