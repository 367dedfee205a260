//! One simulated server's state, and the task that drives its engine in real time.
//!
//! The driver task owns the [`Engine`]. Handlers hand it [`Command`]s through a bounded
//! channel: [`Submission`]s, each with a bounded channel of [`Update`]s back to the handler,
//! and prefix-cache resets. Whenever work exists the driver runs a step:
//! [`Engine::begin_step`], a sleep of the step's simulated duration divided by the speed
//! factor (`tokio::time`, so tests can pause time), then [`Engine::finish_step`], and it sends
//! each request the tokens that step produced (one update per step that produced a token: the
//! first after the prefill, then one per decode).
//! Submissions that arrive during a step join the queue at once, so the waiting gauge sees
//! them. A request whose handler went away (the client disconnected) is aborted in the engine
//! before the next step.
//!
//! With KV-cache events on, the driver drains the engine's events after each step (and after
//! a prefix-cache reset), numbers the batch, and hands it to the server's publisher task
//! ([`super::publisher`]) without waiting: when the publisher's queue is full the batch is
//! dropped, counted, and its number spent.
//!
//! The pace keeps simulated time at `speed` × wall time since the server last became busy:
//! a late step is followed by the next one at once, so short sleeps that the timer rounds up
//! do not slow a fast simulation down.

use std::net::SocketAddr;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::time::{Duration, SystemTime};

use ahash::AHashMap;
use parking_lot::Mutex;
use shepherd_scheduler_core::kv_events::{KvEvent, KvEventBatch};
use tokio::sync::{mpsc, oneshot};
use tokio::time::Instant;

use crate::engine::{Engine, EngineEvent, EngineRequest, EngineSnapshot, EngineStats};

use super::ServeConfig;
use super::pd_counters::PdCounters;
use super::publisher::{KvControl, Numbered};

/// What the driver tells a request's handler.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Update {
    /// This many new output tokens (one per step, more only when a step's tokens are flushed
    /// at the end).
    Tokens(u32),
    /// The request finished: every token has been sent.
    Done {
        /// Prompt tokens found in the prefix cache.
        cached_tokens: u32,
    },
    /// The engine refused the request.
    Failed(String),
}

/// A request handed to the driver.
#[derive(Debug)]
pub(crate) struct Submission {
    /// What the engine runs (its id is unique on this server).
    pub(crate) request: EngineRequest,
    /// Whether the request ends by reaching its `max_tokens` (for `vllm:request_success`).
    pub(crate) ends_by_length: bool,
    /// Where its tokens go; capacity `output_len + 2`, so the driver never has to wait.
    pub(crate) updates: mpsc::Sender<Update>,
    /// Its prompt's KV was read from a remote prefill
    /// ([`Engine::add_transferred`]).
    pub(crate) transferred: bool,
}

/// What handlers ask of the driver.
#[derive(Debug)]
pub(crate) enum Command {
    /// Run this request.
    Submit(Submission),
    /// Reset the prefix cache (`POST /reset_prefix_cache`); the answer says whether it did.
    ResetPrefixCache(oneshot::Sender<bool>),
    /// How many leading blocks of these hashes the prefix cache holds.
    CachedPrefix(Vec<u64>, oneshot::Sender<usize>),
}

/// Where the driver sends its KV-cache event batches.
#[derive(Debug)]
pub(crate) struct KvSink {
    /// The publisher's queue.
    pub(crate) batches: mpsc::Sender<Numbered>,
    /// Counters shared with the publisher.
    pub(crate) control: Arc<KvControl>,
}

/// What `/metrics` reports, as of the driver's last step.
#[derive(Debug, Clone, Copy, PartialEq)]
pub(crate) struct Gauges {
    /// Queue, batch and KV usage.
    pub(crate) snapshot: EngineSnapshot,
    /// Lifetime counters.
    pub(crate) stats: EngineStats,
    /// Requests finished because they reached `max_tokens`.
    pub(crate) finished_length: u64,
    /// Requests finished at their natural (default) length.
    pub(crate) finished_stop: u64,
    /// Requests aborted because their client went away.
    pub(crate) aborted: u64,
}

