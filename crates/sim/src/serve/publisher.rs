//! One server's KV-cache event publisher, speaking vLLM's `ZmqEventPublisher` protocol.
//!
//! - A ZeroMQ PUB socket: every engine step that produced events becomes one multipart
//!   message `[topic, seq, payload]`: the topic (`kv@<ip:port>@<model>`), the sequence number
//!   as 8 bytes big-endian (counting from 0 for each publisher: a restarted server starts
//!   again at 0), and the `KVEventBatch` encoded as msgpack
//!   ([`encode_batch`](shepherd_scheduler_core::kv_events::wire::encode_batch)).
//! - A ring of the last `buffer_steps` payloads, for replay.
//! - A ROUTER replay socket: a request `[identity, empty, start]` (what a REQ socket's
//!   request looks like at a ROUTER; `start` big-endian, unsigned) is answered with
//!   `[identity, empty, seq, payload]` for every buffered batch with `seq >= start`, in order,
//!   then `[identity, empty, -1 as 8 bytes, empty]` (with
//!   [`KvEventsConfig::replay_topic`], as the newest vLLM: `[identity, empty, topic, seq,
//!   payload]`, then `[identity, empty, empty, -1, empty]`). Other requests are ignored, as
//!   vLLM ignores them.
//!
//! The driver numbers the batches and hands them over through a bounded channel without ever
//! waiting: a batch that finds the channel full is dropped with its number spent, so a
//! subscriber sees the gap (vLLM drops at its PUB high-water mark the same way). Test hooks
//! ([`KvControl::drop_next`]) drop batches on purpose, into the replay buffer or not.

use std::collections::VecDeque;
use std::net::SocketAddr;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use axum::body::Bytes;
use futures_util::FutureExt;
use parking_lot::Mutex;
use shepherd_scheduler_core::kv_events::KvEventBatch;
use shepherd_scheduler_core::kv_events::wire::{self, Encoding, REPLAY_END};
use tokio::sync::{mpsc, oneshot};
use zeromq::prelude::*;
use zeromq::{PubSocket, RouterSocket, ZmqMessage};

use super::{KvEventsConfig, ServeError};

/// Where one server publishes its KV-cache events.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct KvEventEndpoints {
    /// The PUB socket's address.
    pub publish: SocketAddr,
    /// The ROUTER replay socket's address.
    pub replay: SocketAddr,
    /// The topic of every message: `kv@<ip:port of the HTTP address>@<model>`.
    pub topic: String,
}

impl KvEventEndpoints {
    /// The PUB endpoint as ZeroMQ writes it: `tcp://127.0.0.1:5557`.
    pub fn publish_endpoint(&self) -> String {
        format!("tcp://{}", self.publish)
    }

    /// The replay endpoint as ZeroMQ writes it: `tcp://127.0.0.1:5558`.
    pub fn replay_endpoint(&self) -> String {
        format!("tcp://{}", self.replay)
    }
}

/// Counters of one server's publisher since it (re)started.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct KvEventStats {
    /// Batches sent on the PUB socket.
    pub published: u64,
    /// Batches dropped because the publisher's queue was full (their numbers are spent).
    pub dropped_queue_full: u64,
    /// Batches held back by [`ServeHandle::drop_kv_batches`](super::ServeHandle::drop_kv_batches).
    pub dropped_on_purpose: u64,
    /// Replay requests answered.
    pub replays: u64,
}

/// What the driver, the publisher and the pool's handle share.
#[derive(Debug, Default)]
pub(crate) struct KvControl {
    plan: Mutex<DropPlan>,
    published: AtomicU64,
    dropped_queue_full: AtomicU64,
    dropped_on_purpose: AtomicU64,
    replays: AtomicU64,
}

#[derive(Debug, Default)]
struct DropPlan {
    remaining: u64,
    replayable: bool,
}

impl KvControl {
    /// The next `n` batches the publisher handles are not sent; with `replayable` they still
    /// go into the replay buffer. Replaces any plan still running.
    pub(crate) fn drop_next(&self, n: u64, replayable: bool) {
        *self.plan.lock() = DropPlan {
            remaining: n,
            replayable,
        };
    }

    /// Counts a batch the driver could not queue.
    pub(crate) fn queue_full(&self) {
        self.dropped_queue_full.fetch_add(1, Ordering::Relaxed);
    }

