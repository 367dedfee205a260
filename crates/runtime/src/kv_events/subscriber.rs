//! One endpoint's KV-event subscription: a SUB socket on its publisher, sequence tracking,
//! replays to fill gaps, and resets when the picture could be wrong.
//!
//! On every (re)connection the endpoint's entries from before are dropped (whatever happened
//! while disconnected is unknown: the engine may have restarted) and, with a replay socket,
//! everything the publisher still buffers is replayed to rebuild them. Then each batch is
//! checked against the sequence: in order, it is applied; after a gap, the missing batches
//! are asked of the replay socket and applied if they all come back, else the entries are
//! dropped; a sequence going back (a restarted engine) drops them too. Every drop is counted
//! and logged.

use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use futures_util::StreamExt;
use shepherd_scheduler_core::endpoint::Endpoint;
use shepherd_scheduler_core::kv_events::wire::decode_sequence;
use shepherd_scheduler_core::kv_events::{ResetReason, SequenceTracker, SequenceVerdict};
use zeromq::{Socket, SocketEvent, SocketRecv, SubSocket};

use super::apply::Target;
use super::replay::ReplayClient;
use super::stats::KvEventStats;
use crate::shutdown::ShutdownSignal;

/// How long one connection attempt may take.
const CONNECT_TIMEOUT: Duration = Duration::from_secs(5);
/// Backoff between connection attempts: from the first to the largest.
const BACKOFF: (Duration, Duration) = (Duration::from_millis(100), Duration::from_secs(5));

/// One endpoint's subscription.
#[derive(Debug)]
pub(crate) struct EndpointSubscription {
    pub(crate) target: Target,
    /// The endpoint's pool address (`ip:port` of its HTTP server).
    pub(crate) address: String,
    /// Its publisher (`tcp://ip:port`).
    pub(crate) publisher: String,
    /// Its replay socket, when there is one.
    pub(crate) replay: Option<String>,
    /// The SUB subscription prefix.
    pub(crate) topic_filter: String,
}

/// The stream state of one connection.
struct Stream {
    tracker: SequenceTracker,
    /// The last sequence a replay delivered: live batches up to it are duplicates.
    replayed_until: Option<u64>,
    /// Whether anything was applied since the entries were last dropped.
    has_state: bool,
    replay: Option<ReplayClient>,
}

impl EndpointSubscription {
    /// Runs until `stop`, reconnecting with backoff.
    pub(crate) async fn run(self, stop: ShutdownSignal) {
        let stats = Arc::clone(&self.target.stats);
        stats
            .subscriptions
            .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        let mut stream = Stream {
            tracker: SequenceTracker::new(),
            replayed_until: None,
            has_state: false,
            replay: self.replay.clone().map(ReplayClient::new),
        };
        let mut backoff = BACKOFF.0;
        let mut failures = 0u32;
        loop {
            let mut socket = SubSocket::new();
            let mut monitor = socket.monitor();
            let connected = tokio::select! {
                connected = tokio::time::timeout(CONNECT_TIMEOUT, socket.connect(&self.publisher)) => connected,
                () = stop.wait() => break,
            };
            match connected {
                Ok(Ok(())) => {}
                Ok(Err(error)) => {
                    failures += 1;
                    if failures == 1 || failures.is_power_of_two() {
                        tracing::warn!(endpoint = self.address, publisher = self.publisher, %error, failures, "cannot connect to the KV-event publisher; retrying");
                    }
                    tokio::select! {
                        () = tokio::time::sleep(backoff) => {}
                        () = stop.wait() => break,
                    }
                    backoff = (backoff * 2).min(BACKOFF.1);
                    continue;
                }
                Err(_) => {
                    failures += 1;
                    if failures == 1 || failures.is_power_of_two() {
                        tracing::warn!(
                            endpoint = self.address,
                            publisher = self.publisher,
                            failures,
                            "KV-event publisher did not answer; retrying"
                        );
                    }
                    continue;
                }
            }
            if let Err(error) = socket.subscribe(&self.topic_filter).await {
                tracing::warn!(endpoint = self.address, %error, "KV-event subscription failed; reconnecting");
                continue;
            }
            failures = 0;
            backoff = BACKOFF.0;
            tracing::info!(
                endpoint = self.address,
                publisher = self.publisher,
                replay = self.replay.as_deref().unwrap_or("none"),
                "subscribed to the server's KV-cache events"
            );
            stats
                .connected
                .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
            self.resync(&mut stream).await;
            // Until the connection breaks: then a fresh socket connects again (the socket's
            // own reconnection is not relied on) and the next connection resyncs.
            let stopped = loop {
                tokio::select! {
                    message = socket.recv() => match message {
                        Ok(message) => self.handle(&mut stream, message.into_vec()).await,
                        Err(error) => {
                            tracing::warn!(endpoint = self.address, %error, "KV-event stream failed; reconnecting");
                            break false;
                        }
                    },
                    event = monitor.next() => match event {
                        Some(SocketEvent::Disconnected(_)) | None => {
                            tracing::warn!(endpoint = self.address, publisher = self.publisher, "KV-event publisher disconnected; reconnecting");
                            break false;
                        }
                        Some(_) => {}
                    },
                    () = stop.wait() => break true,
                }
            };
            stats
                .connected
                .fetch_sub(1, std::sync::atomic::Ordering::Relaxed);
            drop(socket);
            if stopped {
                break;
            }
        }
        stats
            .subscriptions
            .fetch_sub(1, std::sync::atomic::Ordering::Relaxed);
    }