/// State one server's handlers and its driver share.
#[derive(Debug)]
pub(crate) struct Shared {
    /// The server's position in the pool.
    pub(crate) index: usize,
    /// Where it listens.
    pub(crate) addr: SocketAddr,
    /// The pool's configuration.
    pub(crate) config: Arc<ServeConfig>,
    gauges: Mutex<Gauges>,
    pending: AtomicUsize,
    next_id: AtomicU64,
    /// Prefill/decode counters.
    pub(crate) pd: PdCounters,
}

impl Shared {
    /// State of server `index` listening on `addr`, before its first step.
    pub(crate) fn new(index: usize, addr: SocketAddr, config: Arc<ServeConfig>) -> Self {
        let engine = Engine::new(config.engine);
        Shared {
            index,
            addr,
            gauges: Mutex::new(Gauges {
                snapshot: engine.snapshot(),
                stats: engine.stats(),
                finished_length: 0,
                finished_stop: 0,
                aborted: 0,
            }),
            config,
            pending: AtomicUsize::new(0),
            next_id: AtomicU64::new(1),
            pd: PdCounters::default(),
        }
    }

    /// The latest gauges.
    pub(crate) fn gauges(&self) -> Gauges {
        *self.gauges.lock()
    }

    /// A fresh request id.
    pub(crate) fn next_id(&self) -> u64 {
        self.next_id.fetch_add(1, Ordering::Relaxed)
    }

    /// Counts one more request held by this server, or `None` when it already holds
    /// `max_pending`. The request stops counting when the returned ticket is dropped.
    pub(crate) fn admit(self: &Arc<Self>) -> Option<Ticket> {
        let held = self.pending.fetch_add(1, Ordering::AcqRel);
        if held >= self.config.max_pending {
            self.pending.fetch_sub(1, Ordering::AcqRel);
            return None;
        }
        Some(Ticket(Arc::clone(self)))
    }
}

/// One request counted against `max_pending` until dropped.
#[derive(Debug)]
pub(crate) struct Ticket(Arc<Shared>);

impl Drop for Ticket {
    fn drop(&mut self) {
        self.0.pending.fetch_sub(1, Ordering::AcqRel);
    }
}

struct Live {
    updates: mpsc::Sender<Update>,
    output_len: u32,
    sent: u32,
    ends_by_length: bool,
}

/// Keeps simulated time at `speed` × wall time since the engine last became busy.
struct Pace {
    speed: f64,
    anchor: Instant,
    simulated: u64,
}

impl Pace {
    /// Longest the driver may fall behind before it stops catching up.
    const MAX_LAG: Duration = Duration::from_millis(50);

    fn restart(&mut self) {
        self.anchor = Instant::now();
        self.simulated = 0;
    }

    /// When a step of `nanos` simulated nanoseconds that starts now should end.
    fn step_end(&mut self, nanos: u64) -> Instant {
        let now = Instant::now();
        let behind = now.saturating_duration_since(self.wall(self.simulated));
        if behind > Self::MAX_LAG {
            self.restart();
        }
        self.simulated = self.simulated.saturating_add(nanos);
        self.wall(self.simulated)
    }

    fn wall(&self, simulated: u64) -> Instant {
        let wall = Duration::try_from_secs_f64(simulated as f64 / 1e9 / self.speed)
            .unwrap_or(Duration::MAX);
        self.anchor
            .checked_add(wall)
            .unwrap_or_else(|| self.anchor + Duration::from_secs(86_400 * 365))
    }
}