    /// The counters so far.
    pub(crate) fn stats(&self) -> KvEventStats {
        KvEventStats {
            published: self.published.load(Ordering::Relaxed),
            dropped_queue_full: self.dropped_queue_full.load(Ordering::Relaxed),
            dropped_on_purpose: self.dropped_on_purpose.load(Ordering::Relaxed),
            replays: self.replays.load(Ordering::Relaxed),
        }
    }

    /// Whether the batch about to be published goes out, and whether it is kept for replay.
    fn fate(&self) -> (bool, bool) {
        let mut plan = self.plan.lock();
        if plan.remaining == 0 {
            return (true, true);
        }
        plan.remaining -= 1;
        (false, plan.replayable)
    }
}

/// One numbered batch on its way to the publisher.
pub(crate) type Numbered = (u64, KvEventBatch);

/// The bound sockets and the replay buffer of one server.
pub(crate) struct Publisher {
    publish: PubSocket,
    replay: RouterSocket,
    topic: Bytes,
    encoding: Encoding,
    buffer: VecDeque<(u64, Bytes)>,
    buffer_steps: usize,
    replay_topic: bool,
    control: Arc<KvControl>,
}

impl std::fmt::Debug for Publisher {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Publisher")
            .field("topic", &self.topic)
            .field("encoding", &self.encoding)
            .field("buffered", &self.buffer.len())
            .finish_non_exhaustive()
    }
}

impl Publisher {
    /// Binds the PUB socket on `publish` and the ROUTER on `replay` (port 0: the OS picks)
    /// for the server whose HTTP address is `http`, serving `model`.
    pub(crate) async fn bind(
        http: SocketAddr,
        publish: SocketAddr,
        replay: SocketAddr,
        model: &str,
        config: &KvEventsConfig,
        control: Arc<KvControl>,
    ) -> Result<(Publisher, KvEventEndpoints), ServeError> {
        let mut pub_socket = PubSocket::new();
        let publish = adopt(&mut pub_socket, publish).await?;
        let mut router = RouterSocket::new();
        let replay = adopt(&mut router, replay).await?;
        let topic = wire::format_topic(&http.to_string(), model);
        let publisher = Publisher {
            publish: pub_socket,
            replay: router,
            topic: Bytes::from(topic.clone().into_bytes()),
            encoding: config.encoding,
            buffer: VecDeque::with_capacity(config.buffer_steps.min(1024)),
            buffer_steps: config.buffer_steps,
            replay_topic: config.replay_topic,
            control,
        };
        Ok((
            publisher,
            KvEventEndpoints {
                publish,
                replay,
                topic,
            },
        ))
    }

    /// Publishes the batches of `batches` and answers replay requests until `shutdown`
    /// fires or the driver is gone; then closes both sockets (their ports are free once this
    /// returns).
    pub(crate) async fn run(
        mut self,
        mut batches: mpsc::Receiver<Numbered>,
        mut shutdown: oneshot::Receiver<()>,
    ) {
        loop {
            tokio::select! {
                biased;
                _ = &mut shutdown => break,
                batch = batches.recv() => match batch {
                    Some((seq, batch)) => self.publish(seq, &batch).await,
                    None => break,
                },
                request = self.replay.recv() => match request {
                    Ok(request) => self.serve_replay(request).await,
                    // No peer can be read right now: do not spin.
                    Err(_) => tokio::time::sleep(Duration::from_millis(10)).await,
                },
            }
        }
        let _ = self.publish.close().await;
        let _ = self.replay.close().await;
    }

    async fn publish(&mut self, seq: u64, batch: &KvEventBatch) {
        let mut payload = Vec::new();
        wire::encode_batch(batch, self.encoding, &mut payload);
        let payload = Bytes::from(payload);
        let (send, keep) = self.control.fate();
        if send {
            let mut message = ZmqMessage::from(self.topic.clone());
            message.push_back(sequence(seq));
            message.push_back(payload.clone());
            // A PUB socket never waits: without subscribers, or for a slow one, it drops.
            let _ = self.publish.send(message).await;
            self.control.published.fetch_add(1, Ordering::Relaxed);
        } else {
            self.control
                .dropped_on_purpose
                .fetch_add(1, Ordering::Relaxed);
        }
        if keep && self.buffer_steps > 0 {
            if self.buffer.len() >= self.buffer_steps {
                self.buffer.pop_front();
            }
            self.buffer.push_back((seq, payload));
        }
    }

