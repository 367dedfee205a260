//! Session affinity: a session sticks to the endpoint that served it, and forgets endpoints
//! that leave the pool.
#![allow(clippy::unwrap_used, clippy::expect_used)] // test code: a failed unwrap is a failed test

mod common;

use std::sync::Arc;

use shepherd_scheduler_core::endpoint::MembershipListener;
use shepherd_scheduler_core::plugin::{PickHook, Scorer};
use shepherd_scheduler_core::prelude::*;
use shepherd_scorers::pickers::MaxScorePicker;
use shepherd_scorers::scorers::{QueueScorer, SessionAffinityParameters, SessionAffinityScorer};

use common::{fresh, pool, request};

fn session_request(id: &str, session: Option<&str>) -> InferenceRequest {
    let mut req = request(id);
    req.session_key = session.map(str::to_string);
    req
}

/// A scheduler with session affinity (weight 10) over a queue scorer (weight 1).
fn scheduler(pool: Arc<Pool>) -> (Scheduler, Arc<SessionAffinityScorer>) {
    let session =
        Arc::new(SessionAffinityScorer::new(SessionAffinityParameters::default(), 1).unwrap());
    let listener: Arc<dyn MembershipListener> = session.clone();
    pool.add_listener(&listener);
    let profile = Profile::builder("default")
        .scorer("session", Arc::clone(&session) as Arc<dyn Scorer>, 10.0)
        .scorer("queue", Arc::new(QueueScorer), 1.0)
        .pick_hook(Arc::clone(&session) as Arc<dyn PickHook>)
        .picker(Arc::new(MaxScorePicker::default()))
        .build();
    let scheduler = Scheduler::builder(pool).profile(profile).build().unwrap();
    (scheduler, session)
}

#[test]
fn a_session_sticks_to_its_endpoint_even_when_it_gets_busier() {
    let (pool, members) = pool(3);
    for ep in &members {
        ep.set_metrics(fresh(0, 0, 0.0));
    }
    let (scheduler, session) = scheduler(Arc::clone(&pool));
    let first = scheduler
        .schedule(&session_request("r1", Some("alice")))
        .unwrap()
        .primary()
        .id();
    // Alice's endpoint becomes the busiest; the others are idle.
    for ep in &members {
        let waiting = if ep.id() == first { 20 } else { 0 };
        ep.set_metrics(fresh(waiting, 0, 0.0));
    }
    for i in 0..10 {
        let d = scheduler
            .schedule(&session_request(&format!("r{i}"), Some("alice")))
            .unwrap();
        assert_eq!(d.primary().id(), first);
    }
    // Without a session, or with another one, the load decides.
    let other = scheduler
        .schedule(&session_request("b", Some("bob")))
        .unwrap();
    assert_ne!(other.primary().id(), first);
    let anonymous = scheduler.schedule(&session_request("c", None)).unwrap();
    assert_ne!(anonymous.primary().id(), first);
    assert_eq!(
        session.sessions(),
        2,
        "alice and bob; the anonymous request is not stored"
    );
}

#[test]
fn removed_endpoints_are_forgotten() {
    let (pool, members) = pool(3);
    for ep in &members {
        ep.set_metrics(fresh(0, 0, 0.0));
    }
    let (scheduler, session) = scheduler(Arc::clone(&pool));
    let first = scheduler
        .schedule(&session_request("r1", Some("alice")))
        .unwrap()
        .primary()
        .clone();
    assert_eq!(
        session.endpoint_for("alice", Timestamp::ZERO),
        Some(first.id())
    );

    assert!(pool.remove(first.address()));
    assert_eq!(session.endpoint_for("alice", Timestamp::ZERO), None);
    assert_eq!(session.sessions(), 0);

    // The session moves to a remaining endpoint and sticks there.
    let next = scheduler
        .schedule(&session_request("r2", Some("alice")))
        .unwrap()
        .primary()
        .id();
    assert_ne!(next, first.id());
    assert_eq!(session.endpoint_for("alice", Timestamp::ZERO), Some(next));
}