/// Runs server `shared`'s engine until every sender of `submissions` is gone, publishing its
/// KV-cache events to `kv` when given.
pub(crate) async fn drive(
    shared: Arc<Shared>,
    mut submissions: mpsc::Receiver<Command>,
    kv: Option<KvSink>,
) {
    let mut engine = Engine::new(shared.config.engine);
    if kv.is_some() {
        engine.enable_kv_events();
    }
    let mut driver = Driver {
        engine,
        live: AHashMap::new(),
        gauges: shared.gauges(),
        now: 0,
        kv: kv.map(|sink| KvOut {
            sink,
            next_seq: 0,
            events: Vec::new(),
        }),
    };
    let mut pace = Pace {
        speed: shared.config.speed,
        anchor: Instant::now(),
        simulated: 0,
    };
    loop {
        if !driver.engine.has_work() {
            let Some(first) = submissions.recv().await else {
                return;
            };
            driver.submit(first);
            pace.restart();
        }
        while let Ok(next) = submissions.try_recv() {
            driver.submit(next);
        }
        driver.abort_abandoned();
        let Some(nanos) = driver.engine.begin_step(driver.now) else {
            // Work exists but nothing can run (every live request was just aborted, or
            // nothing fits): wait for the next submission.
            driver.publish(&shared);
            if !driver.engine.has_work() {
                continue;
            }
            let Some(next) = submissions.recv().await else {
                return;
            };
            driver.submit(next);
            continue;
        };
        driver.publish(&shared);
        let end = pace.step_end(nanos);
        let mut open = true;
        while open {
            tokio::select! {
                biased;
                () = tokio::time::sleep_until(end) => break,
                next = submissions.recv() => match next {
                    Some(next) => {
                        driver.submit(next);
                        driver.publish(&shared);
                    }
                    None => open = false,
                },
            }
        }
        if !open {
            tokio::time::sleep_until(end).await;
        }
        driver.now = driver.now.saturating_add(nanos);
        driver.engine.finish_step(driver.now);
        driver.send_kv_events();
        driver.deliver();
        driver.publish(&shared);
        if !open && driver.live.is_empty() {
            return;
        }
    }
}

struct Driver {
    engine: Engine,
    live: AHashMap<u64, Live>,
    gauges: Gauges,
    now: u64,
    kv: Option<KvOut>,
}

/// The driver's side of KV-event publishing.
struct KvOut {
    sink: KvSink,
    /// The next batch's sequence number.
    next_seq: u64,
    /// Scratch for the engine's events.
    events: Vec<KvEvent>,
}

impl Driver {
    fn submit(&mut self, command: Command) {
        match command {
            Command::Submit(s) => self.add(s),
            Command::ResetPrefixCache(reply) => {
                let reset = self.engine.reset_prefix_cache();
                self.send_kv_events();
                let _ = reply.send(reset);
            }
            Command::CachedPrefix(hashes, reply) => {
                let _ = reply.send(self.engine.cached_prefix_blocks(&hashes));
            }
        }
    }

    /// Hands the engine's KV-cache events since the last call to the publisher, as one
    /// numbered batch (nothing when there are none).
    fn send_kv_events(&mut self) {
        let Some(kv) = &mut self.kv else {
            return;
        };
        self.engine.drain_kv_events(&mut kv.events);
        if kv.events.is_empty() {
            return;
        }
        let ts = SystemTime::now()
            .duration_since(SystemTime::UNIX_EPOCH)
            .map_or(0.0, |d| d.as_secs_f64());
        let batch = KvEventBatch {
            ts,
            events: std::mem::take(&mut kv.events),
            data_parallel_rank: Some(0),
        };
        let seq = kv.next_seq;
        kv.next_seq += 1;
        if kv.sink.batches.try_send((seq, batch)).is_err() {
            kv.sink.control.queue_full();
        }
    }