    async fn serve_replay(&mut self, request: ZmqMessage) {
        let frames = request.into_vec();
        let [identity, _delimiter, start] = frames.as_slice() else {
            return;
        };
        let start = replay_start(start);
        self.control.replays.fetch_add(1, Ordering::Relaxed);
        for (seq, payload) in self.buffer.iter().filter(|(seq, _)| *seq >= start) {
            let mut reply = ZmqMessage::from(identity.clone());
            reply.push_back(Bytes::new());
            if self.replay_topic {
                reply.push_back(self.topic.clone());
            }
            reply.push_back(sequence(*seq));
            reply.push_back(payload.clone());
            if self.replay.send(reply).await.is_err() {
                // The client is gone.
                return;
            }
        }
        let mut end = ZmqMessage::from(identity.clone());
        end.push_back(Bytes::new());
        if self.replay_topic {
            end.push_back(Bytes::new());
        }
        end.push_back(Bytes::copy_from_slice(&wire::encode_sequence(REPLAY_END)));
        end.push_back(Bytes::new());
        let _ = self.replay.send(end).await;
    }
}

/// A sequence frame: 8 bytes, big-endian.
fn sequence(seq: u64) -> Bytes {
    Bytes::copy_from_slice(&seq.to_be_bytes())
}

/// The first sequence number a replay request asks for: its frame read as a big-endian
/// unsigned integer, as vLLM reads it (`int.from_bytes(frame, "big")`); a number past `u64`
/// asks for nothing.
fn replay_start(frame: &[u8]) -> u64 {
    let digits = match frame.iter().position(|&b| b != 0) {
        Some(first) => &frame[first..],
        None => return 0,
    };
    if digits.len() > 8 {
        return u64::MAX;
    }
    digits.iter().fold(0, |n, &b| (n << 8) | u64::from(b))
}

/// Binds a TCP listener on `addr` and hands it to `socket`; returns the bound address.
async fn adopt<S: Socket>(socket: &mut S, addr: SocketAddr) -> Result<SocketAddr, ServeError> {
    let bind_error = |source| ServeError::Bind { addr, source };
    let listener = std::net::TcpListener::bind(addr).map_err(bind_error)?;
    let bound = listener.local_addr().map_err(bind_error)?;
    socket
        .bind_listener(listener)
        .await
        .map_err(|e| ServeError::KvEvents {
            addr: bound,
            reason: e.to_string(),
        })?;
    Ok(bound)
}

/// Waits for the publisher task `task` to close its sockets after `shutdown` is sent, or
/// aborts it after a second.
pub(crate) async fn stop(task: tokio::task::JoinHandle<()>, shutdown: oneshot::Sender<()>) {
    let _ = shutdown.send(());
    let mut task = task;
    let finished = tokio::time::timeout(Duration::from_secs(1), &mut task)
        .map(|r| r.is_ok())
        .await;
    if !finished {
        task.abort();
        let _ = task.await;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn replay_start_reads_big_endian_unsigned() {
        assert_eq!(replay_start(&5u64.to_be_bytes()), 5);
        assert_eq!(replay_start(&[]), 0);
        assert_eq!(replay_start(&[1, 0]), 256);
        assert_eq!(replay_start(&(-1i64).to_be_bytes()), u64::MAX);
        assert_eq!(replay_start(&[0, 0, 0, 0, 0, 0, 0, 0, 0, 7]), 7);
        assert_eq!(replay_start(&[1, 0, 0, 0, 0, 0, 0, 0, 0]), u64::MAX);
    }

    #[test]
    fn drop_plan_counts_down() {
        let control = KvControl::default();
        assert_eq!(control.fate(), (true, true));
        control.drop_next(2, true);
        assert_eq!(control.fate(), (false, true));
        assert_eq!(control.fate(), (false, true));
        assert_eq!(control.fate(), (true, true));
        control.drop_next(1, false);
        assert_eq!(control.fate(), (false, false));
        assert_eq!(control.fate(), (true, true));
    }
}