#[test]
fn sessions_are_bounded_by_capacity() {
    let (_pool, members) = pool(2);
    for ep in &members {
        ep.set_metrics(fresh(0, 0, 0.0));
    }
    let session = Arc::new(
        SessionAffinityScorer::new(
            SessionAffinityParameters {
                capacity: 8,
                ttl_seconds: 60,
                ..Default::default()
            },
            1,
        )
        .unwrap(),
    );
    let req_of = |i: usize| session_request(&format!("r{i}"), Some(&format!("s{i}")));
    for i in 0..100 {
        let req = req_of(i);
        let mut cycle = CycleState::new(&req, Timestamp::ZERO, common::STALENESS);
        session.on_pick(&mut cycle, &members[i % 2]);
    }
    assert_eq!(session.sessions(), 8);
    // The most recent sessions are the ones kept.
    assert!(session.endpoint_for("s99", Timestamp::ZERO).is_some());
    assert!(session.endpoint_for("s0", Timestamp::ZERO).is_none());
}

#[test]
fn sessions_expire_after_their_ttl() {
    let session = SessionAffinityScorer::new(
        SessionAffinityParameters {
            capacity: 8,
            ttl_seconds: 60,
            ..Default::default()
        },
        1,
    )
    .unwrap();
    let ep = common::endpoint(0, fresh(0, 0, 0.0));
    let req = session_request("r", Some("alice"));
    let mut cycle = CycleState::new(&req, Timestamp::ZERO, common::STALENESS);
    session.on_pick(&mut cycle, &ep);
    assert_eq!(
        session.endpoint_for("alice", Timestamp::from_millis(60_000)),
        Some(ep.id())
    );
    assert_eq!(
        session.endpoint_for("alice", Timestamp::from_millis(60_001)),
        None
    );
}

#[test]
fn session_scorer_from_yaml_sticks() {
    let config = EndpointPickerConfig::from_yaml(
        "
plugins:
- type: session-affinity-scorer
  parameters:
    capacity: 1000
    ttlSeconds: 60
- type: active-request-scorer
schedulingProfiles:
- name: default
  plugins:
  - pluginRef: session-affinity-scorer
    weight: 5
  - pluginRef: active-request-scorer
    weight: 1",
    )
    .unwrap();
    let (pool, _) = pool(4);
    let scheduler = build_scheduler(
        &config,
        &shepherd_scorers::builtin_registry(),
        Arc::clone(&pool),
    )
    .unwrap();
    // Keep decisions in flight: without affinity the active-request scorer would rotate.
    let mut held = Vec::new();
    let first = scheduler
        .schedule(&session_request("r0", Some("s")))
        .unwrap();
    let sticky = first.primary().id();
    held.push(first);
    for i in 1..8 {
        let d = scheduler
            .schedule(&session_request(&format!("r{i}"), Some("s")))
            .unwrap();
        assert_eq!(d.primary().id(), sticky);
        held.push(d);
    }
    // The pool forgets through the listener registered by the config builder.
    let address = held[0].primary().address().to_string();
    drop(held);
    pool.remove(&address);
    let d = scheduler
        .schedule(&session_request("r9", Some("s")))
        .unwrap();
    assert_ne!(d.primary().address(), address);
}

#[test]
fn upstream_parameters_load_and_the_stateless_strategy_is_refused() {
    use shepherd_scheduler_core::prelude::*;
    let build = |parameters: &str| {
        let yaml = format!(
            "plugins:\n- type: session-affinity-scorer\n  parameters: {parameters}\nschedulingProfiles:\n- name: default\n  plugins:\n  - pluginRef: session-affinity-scorer\n"
        );
        let config = EndpointPickerConfig::from_yaml(&yaml).unwrap();
        build_scheduler(
            &config,
            &shepherd_scorers::builtin_registry(),
            Arc::new(Pool::new()),
        )
    };
    assert!(build("{strategy: session_id, sessionIdConfig: {evictionTtlSeconds: 30}}").is_ok());
    assert!(
        build("{profileName: prefill, sessionIdConfig: {sources: [{header: x-user}]}}").is_ok()
    );
    let err = build("{strategy: encoded_endpoint_header}").unwrap_err();
    assert!(err.to_string().contains("encoded_endpoint_header"), "{err}");
    assert!(build("{encodedEndpointHeaderConfig: {header: x-session-token}}").is_err());
    assert!(build("{strategy: sticky}").is_err());
}

#[test]
fn eviction_ttl_seconds_overrides_ttl_seconds() {
    let p: SessionAffinityParameters =
        serde_json::from_value(serde_json::json!({"sessionIdConfig": {"evictionTtlSeconds": 1.5}}))
            .unwrap();
    assert_eq!(p.ttl(), std::time::Duration::from_millis(1500));
    assert_eq!(
        SessionAffinityParameters::default().ttl(),
        std::time::Duration::from_secs(600)
    );
}
