//! Helpers the runtime's integration tests share.
#![allow(dead_code)] // each test file uses its own subset

pub(crate) mod replicas;

use std::path::{Path, PathBuf};
use std::time::Duration;

use shepherd_runtime::{Runtime, RuntimeHandle, RuntimeOptions};
use shepherd_scheduler_core::prelude::*;

/// Waits (on tokio time: paused or real) until `condition` holds, checking every 10 ms, at
/// most `limit`. Returns whether it held.
pub(crate) async fn wait_until(limit: Duration, mut condition: impl FnMut() -> bool) -> bool {
    let step = Duration::from_millis(10);
    let mut waited = Duration::ZERO;
    loop {
        if condition() {
            return true;
        }
        if waited >= limit {
            return false;
        }
        tokio::time::sleep(step).await;
        waited += step;
    }
}

/// Writes `text` to `dir/name` and returns the path.
pub(crate) fn write(dir: &Path, name: &str, text: &str) -> PathBuf {
    let path = dir.join(name);
    std::fs::write(&path, text).unwrap();
    path
}

/// A small text request.
pub(crate) fn request(id: &str) -> InferenceRequest {
    InferenceRequest::new(id, "llama", Prompt::Text(format!("question {id}")))
}

/// Options for tests that feed metrics themselves and read the admin routes in-process.
pub(crate) fn quiet_options() -> RuntimeOptions {
    RuntimeOptions {
        scrape: false,
        serve_admin: false,
        ..RuntimeOptions::default()
    }
}

/// The member addresses of the runtime's pool.
pub(crate) fn members(handle: &RuntimeHandle) -> Vec<String> {
    handle
        .pool()
        .snapshot()
        .endpoints()
        .iter()
        .map(|e| e.address().to_owned())
        .collect()
}

/// Starts a runtime from YAML text with `options`.
pub(crate) async fn start(yaml: &str, options: RuntimeOptions) -> RuntimeHandle {
    let config = shepherd_runtime::config::RuntimeConfig::from_yaml(yaml).unwrap();
    Runtime::start(config, options).await.unwrap()
}

/// GETs `uri` from `router` in-process; returns the status and the body as text.
pub(crate) async fn get(router: axum::Router, uri: &str) -> (u16, String) {
    use tower::ServiceExt;
    let response = router
        .oneshot(
            axum::http::Request::get(uri)
                .body(axum::body::Body::empty())
                .unwrap(),
        )
        .await
        .unwrap();
    let status = response.status().as_u16();
    let bytes = axum::body::to_bytes(response.into_body(), 16 * 1024 * 1024)
        .await
        .unwrap();
    (status, String::from_utf8(bytes.to_vec()).unwrap())
}

/// Two simulated servers publishing KV events, each with 96 blocks of 16 tokens of KV cache.
pub(crate) async fn kv_event_servers() -> shepherd_sim::serve::ServeHandle {
    use shepherd_sim::serve::{self, KvEventsConfig, ServeConfig};
    let mut config = ServeConfig::ephemeral(2);
    config.speed = 50.0;
    config.engine.num_gpu_blocks = 96;
    config.kv_events = Some(KvEventsConfig::ephemeral());
    serve::spawn(config).await.unwrap()
}

/// An `endpoints` list of `servers`, each labelled with its KV-event publisher and replay
/// sockets.
pub(crate) fn kv_event_endpoints(servers: &shepherd_sim::serve::ServeHandle) -> String {
    let mut endpoints = String::new();
    for i in 0..servers.len() {
        let kv = servers.kv_events(i).unwrap();
        endpoints.push_str(&format!(
            "- address: {}\n  labels:\n    shepherd.dev/kv-events-endpoint: {}\n    shepherd.dev/kv-events-replay-endpoint: {}\n",
            servers.addr(i).unwrap(),
            kv.publish_endpoint(),
            kv.replay_endpoint(),
        ));
    }
    endpoints
}

/// A prompt of `blocks` engine blocks (64 bytes = 16 pseudo tokens each) named by `tag`.
pub(crate) fn block_prompt(tag: &str, blocks: usize) -> String {
    let unit = format!("[{tag}] all work and no play makes a dull model. ");
    unit.repeat(blocks * 64 / unit.len() + 1)[..blocks * 64].to_string()
}
