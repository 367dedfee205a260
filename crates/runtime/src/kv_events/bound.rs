//! A SUB socket Shepherd binds (upstream's `zmqEndpoint`, "global socket" mode): servers
//! connect to it and publish, each under a topic `kv@<ip[:port]>@<model>` that names it.
//!
//! The source in the topic is matched to a pool endpoint by its address, or by its IP when
//! exactly one endpoint has it. There is no replay here (Shepherd does not know the
//! publishers' replay sockets): a gap or a restart in a source's sequence drops that
//! endpoint's entries.

use std::collections::HashMap;
use std::sync::Arc;

use shepherd_scheduler_core::endpoint::Endpoint;
use shepherd_scheduler_core::kv_events::wire::{decode_sequence, parse_topic};
use shepherd_scheduler_core::kv_events::{ResetReason, SequenceTracker, SequenceVerdict};
use zeromq::{Socket, SocketRecv, SubSocket};

use super::apply::Target;
use super::stats::KvEventStats;
use crate::shutdown::ShutdownSignal;

/// A bound SUB socket for one precise producer.
#[derive(Debug)]
pub(crate) struct BoundSubscription {
    pub(crate) target: Target,
    /// Where to bind (`tcp://*:5557` binds every interface).
    pub(crate) bind: String,
    pub(crate) topic_filter: String,
}

impl BoundSubscription {
    /// Runs until `stop`. A bind failure is logged and retried every few seconds.
    pub(crate) async fn run(self, stop: ShutdownSignal) {
        let stats = Arc::clone(&self.target.stats);
        let address = self.bind.replace("://*:", "://0.0.0.0:");
        let mut socket = loop {
            let mut socket = SubSocket::new();
            match socket.bind(&address).await {
                Ok(endpoint) => {
                    tracing::info!(%endpoint, "KV-event socket bound; servers may connect and publish");
                    if let Err(error) = socket.subscribe(&self.topic_filter).await {
                        tracing::warn!(%error, "KV-event subscription failed");
                    }
                    break socket;
                }
                Err(error) => {
                    tracing::error!(bind = address, %error, "cannot bind the KV-event socket; retrying");
                    tokio::select! {
                        () = tokio::time::sleep(std::time::Duration::from_secs(5)) => {}
                        () = stop.wait() => return,
                    }
                }
            }
        };
        stats
            .subscriptions
            .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        let mut trackers: HashMap<String, SequenceTracker> = HashMap::new();
        let mut unrouted_logged = 0u64;
        loop {
            let message = tokio::select! {
                message = socket.recv() => message,
                () = stop.wait() => break,
            };
            let frames = match message {
                Ok(message) => message.into_vec(),
                Err(error) => {
                    tracing::warn!(%error, "KV-event socket receive failed");
                    continue;
                }
            };
            let [topic, seq, payload] = frames.as_slice() else {
                KvEventStats::bump(&stats.undecodable);
                continue;
            };
            let (Some(source), Some(seq)) = (
                parse_topic(topic).map(|t| t.source.to_string()),
                decode_sequence(seq)
                    .ok()
                    .and_then(|s| u64::try_from(s).ok()),
            ) else {
                KvEventStats::bump(&stats.undecodable);
                continue;
            };
            let Some(endpoint) = self.resolve(&source) else {
                KvEventStats::bump(&stats.unrouted);
                unrouted_logged += 1;
                if unrouted_logged.is_power_of_two() {
                    tracing::warn!(
                        source,
                        count = unrouted_logged,
                        "KV-event batch from no endpoint of the pool; skipped"
                    );
                }
                continue;
            };
            // Bounded: one tracker per source, and sources are matched to pool endpoints.
            let tracker = trackers.entry(endpoint.address().to_string()).or_default();
            match tracker.observe(seq) {
                SequenceVerdict::First | SequenceVerdict::InOrder => {}
                SequenceVerdict::Gap { from, to } => {
                    KvEventStats::bump(&stats.gaps_lost);
                    tracing::warn!(
                        endpoint = endpoint.address(),
                        from,
                        to,
                        "KV-event batches lost (no replay on a bound socket)"
                    );
                    self.target.reset(&endpoint, ResetReason::Gap);
                }
                SequenceVerdict::Restarted => {
                    KvEventStats::bump(&stats.restarts);
                    self.target.reset(&endpoint, ResetReason::Restarted);
                }
            }
            self.target.apply(&endpoint, payload);
            if trackers.len() > 4 * self.target.pool.snapshot().len() + 16 {
                let pool = self.target.pool.snapshot();
                trackers.retain(|address, _| pool.get_by_address(address).is_some());
            }
        }
        stats
            .subscriptions
            .fetch_sub(1, std::sync::atomic::Ordering::Relaxed);
    }

    /// The endpoint a topic's source names: by address, else the only one with that IP.
    fn resolve(&self, source: &str) -> Option<Arc<Endpoint>> {
        let pool = self.target.pool.snapshot();
        if let Some(endpoint) = pool.get_by_address(source) {
            return Some(Arc::clone(endpoint));
        }
        let host = |address: &str| -> String {
            address
                .rsplit_once(':')
                .map_or(address, |(h, _)| h)
                .trim_matches(['[', ']'])
                .to_string()
        };
        let wanted = source.trim_matches(['[', ']']);
        let mut matching = pool
            .endpoints()
            .iter()
            .filter(|e| host(e.address()) == wanted);
        let first = matching.next()?;
        matching.next().is_none().then(|| Arc::clone(first))
    }
}