    fn add(&mut self, s: Submission) {
        if s.updates.is_closed() {
            return;
        }
        let id = s.request.id;
        let output_len = s.request.output_len;
        let added = if s.transferred {
            self.engine.add_transferred(s.request, self.now)
        } else {
            self.engine.add_request(s.request, self.now)
        };
        match added {
            Ok(()) => {
                self.live.insert(
                    id,
                    Live {
                        updates: s.updates,
                        output_len,
                        sent: 0,
                        ends_by_length: s.ends_by_length,
                    },
                );
            }
            Err(e) => {
                let _ = s.updates.try_send(Update::Failed(e.to_string()));
            }
        }
    }

    /// Aborts every request whose handler is gone.
    fn abort_abandoned(&mut self) {
        let engine = &mut self.engine;
        let aborted = &mut self.gauges.aborted;
        self.live.retain(|&id, live| {
            if live.updates.is_closed() {
                engine.abort(id);
                *aborted += 1;
                false
            } else {
                true
            }
        });
    }

    /// Sends each request the tokens the last step produced, and finishes the finished.
    fn deliver(&mut self) {
        let mut finished = AHashMap::new();
        for event in self.engine.drain_events() {
            if let EngineEvent::Finished {
                id, cached_tokens, ..
            } = event
            {
                finished.insert(id, cached_tokens);
            }
        }
        let engine = &mut self.engine;
        let gauges = &mut self.gauges;
        self.live.retain(|&id, live| {
            let done = finished.get(&id).copied();
            let generated = match done {
                Some(_) => live.output_len,
                None => engine.generated_tokens(id).unwrap_or(live.sent),
            };
            let mut open = true;
            if generated > live.sent {
                open = live
                    .updates
                    .try_send(Update::Tokens(generated - live.sent))
                    .is_ok();
                live.sent = generated;
            }
            match done {
                Some(cached_tokens) => {
                    let _ = live.updates.try_send(Update::Done { cached_tokens });
                    if live.ends_by_length {
                        gauges.finished_length += 1;
                    } else {
                        gauges.finished_stop += 1;
                    }
                    false
                }
                None if !open => {
                    engine.abort(id);
                    gauges.aborted += 1;
                    false
                }
                None => true,
            }
        });
    }

