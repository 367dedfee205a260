//! Editing the config file while the runtime runs: membership and policy follow the file,
//! live counters survive, and a bad edit keeps the running config. Paused tokio time.
#![allow(clippy::unwrap_used, clippy::expect_used)] // test code: a failed unwrap is a failed test

mod common;

use std::time::Duration;

use common::{members, request, wait_until, write};
use shepherd_runtime::discovery::FileWatcher;
use shepherd_runtime::{Runtime, RuntimeOptions};
use shepherd_scheduler_core::prelude::*;

const POLL: Duration = Duration::from_millis(100);

fn policy(endpoints: &str, queue_weight: u32) -> String {
    format!(
        "plugins:
- type: queue-scorer
- type: kv-cache-utilization-scorer
- type: max-score-picker
schedulingProfiles:
- name: default
  plugins:
  - pluginRef: queue-scorer
    weight: {queue_weight}
  - pluginRef: kv-cache-utilization-scorer
    weight: 1
  - pluginRef: max-score-picker
endpoints: [{endpoints}]
"
    )
}

fn weights(handle: &shepherd_runtime::RuntimeHandle) -> Vec<f64> {
    handle.scheduler().load().profiles()[0]
        .weights()
        .load()
        .as_slice()
        .to_vec()
}

#[tokio::test(start_paused = true)]
async fn file_edits_change_membership_and_policy_and_bad_edits_keep_the_old_config() {
    let dir = tempfile::tempdir().unwrap();
    let path = write(
        dir.path(),
        "shepherd.yaml",
        &policy("127.0.0.1:8000, 127.0.0.1:8001", 2),
    );
    let options = RuntimeOptions {
        config_poll_interval: POLL,
        ..common::quiet_options()
    };
    let handle = Runtime::start(path.as_path(), options).await.unwrap();
    assert_eq!(members(&handle), ["127.0.0.1:8000", "127.0.0.1:8001"]);
    assert_eq!(weights(&handle), [2.0, 1.0]);

    // A request in flight across the reloads.
    let held = handle
        .scheduler()
        .schedule(&request("r1"))
        .unwrap()
        .into_handle();
    let busy = held.endpoint().clone();
    assert_eq!(busy.in_flight_requests(), 1);

    // Membership and policy edit.
    write(
        dir.path(),
        "shepherd.yaml",
        &policy("127.0.0.1:8000, 127.0.0.1:8001, 127.0.0.1:8002", 5),
    );
    assert!(wait_until(Duration::from_secs(2), || members(&handle).len() == 3).await);
    assert!(wait_until(Duration::from_secs(2), || weights(&handle) == [5.0, 1.0]).await);
    assert_eq!(handle.scheduler().generation(), 1);
    assert_eq!(handle.reload_stats().applied(), 1);
    // The endpoint object, and its live count, survived.
    let same = handle
        .pool()
        .snapshot()
        .get_by_address(busy.address())
        .unwrap()
        .clone();
    assert!(std::sync::Arc::ptr_eq(&same, &busy));
    assert_eq!(same.in_flight_requests(), 1);

    // Touching the file without changing it reloads nothing.
    write(
        dir.path(),
        "shepherd.yaml",
        &policy("127.0.0.1:8000, 127.0.0.1:8001, 127.0.0.1:8002", 5),
    );
    tokio::time::sleep(POLL * 3).await;
    assert_eq!(handle.reload_stats().applied(), 1);

    // Bad YAML: counted, logged, the old config keeps running.
    write(dir.path(), "shepherd.yaml", "endpoints: [127.0.0.1:8000\n");
    assert!(
        wait_until(Duration::from_secs(2), || handle.reload_stats().rejected()
            == 1)
        .await
    );
    // A policy the core refuses: same.
    write(
        dir.path(),
        "shepherd.yaml",
        "plugins:\n- type: no-such-scorer\nschedulingProfiles:\n- name: default\n  plugins:\n  - pluginRef: no-such-scorer\nendpoints: [127.0.0.1:8000]\n",
    );
    assert!(
        wait_until(Duration::from_secs(2), || handle.reload_stats().rejected()
            == 2)
        .await
    );
    // The file disappears: one error, nothing changes.
    std::fs::remove_file(&path).unwrap();
    assert!(
        wait_until(Duration::from_secs(2), || handle.reload_stats().rejected()
            == 3)
        .await
    );
    tokio::time::sleep(POLL * 5).await;
    assert_eq!(handle.reload_stats().rejected(), 3);
    assert_eq!(members(&handle).len(), 3);
    assert_eq!(weights(&handle), [5.0, 1.0]);
    assert_eq!(handle.scheduler().generation(), 1);
    assert!(!handle.reload_stats().last_ok());
    let text = handle.render_metrics();
    assert!(
        text.contains("shepherd_config_reloads_total{result=\"rejected\"} 3"),
        "{text}"
    );
    assert!(
        text.contains("shepherd_config_last_reload_successful 0"),
        "{text}"
    );

    // A good file again: applied, an endpoint removed.
    write(
        dir.path(),
        "shepherd.yaml",
        &policy("127.0.0.1:8000, 127.0.0.1:8002", 5),
    );
    assert!(wait_until(Duration::from_secs(2), || members(&handle).len() == 2).await);
    assert!(handle.reload_stats().last_ok());
    assert_eq!(
        handle.scheduler().generation(),
        1,
        "the policy did not change"
    );
    assert_eq!(
        handle.config().addresses(),
        ["127.0.0.1:8000", "127.0.0.1:8002"]
    );

    held.finish(Completion::success(None));
    assert_eq!(busy.in_flight_requests(), 0);
    assert!(handle.shutdown(Duration::from_secs(1)).await.drained);
}

