//! The replicas' Redis backend over TLS, against Debian's `redis-server` serving TLS only
//! (`--port 0 --tls-port`) with a throwaway certificate authority made by the test:
//! `rediss://` with `tls.caFile` naming that authority shares picks and load; another
//! authority's certificate is refused at start with a clear error naming the CA file.
//!
//! Without `redis-server` every test says it is skipped and passes, unless
//! `SHEPHERD_REQUIRE_E2E=1`.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use std::path::Path;
use std::time::Duration;

use common::wait_until;
use shepherd_runtime::config::RuntimeConfig;
use shepherd_runtime::{Runtime, RuntimeError, RuntimeHandle, RuntimeOptions};
use shepherd_test_util::redis::{RedisAuth, RedisServer, TlsFiles};

const ENDPOINT: &str = "127.0.0.1:9";
const WAIT: Duration = Duration::from_secs(5);

async fn replica(url: &str, name: &str, ca: &Path) -> Result<RuntimeHandle, RuntimeError> {
    let yaml = format!(
        "endpoints: [{ENDPOINT}, 127.0.0.1:10]\nreplicas:\n  backend: redis\n  intervalMs: 10\n  expireMs: 1000\n  redis:\n    url: {url}\n    name: {name}\n    tls: {{caFile: {}}}\n",
        ca.display()
    );
    let options = RuntimeOptions {
        scrape: false,
        serve_admin: false,
        watch_config: false,
        ..RuntimeOptions::default()
    };
    Runtime::start(RuntimeConfig::from_yaml(&yaml).unwrap(), options).await
}

fn peer_requests(handle: &RuntimeHandle) -> u64 {
    handle
        .pool()
        .snapshot()
        .get_by_address(ENDPOINT)
        .map_or(0, |e| e.peer_load().requests)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn rediss_with_the_configured_ca_works_and_another_ca_is_refused() {
    let Some(binary) = RedisServer::binary("rediss_with_the_configured_ca_works") else {
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    let good = TlsFiles::generate(dir.path(), "good");
    let other = TlsFiles::generate(dir.path(), "other");
    let server = RedisServer::start_tls(&binary, RedisAuth::Open, good.clone());
    let url = server.url();
    assert!(url.starts_with("rediss://127.0.0.1:"), "{url}");

    // The configured CA: A's requests in flight reach B through the TLS server.
    let a = replica(&url, "a", &good.ca).await.unwrap();
    let b = replica(&url, "b", &good.ca).await.unwrap();
    let endpoint = a
        .pool()
        .snapshot()
        .get_by_address(ENDPOINT)
        .cloned()
        .unwrap();
    let held: Vec<_> = (0..3).map(|_| endpoint.start_request(100)).collect();
    assert!(
        wait_until(WAIT, || peer_requests(&b) == 3).await,
        "{}",
        b.render_metrics()
    );
    drop(held);
    assert!(wait_until(WAIT, || peer_requests(&b) == 0).await);

    // Another authority: the server's certificate is not trusted, and the start says so.
    let error = replica(&url, "c", &other.ca).await.unwrap_err().to_string();
    eprintln!("refused as expected: {error}");
    assert!(error.contains("certificate"), "{error}");
    assert!(
        error.contains(&format!("{}", other.ca.display())),
        "{error}"
    );

    a.shutdown(Duration::from_millis(50)).await;
    b.shutdown(Duration::from_millis(50)).await;
}