    fn publish(&mut self, shared: &Shared) {
        self.gauges.snapshot = self.engine.snapshot();
        self.gauges.stats = self.engine.stats();
        *shared.gauges.lock() = self.gauges;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn request(id: u64, prompt_len: u32, output_len: u32) -> EngineRequest {
        EngineRequest {
            id,
            prompt_len,
            output_len,
            block_hashes: (0..u64::from(prompt_len + output_len) / 16).collect(),
            tokens: None,
        }
    }

    fn server(speed: f64) -> (Arc<Shared>, mpsc::Sender<Command>) {
        let mut config = ServeConfig::ephemeral(1);
        config.speed = speed;
        let shared = Arc::new(Shared::new(0, config.addrs[0], Arc::new(config)));
        let (tx, rx) = mpsc::channel(8);
        tokio::spawn(drive(Arc::clone(&shared), rx, None));
        (shared, tx)
    }

    #[tokio::test(start_paused = true)]
    async fn tokens_arrive_on_engine_time_scaled_by_speed() {
        let (_shared, tx) = server(2.0);
        let (updates, mut rx) = mpsc::channel(8);
        let start = Instant::now();
        tx.send(Command::Submit(Submission {
            request: request(1, 100, 3),
            ends_by_length: true,
            updates,
            transferred: false,
        }))
        .await
        .unwrap();
        let mut at = Vec::new();
        while let Some(update) = rx.recv().await {
            at.push((update.clone(), start.elapsed()));
            if matches!(update, Update::Done { .. }) {
                break;
            }
        }
        let tokens: Vec<_> = at.iter().filter(|(u, _)| *u == Update::Tokens(1)).collect();
        assert_eq!(tokens.len(), 3, "{at:?}");
        // The 100-token prefill of an 8B/H100 takes ~7 ms of simulated time and a decode
        // step ~6.4 ms: ~3.5 and ~3.2 ms of wall time at speed 2 (the paused clock's timers
        // fire on whole milliseconds).
        let ttft = tokens[0].1;
        assert!(
            (Duration::from_micros(3000)..Duration::from_micros(4500)).contains(&ttft),
            "{ttft:?}"
        );
        let tpot = tokens[1].1 - tokens[0].1;
        assert!(
            (Duration::from_micros(2500)..Duration::from_micros(3500)).contains(&tpot),
            "{tpot:?}"
        );
    }

    #[tokio::test(start_paused = true)]
    async fn dropped_receiver_aborts_the_request() {
        let (shared, tx) = server(1.0);
        let (updates, rx) = mpsc::channel(1002);
        tx.send(Command::Submit(Submission {
            request: request(1, 100, 1000),
            ends_by_length: true,
            updates,
            transferred: false,
        }))
        .await
        .unwrap();
        tokio::time::sleep(Duration::from_millis(50)).await;
        assert_eq!(shared.gauges().snapshot.running, 1);
        drop(rx);
        tokio::time::sleep(Duration::from_millis(50)).await;
        let g = shared.gauges();
        assert_eq!((g.snapshot.running, g.snapshot.waiting), (0, 0));
        assert_eq!(g.snapshot.kv_utilization, 0.0);
    }

    #[tokio::test(start_paused = true)]
    async fn kv_event_batches_are_numbered_and_dropped_when_the_queue_is_full() {
        let config = ServeConfig::ephemeral(1);
        let shared = Arc::new(Shared::new(0, config.addrs[0], Arc::new(config)));
        let (tx, rx) = mpsc::channel(8);
        // Room for one batch: the prefill's store fits, later ones are dropped.
        let (batches, mut published) = mpsc::channel(1);
        let control = Arc::new(KvControl::default());
        let sink = KvSink {
            batches,
            control: Arc::clone(&control),
        };
        tokio::spawn(drive(Arc::clone(&shared), rx, Some(sink)));
        let tokens: Vec<u32> = (0..100).collect();
        let request = EngineRequest {
            id: 1,
            prompt_len: 80,
            output_len: 20,
            block_hashes: crate::workload::block_hashes(&tokens, 16),
            tokens: Some(Arc::from(tokens)),
        };
        let (updates, mut done) = mpsc::channel(32);
        tx.send(Command::Submit(Submission {
            request,
            ends_by_length: true,
            updates,
            transferred: false,
        }))
        .await
        .unwrap();
        while !matches!(done.recv().await, Some(Update::Done { .. }) | None) {}
        let (seq, batch) = published.recv().await.unwrap();
        assert_eq!(seq, 0);
        assert_eq!(batch.data_parallel_rank, Some(0));
        assert!(batch.ts > 1e9);
        let [KvEvent::BlockStored(stored)] = batch.events.as_slice() else {
            panic!("{batch:?}");
        };
        assert_eq!(stored.block_hashes.len(), 5);
        // The decode filled a sixth block: that batch found the queue full.
        assert_eq!(control.stats().dropped_queue_full, 1);

        // A reset while idle: AllBlocksCleared, numbered after the dropped batch.
        let (reply, answer) = oneshot::channel();
        tx.send(Command::ResetPrefixCache(reply)).await.unwrap();
        assert!(answer.await.unwrap());
        let (seq, batch) = published.recv().await.unwrap();
        assert_eq!(seq, 2);
        assert_eq!(batch.events, vec![KvEvent::AllBlocksCleared]);
    }

    #[test]
    fn admission_is_bounded() {
        let mut config = ServeConfig::ephemeral(1);
        config.max_pending = 2;
        let shared = Arc::new(Shared::new(0, config.addrs[0], Arc::new(config)));
        let a = shared.admit();
        let b = shared.admit();
        assert!(a.is_some() && b.is_some());
        assert!(shared.admit().is_none());
        drop(a);
        assert!(shared.admit().is_some());
    }
}