#[tokio::test(start_paused = true)]
async fn reload_in_code_reports_what_changed() {
    let handle = common::start(&policy("127.0.0.1:8000", 2), common::quiet_options()).await;
    let mut next = (*handle.config()).clone();
    assert!(!handle.reload(next.clone()).unwrap().changed());
    assert_eq!(handle.reload_stats().unchanged(), 1);

    next.scraping.interval_ms = 100;
    next.server.metrics_port = 9999;
    let outcome = handle.reload(next.clone()).unwrap();
    assert!(outcome.scraping_changed && outcome.restart_needed);
    assert!(!outcome.policy_changed && !outcome.endpoints_changed);

    let mut bad = next.clone();
    bad.policy.scheduling_profiles[0].plugins[0].weight = Some(-1.0);
    assert!(handle.reload(bad).is_err());
    assert_eq!(handle.config().scraping.interval_ms, 100);
    assert_eq!(handle.reload_stats().rejected(), 1);
}

#[tokio::test(start_paused = true)]
async fn the_watcher_reports_each_version_once() {
    let dir = tempfile::tempdir().unwrap();
    let path = write(dir.path(), "c.yaml", "a: 1\n");
    let mut watcher = FileWatcher::new(&path, POLL);
    assert_eq!(watcher.prime().await.as_deref(), Some("a: 1\n"));
    write(dir.path(), "c.yaml", "a: 2\n");
    assert_eq!(watcher.changed().await.unwrap(), "a: 2\n");
    std::fs::remove_file(&path).unwrap();
    assert!(watcher.changed().await.is_err());
    // Back with the same contents as before the deletion: reported, since the error.
    write(dir.path(), "c.yaml", "a: 2\n");
    assert_eq!(watcher.changed().await.unwrap(), "a: 2\n");
    let waited = tokio::time::timeout(POLL * 5, watcher.changed()).await;
    assert!(waited.is_err(), "no edit, no report");
}

#[tokio::test(start_paused = true)]
async fn a_discovery_source_of_its_own_drives_membership() {
    use shepherd_runtime::config::EndpointSpec;
    use shepherd_runtime::discovery::{Discovery, EndpointSet, StaticDiscovery};
    use std::sync::Arc;

    let spec = |port: u16| EndpointSpec::new(format!("127.0.0.1:{port}").parse().unwrap());
    let source = Arc::new(StaticDiscovery::new(EndpointSet::new([spec(9000)])));
    let options = RuntimeOptions {
        discovery: Some(Arc::clone(&source) as Arc<dyn Discovery>),
        ..common::quiet_options()
    };
    // The config's own list is ignored in favour of the source.
    let handle = common::start(&policy("127.0.0.1:8000", 1), options).await;
    assert_eq!(members(&handle), ["127.0.0.1:9000"]);

    source.replace(EndpointSet::new([spec(9000), spec(9001)]));
    assert!(wait_until(Duration::from_secs(1), || members(&handle).len() == 2).await);
    source.replace(EndpointSet::new([spec(9001)]));
    assert!(
        wait_until(Duration::from_secs(1), || members(&handle)
            == ["127.0.0.1:9001"])
        .await
    );
}
