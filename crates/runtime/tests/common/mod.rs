//! Helpers the runtime's integration tests share.
#![allow(dead_code)] // each test file uses its own subset

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