    fn endpoint(&self) -> Option<Arc<Endpoint>> {
        self.target.endpoint(&self.address)
    }

    /// After a (re)connection: drop what was known, and rebuild from the replay buffer.
    async fn resync(&self, stream: &mut Stream) {
        stream.tracker.reset();
        stream.replayed_until = None;
        if stream.has_state
            && let Some(endpoint) = self.endpoint()
        {
            self.target.reset(&endpoint, ResetReason::Disconnected);
        }
        stream.has_state = false;
        let Some(replay) = stream.replay.as_mut() else {
            return;
        };
        replay.disconnect();
        KvEventStats::bump(&self.target.stats.replay_requests);
        match replay.fetch(0).await {
            Ok(batches) => {
                // Everything the publisher sent so far is in the buffer (or was before it
                // filled up): the live stream must continue right after it.
                stream
                    .tracker
                    .expect(batches.last().map_or(0, |(seq, _)| seq.saturating_add(1)));
                let Some(endpoint) = self.endpoint() else {
                    return;
                };
                let count = batches.len();
                for (seq, payload) in batches {
                    stream.tracker.expect(seq.saturating_add(1));
                    stream.replayed_until = Some(seq);
                    if self.target.apply(&endpoint, &payload) {
                        stream.has_state = true;
                        KvEventStats::bump(&self.target.stats.replayed_batches);
                    }
                }
                tracing::debug!(
                    endpoint = self.address,
                    batches = count,
                    "KV-event replay applied"
                );
            }
            Err(error) => {
                tracing::warn!(endpoint = self.address, %error, "KV-event replay failed; the index starts from the live stream");
            }
        }
    }

    /// One live message: `[topic, seq, payload]`.
    async fn handle(&self, stream: &mut Stream, frames: Vec<Bytes>) {
        let stats = &self.target.stats;
        let [_topic, seq, payload] = frames.as_slice() else {
            KvEventStats::bump(&stats.undecodable);
            tracing::warn!(
                endpoint = self.address,
                frames = frames.len(),
                "KV-event message without [topic, seq, payload] frames; skipped"
            );
            return;
        };
        let Some(seq) = decode_sequence(seq)
            .ok()
            .and_then(|s| u64::try_from(s).ok())
        else {
            KvEventStats::bump(&stats.undecodable);
            return;
        };
        if let Some(until) = stream.replayed_until {
            if seq <= until {
                return; // already applied from the replay
            }
            stream.replayed_until = None;
        }
        let Some(endpoint) = self.endpoint() else {
            KvEventStats::bump(&stats.unrouted);
            return;
        };
        match stream.tracker.observe(seq) {
            SequenceVerdict::First | SequenceVerdict::InOrder => {}
            SequenceVerdict::Gap { from, to } => self.fill_gap(stream, &endpoint, from, to).await,
            SequenceVerdict::Restarted => {
                KvEventStats::bump(&stats.restarts);
                tracing::warn!(
                    endpoint = self.address,
                    seq,
                    "KV-event sequence went back: the server restarted"
                );
                self.target.reset(&endpoint, ResetReason::Restarted);
            }
        }
        if self.target.apply(&endpoint, payload) {
            stream.has_state = true;
        }
    }

    /// Batches `from..to` were missed: replay them, or drop the endpoint's entries.
    async fn fill_gap(&self, stream: &mut Stream, endpoint: &Endpoint, from: u64, to: u64) {
        let stats = &self.target.stats;
        let missing = to - from;
        if let Some(replay) = stream.replay.as_mut() {
            KvEventStats::bump(&stats.replay_requests);
            match replay.fetch(from).await {
                Ok(batches) => {
                    let wanted: Vec<&(u64, Bytes)> = batches
                        .iter()
                        .filter(|(s, _)| (from..to).contains(s))
                        .collect();
                    let complete = wanted.len() as u64 == missing
                        && wanted.iter().zip(from..to).all(|((s, _), e)| *s == e);
                    if complete {
                        for (_, payload) in wanted {
                            if self.target.apply(endpoint, payload) {
                                KvEventStats::bump(&stats.replayed_batches);
                            }
                        }
                        KvEventStats::bump(&stats.gaps_replayed);
                        tracing::info!(
                            endpoint = self.address,
                            from,
                            to,
                            "KV-event gap filled by replay"
                        );
                        return;
                    }
                    tracing::warn!(
                        endpoint = self.address,
                        from,
                        to,
                        returned = wanted.len(),
                        "KV-event replay no longer holds the missed batches"
                    );
                }
                Err(error) => {
                    tracing::warn!(endpoint = self.address, from, to, %error, "KV-event replay failed");
                }
            }
        }
        KvEventStats::bump(&stats.gaps_lost);
        tracing::warn!(endpoint = self.address, from, to, "KV-event batches lost");
        self.target.reset(endpoint, ResetReason::Gap);
    }
}
