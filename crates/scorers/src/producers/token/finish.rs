//! A background worker that finishes tokenizations after the pick, off the request path.
//!
//! A pick that stopped tokenizing early (no server holds the prompt's first block) still owes
//! the rest: the segment cache should learn the prompt (its next request, once a server holds
//! it, is then found there), and a speculative entry needs every block's key. The pick hook
//! hands that work here. One thread per tokenizer, started on first use, runs the jobs in
//! order; the queue is bounded by [`MAX_QUEUED_JOBS`] jobs and [`MAX_QUEUED_BYTES`] bytes of
//! text, and a job that does not fit is dropped and counted (that prompt is simply not
//! cached, nor speculated). The thread ends when its tokenizer is dropped.

use std::panic::{AssertUnwindSafe, catch_unwind};
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::mpsc::{Receiver, SyncSender, TrySendError, sync_channel};
use std::sync::{Arc, OnceLock};

use parking_lot::{Condvar, Mutex};

/// Most jobs waiting at once.
pub const MAX_QUEUED_JOBS: usize = 256;

/// Most bytes of text the waiting jobs may hold.
pub const MAX_QUEUED_BYTES: usize = 32 << 20;

type Job = Box<dyn FnOnce() + Send>;

/// What the worker did.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct FinishStats {
    /// Jobs run.
    pub finished: u64,
    /// Jobs dropped because the queue was full (or the worker could not start).
    pub dropped: u64,
    /// Jobs that panicked (caught; the worker goes on).
    pub panicked: u64,
}

#[derive(Debug, Default)]
struct Shared {
    queued_bytes: AtomicUsize,
    finished: AtomicU64,
    dropped: AtomicU64,
    panicked: AtomicU64,
    /// Jobs queued or running.
    pending: Mutex<usize>,
    idle: Condvar,
}

/// The worker and its queue (see the module docs).
#[derive(Debug, Default)]
pub(super) struct Finisher {
    sender: OnceLock<Option<SyncSender<(usize, Job)>>>,
    shared: Arc<Shared>,
}

impl Finisher {
    /// Queues `job`, which holds `bytes` of text; `false` when it was dropped.
    pub(super) fn submit(&self, bytes: usize, job: impl FnOnce() + Send + 'static) -> bool {
        let shared = &self.shared;
        let Some(sender) = self.sender.get_or_init(|| spawn(Arc::clone(shared))) else {
            shared.dropped.fetch_add(1, Ordering::Relaxed);
            return false;
        };
        let before = shared.queued_bytes.fetch_add(bytes, Ordering::Relaxed);
        if before.saturating_add(bytes) > MAX_QUEUED_BYTES {
            shared.queued_bytes.fetch_sub(bytes, Ordering::Relaxed);
            shared.dropped.fetch_add(1, Ordering::Relaxed);
            return false;
        }
        *shared.pending.lock() += 1;
        match sender.try_send((bytes, Box::new(job))) {
            Ok(()) => true,
            Err(TrySendError::Full(_) | TrySendError::Disconnected(_)) => {
                shared.queued_bytes.fetch_sub(bytes, Ordering::Relaxed);
                shared.dropped.fetch_add(1, Ordering::Relaxed);
                shared.done_one();
                false
            }
        }
    }

    /// The counts so far.
    pub(super) fn stats(&self) -> FinishStats {
        FinishStats {
            finished: self.shared.finished.load(Ordering::Relaxed),
            dropped: self.shared.dropped.load(Ordering::Relaxed),
            panicked: self.shared.panicked.load(Ordering::Relaxed),
        }
    }

    /// Waits until every queued job has run.
    pub(super) fn wait_idle(&self) {
        let mut pending = self.shared.pending.lock();
        while *pending > 0 {
            self.shared.idle.wait(&mut pending);
        }
    }
}

impl Shared {
    fn done_one(&self) {
        let mut pending = self.pending.lock();
        *pending = pending.saturating_sub(1);
        if *pending == 0 {
            self.idle.notify_all();
        }
    }
}

fn spawn(shared: Arc<Shared>) -> Option<SyncSender<(usize, Job)>> {
    let (sender, receiver) = sync_channel(MAX_QUEUED_JOBS);
    std::thread::Builder::new()
        .name("shepherd-tokenize".into())
        .spawn(move || run(&shared, &receiver))
        .ok()?;
    Some(sender)
}

fn run(shared: &Shared, receiver: &Receiver<(usize, Job)>) {
    while let Ok((bytes, job)) = receiver.recv() {
        shared.queued_bytes.fetch_sub(bytes, Ordering::Relaxed);
        if catch_unwind(AssertUnwindSafe(job)).is_err() {
            shared.panicked.fetch_add(1, Ordering::Relaxed);
        }
        shared.finished.fetch_add(1, Ordering::Relaxed);
        shared.done_one();
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]
    use super::*;

    #[test]
    fn runs_jobs_in_the_background_and_drops_what_does_not_fit() {
        let finisher = Finisher::default();
        let seen = Arc::new(AtomicU64::new(0));
        for _ in 0..10 {
            let seen = Arc::clone(&seen);
            assert!(finisher.submit(10, move || {
                seen.fetch_add(1, Ordering::Relaxed);
            }));
        }
        assert!(!finisher.submit(MAX_QUEUED_BYTES + 1, || {}));
        assert!(finisher.submit(0, || panic!("a bad job")));
        finisher.wait_idle();
        assert_eq!(seen.load(Ordering::Relaxed), 10);
        assert_eq!(
            finisher.stats(),
            FinishStats {
                finished: 11,
                dropped: 1,
                panicked: 1
            }
        );
        assert_eq!(finisher.shared.queued_bytes.load(Ordering::Relaxed), 0);
    }
}
