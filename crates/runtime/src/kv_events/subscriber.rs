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
use shepherd_scheduler_core::endpoint::Endpoint;
use shepherd_scheduler_core::kv_events::wire::decode_sequence;
use shepherd_scheduler_core::kv_events::{ResetReason, SequenceTracker, SequenceVerdict};
use shepherd_scorers::producers::KvEventLimits;

use super::apply::Target;
use super::replay::{ReplayClient, ReplayError};
use super::stats::KvEventStats;
use crate::shutdown::ShutdownSignal;
use crate::throttle::Throttle;
use crate::zmtp::{self, SocketType, ZmtpError};

/// How long one connection attempt (TCP and the ZMTP handshake) may take at most.
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
    /// The bounds of the publisher and the replay socket.
    pub(crate) limits: KvEventLimits,
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
        let limits = self.limits;
        let mut stream = Stream {
            tracker: SequenceTracker::new(),
            replayed_until: None,
            has_state: false,
            replay: self
                .replay
                .clone()
                .map(|address| ReplayClient::new(address, limits)),
        };
        let oversized_log = Throttle::default();
        let mut backoff = BACKOFF.0;
        let mut failures = 0u32;
        let connect_timeout = CONNECT_TIMEOUT.max(limits.handshake_timeout);
        loop {
            let connected = tokio::select! {
                connected = tokio::time::timeout(
                    connect_timeout,
                    zmtp::endpoint::connect(&self.publisher, SocketType::Sub, super::zmtp_limits(&limits)),
                ) => connected,
                () = stop.wait() => break,
            };
            let connected = match connected {
                Ok(Ok(connection)) => Ok(connection),
                Ok(Err(error)) => Err(error),
                Err(_) => Err(ZmtpError::HandshakeTimeout(connect_timeout)),
            };
            let mut connection = match connected {
                Ok(connection) => connection,
                Err(error) => {
                    failures += 1;
                    if error.is_violation() || matches!(error, ZmtpError::HandshakeTimeout(_)) {
                        KvEventStats::bump(&stats.handshake_failures);
                    }
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
            };
            if let Err(error) = connection.subscribe(self.topic_filter.as_bytes()).await {
                tracing::warn!(endpoint = self.address, %error, "KV-event subscription failed; reconnecting");
                tokio::select! {
                    () = tokio::time::sleep(backoff) => {}
                    () = stop.wait() => break,
                }
                continue;
            }
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
            // Until the connection breaks: then a fresh connection is made and resyncs.
            let ended = loop {
                tokio::select! {
                    message = connection.recv() => match message {
                        Ok(frames) => self.handle(&mut stream, frames).await,
                        Err(error) => break Some(error),
                    },
                    () = stop.wait() => break None,
                }
            };
            stats
                .connected
                .fetch_sub(1, std::sync::atomic::Ordering::Relaxed);
            drop(connection);
            let Some(error) = ended else {
                break;
            };
            if error.is_oversized() {
                KvEventStats::bump(&stats.oversized_publisher);
                if let Some(suppressed) = oversized_log.allow() {
                    tracing::warn!(
                        endpoint = self.address,
                        publisher = self.publisher,
                        %error,
                        suppressed,
                        max_message_bytes = limits.max_message_bytes,
                        "KV-event publisher declared a message over kvEventsConfig.maxMessageBytes; disconnected"
                    );
                }
            } else {
                tracing::warn!(endpoint = self.address, publisher = self.publisher, %error, "KV-event stream ended; reconnecting");
            }
            // A publisher that breaks the protocol is retried with a growing backoff; one
            // that merely went away, after the shortest.
            if error.is_violation() {
                failures += 1;
            } else {
                failures = 0;
                backoff = BACKOFF.0;
            }
            tokio::select! {
                () = tokio::time::sleep(backoff) => {}
                () = stop.wait() => break,
            }
            if error.is_violation() {
                backoff = (backoff * 2).min(BACKOFF.1);
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
        let Stream {
            tracker,
            replayed_until,
            has_state,
            replay,
        } = stream;
        let Some(replay) = replay.as_mut() else {
            return;
        };
        replay.disconnect();
        KvEventStats::bump(&self.target.stats.replay_requests);
        let endpoint = self.endpoint();
        let mut last = None;
        // Each batch is applied as it arrives: the answer is never held whole.
        let result = replay
            .fetch(0, |seq, payload| {
                last = Some(seq);
                tracker.expect(seq.saturating_add(1));
                *replayed_until = Some(seq);
                if let Some(endpoint) = &endpoint
                    && self.target.apply(endpoint, &payload)
                {
                    *has_state = true;
                    KvEventStats::bump(&self.target.stats.replayed_batches);
                }
            })
            .await;
        match result {
            Ok(count) => {
                // Everything the publisher sent so far is in the buffer (or was before it
                // filled up): the live stream must continue right after it.
                tracker.expect(last.map_or(0, |seq| seq.saturating_add(1)));
                tracing::debug!(
                    endpoint = self.address,
                    batches = count,
                    "KV-event replay applied"
                );
            }
            Err(error) => {
                self.count_replay_failure(&error);
                tracing::warn!(endpoint = self.address, %error, "KV-event replay failed; the index starts from the live stream");
                // What a broken answer applied may lack its end: start from the live stream
                // alone, as if no replay had come.
                tracker.reset();
                *replayed_until = None;
                if *has_state && let Some(endpoint) = &endpoint {
                    self.target.reset(endpoint, ResetReason::Gap);
                }
                *has_state = false;
            }
        }
    }

    /// Counts a failed replay that the socket made fail (too large a message, too long an
    /// answer).
    fn count_replay_failure(&self, error: &ReplayError) {
        let stats = &self.target.stats;
        if error.is_oversized() {
            KvEventStats::bump(&stats.oversized_replay);
        }
        if matches!(error, ReplayError::Abandoned { .. }) {
            KvEventStats::bump(&stats.replays_abandoned);
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
        if let Some(replay) = stream.replay.as_mut() {
            KvEventStats::bump(&stats.replay_requests);
            // The missing batches are applied as they arrive, while they come in order;
            // if any is missing the entries are dropped below anyway.
            let mut next = from;
            let mut in_order = true;
            let result = replay
                .fetch(from, |seq, payload| {
                    if !in_order || !(from..to).contains(&seq) {
                        return;
                    }
                    if seq != next {
                        in_order = false;
                        return;
                    }
                    next += 1;
                    if self.target.apply(endpoint, &payload) {
                        KvEventStats::bump(&stats.replayed_batches);
                    }
                })
                .await;
            match result {
                Ok(_) if in_order && next == to => {
                    KvEventStats::bump(&stats.gaps_replayed);
                    tracing::info!(
                        endpoint = self.address,
                        from,
                        to,
                        "KV-event gap filled by replay"
                    );
                    return;
                }
                Ok(_) => {
                    tracing::warn!(
                        endpoint = self.address,
                        from,
                        to,
                        returned = next - from,
                        "KV-event replay no longer holds the missed batches"
                    );
                }
                Err(error) => {
                    self.count_replay_failure(&error);
                    tracing::warn!(endpoint = self.address, from, to, %error, "KV-event replay failed");
                }
            }
        }
        KvEventStats::bump(&stats.gaps_lost);
        tracing::warn!(endpoint = self.address, from, to, "KV-event batches lost");
        self.target.reset(endpoint, ResetReason::Gap);
    }
}
