//! The double against the real kube client's API calls: paged lists, selectors, a watch's
//! events from a resourceVersion, bookmarks, and 410 Gone for a compacted history.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::time::Duration;

use futures_util::{StreamExt, TryStreamExt};
use k8s_openapi::api::core::v1::Pod;
use kube::api::{Api, ListParams, WatchEvent, WatchParams};
use shepherd_kube_apiserver_double::{ApiServerDouble, Resource, Settings, objects};

fn pod(n: usize, app: &str) -> serde_json::Value {
    objects::pod(
        "ns",
        &format!("p{n:03}"),
        &[("app", app)],
        Some("10.0.0.1"),
        true,
        &[8000],
    )
}

fn api(server: &ApiServerDouble) -> Api<Pod> {
    let client = kube::Client::try_from(kube::Config::new(server.url().parse().unwrap())).unwrap();
    Api::namespaced(client, "ns")
}

#[tokio::test]
async fn lists_page_with_limit_and_continue_and_select_by_label_and_field() {
    let server = ApiServerDouble::start().await.unwrap();
    for n in 0..25 {
        server.apply(
            &Resource::pods(),
            pod(n, if n % 5 == 0 { "b" } else { "a" }),
        );
    }
    let pods = api(&server);
    let first = pods.list(&ListParams::default().limit(10)).await.unwrap();
    assert_eq!(first.items.len(), 10);
    let token = first.metadata.continue_.clone().unwrap();
    let second = pods
        .list(&ListParams::default().limit(10).continue_token(&token))
        .await
        .unwrap();
    assert_eq!(second.items[0].metadata.name.as_deref(), Some("p010"));
    let selected = pods
        .list(&ListParams::default().labels("app=b"))
        .await
        .unwrap();
    assert_eq!(selected.items.len(), 5);
    let named = pods
        .list(&ListParams::default().fields("metadata.name=p007"))
        .await
        .unwrap();
    assert_eq!(named.items.len(), 1);
    // An expired continue token is 410 Gone.
    server.compact();
    let error = pods
        .list(&ListParams::default().limit(10).continue_token(&token))
        .await
        .unwrap_err();
    assert!(
        matches!(error, kube::Error::Api(ref s) if s.code == 410),
        "{error:?}"
    );
}

#[tokio::test]
async fn a_watch_replays_from_its_resource_version_and_sends_bookmarks() {
    let server = ApiServerDouble::start_with(Settings {
        bookmark_interval: Duration::from_millis(50),
        ..Settings::default()
    })
    .await
    .unwrap();
    server.apply(&Resource::pods(), pod(1, "a"));
    let pods = api(&server);
    let list = pods.list(&ListParams::default()).await.unwrap();
    let rv = list.metadata.resource_version.clone().unwrap();
    server.apply(&Resource::pods(), pod(2, "a"));
    server.apply(&Resource::pods(), pod(2, "b")); // leaves the selector: DELETED
    let params = WatchParams::default().labels("app=a").timeout(5);
    let mut stream = pods.watch(&params, &rv).await.unwrap().boxed();
    let mut kinds = Vec::new();
    while kinds.len() < 3 {
        match stream.try_next().await.unwrap().unwrap() {
            WatchEvent::Added(p) => kinds.push(format!("ADDED {}", p.metadata.name.unwrap())),
            WatchEvent::Deleted(p) => kinds.push(format!("DELETED {}", p.metadata.name.unwrap())),
            WatchEvent::Bookmark(_) => kinds.push("BOOKMARK".into()),
            other => panic!("{other:?}"),
        }
    }
    assert_eq!(kinds, ["ADDED p002", "DELETED p002", "BOOKMARK"]);
}

#[tokio::test]
async fn a_watch_from_a_compacted_resource_version_gets_410_inside_the_stream() {
    let server = ApiServerDouble::start().await.unwrap();
    server.apply(&Resource::pods(), pod(1, "a"));
    let pods = api(&server);
    let rv = pods
        .list(&ListParams::default())
        .await
        .unwrap()
        .metadata
        .resource_version
        .unwrap();
    server.compact();
    let mut stream = pods
        .watch(&WatchParams::default(), &rv)
        .await
        .unwrap()
        .boxed();
    match stream.try_next().await.unwrap().unwrap() {
        WatchEvent::Error(status) => assert_eq!(status.code, 410),
        other => panic!("{other:?}"),
    }
    assert_eq!(server.stats().gone(), 1);
}
