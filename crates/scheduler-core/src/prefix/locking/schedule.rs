//! A seeded scheduler for interleaving tests.
//!
//! [`run`] starts one OS thread per body but lets only one run at a time. At every
//! [`switch`] (each lock attempt of the index, and its other switch points) the running
//! thread hands over to a thread picked at random from the seed, possibly itself. A lock
//! attempt that fails lets another thread run and tries again, so a thread never blocks
//! inside a lock while the holder waits for its turn. The same seed replays the same
//! interleaving. A run fails when every thread still running waits for a lock (a deadlock),
//! or after [`MAX_SWITCHES`] switches (a livelock).

use std::cell::RefCell;
use std::sync::Arc;

use parking_lot::{Condvar, Mutex, MutexGuard};

/// Switches after which a run counts as stuck.
pub(crate) const MAX_SWITCHES: u64 = 1_000_000;

#[derive(Debug)]
struct State {
    /// The thread allowed to run.
    current: usize,
    /// Threads whose body returned (or panicked).
    done: Vec<bool>,
    /// Threads whose last lock attempt failed.
    waiting: Vec<bool>,
    /// xorshift64 state.
    rng: u64,
    switches: u64,
    /// A thread panicked: everyone stops.
    failed: bool,
}

impl State {
    /// A thread picked at random among those not done (`current` when all are).
    fn pick(&mut self) -> usize {
        let open = self.done.iter().filter(|d| !**d).count();
        if open == 0 {
            return self.current;
        }
        self.rng ^= self.rng << 13;
        self.rng ^= self.rng >> 7;
        self.rng ^= self.rng << 17;
        let nth = (self.rng % open as u64) as usize;
        self.done
            .iter()
            .enumerate()
            .filter(|(_, d)| !**d)
            .nth(nth)
            .map_or(self.current, |(i, _)| i)
    }
}

/// The scheduler shared by the threads of one run.
#[derive(Debug)]
pub(crate) struct Scheduler {
    state: Mutex<State>,
    turn: Condvar,
}

thread_local! {
    /// The scheduler of the run this thread belongs to, and the thread's number in it.
    static CURRENT: RefCell<Option<(Arc<Scheduler>, usize)>> = const { RefCell::new(None) };
}

/// Whether this thread runs under a scheduler.
pub(crate) fn active() -> bool {
    CURRENT.with(|c| c.borrow().is_some())
}

/// Lets the scheduler pick the thread to run next (nothing outside a run).
pub(crate) fn switch() {
    pass(false);
}

/// [`switch`], telling the scheduler whether this thread waits for a lock.
fn pass(waiting: bool) {
    let current = CURRENT.with(|c| c.borrow().clone());
    if let Some((scheduler, me)) = current {
        scheduler.switch(me, waiting);
    }
}

/// Tries `attempt` at switch points until it succeeds.
pub(crate) fn acquire<G>(mut attempt: impl FnMut() -> Option<G>) -> G {
    let mut waiting = false;
    loop {
        pass(waiting);
        if let Some(guard) = attempt() {
            if waiting {
                let current = CURRENT.with(|c| c.borrow().clone());
                if let Some((scheduler, me)) = current {
                    scheduler.state.lock().waiting[me] = false;
                }
            }
            return guard;
        }
        waiting = true;
    }
}

impl Scheduler {
    fn switch(&self, me: usize, waiting: bool) {
        let mut state = self.state.lock();
        state.switches += 1;
        state.waiting[me] = waiting;
        let stuck = (0..state.done.len()).all(|i| state.done[i] || state.waiting[i]);
        if stuck || state.switches > MAX_SWITCHES {
            state.failed = true;
            self.turn.notify_all();
            drop(state);
            if stuck {
                panic!("deadlock: every running thread waits for a lock");
            }
            panic!("no progress after {MAX_SWITCHES} switches: livelock");
        }
        state.current = state.pick();
        if state.current != me {
            self.turn.notify_all();
        }
        self.wait_for(me, state);
    }

    fn wait_for(&self, me: usize, mut state: MutexGuard<'_, State>) {
        while state.current != me && !state.failed {
            self.turn.wait(&mut state);
        }
        if state.failed {
            drop(state);
            panic!("another thread of the schedule failed");
        }
    }

    fn finish(&self, me: usize, panicked: bool) {
        let mut state = self.state.lock();
        state.done[me] = true;
        state.failed |= panicked;
        state.current = state.pick();
        self.turn.notify_all();
    }
}

/// Marks a thread done when its body returns or unwinds.
struct Finish<'a> {
    scheduler: &'a Scheduler,
    me: usize,
    seed: u64,
}

impl Drop for Finish<'_> {
    fn drop(&mut self) {
        let panicked = std::thread::panicking();
        if panicked {
            eprintln!("schedule seed {}: thread {} failed", self.seed, self.me);
        }
        self.scheduler.finish(self.me, panicked);
    }
}

/// Runs `bodies` on threads of their own, interleaved at switch points as `seed` decides;
/// returns once all are done. Panics (after every thread stopped) if one of them panicked or
/// the run got stuck.
pub(crate) fn run<'a>(seed: u64, bodies: Vec<Box<dyn FnOnce() + Send + 'a>>) {
    let mut state = State {
        current: 0,
        done: vec![false; bodies.len()],
        waiting: vec![false; bodies.len()],
        // xorshift must not start at zero.
        rng: seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1,
        switches: 0,
        failed: false,
    };
    state.current = state.pick();
    let scheduler = Arc::new(Scheduler {
        state: Mutex::new(state),
        turn: Condvar::new(),
    });
    std::thread::scope(|scope| {
        for (me, body) in bodies.into_iter().enumerate() {
            let scheduler = Arc::clone(&scheduler);
            scope.spawn(move || {
                CURRENT.with(|c| *c.borrow_mut() = Some((Arc::clone(&scheduler), me)));
                let _finish = Finish {
                    scheduler: &scheduler,
                    me,
                    seed,
                };
                let state = scheduler.state.lock();
                scheduler.wait_for(me, state);
                body();
            });
        }
    });
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::{AtomicUsize, Ordering};

    /// The order in which two threads pass their switch points, for one seed.
    fn trace(seed: u64) -> Vec<usize> {
        let log = Mutex::new(Vec::new());
        let bodies: Vec<Box<dyn FnOnce() + Send + '_>> = (0..2)
            .map(|t| {
                let log = &log;
                Box::new(move || {
                    for _ in 0..20 {
                        log.lock().push(t);
                        switch();
                    }
                }) as Box<dyn FnOnce() + Send + '_>
            })
            .collect();
        run(seed, bodies);
        log.into_inner()
    }

    #[test]
    fn a_seed_replays_its_interleaving_and_seeds_differ() {
        assert_eq!(trace(7), trace(7));
        assert!((0..20).any(|seed| trace(seed) != trace(7)));
    }

    #[test]
    fn a_deadlock_is_reported() {
        let (a, b) = (Mutex::new(()), Mutex::new(()));
        let mut caught = 0;
        for seed in 0..20 {
            let bodies: Vec<Box<dyn FnOnce() + Send + '_>> = [(&a, &b), (&b, &a)]
                .into_iter()
                .map(|(first, second)| {
                    Box::new(move || {
                        let _first = acquire(|| first.try_lock());
                        let _second = acquire(|| second.try_lock());
                    }) as Box<dyn FnOnce() + Send + '_>
                })
                .collect();
            let outcome =
                std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| run(seed, bodies)));
            caught += usize::from(outcome.is_err());
        }
        // Some schedules let one thread take both locks first; the others deadlock.
        assert!(caught > 0 && caught < 20, "{caught}");
    }

    #[test]
    fn a_thread_waiting_for_a_lock_lets_the_holder_run() {
        let lock = Mutex::new(0u32);
        let done = AtomicUsize::new(0);
        for seed in 0..50 {
            let bodies: Vec<Box<dyn FnOnce() + Send + '_>> = (0..3)
                .map(|_| {
                    let (lock, done) = (&lock, &done);
                    Box::new(move || {
                        for _ in 0..5 {
                            let mut guard = acquire(|| lock.try_lock());
                            switch();
                            *guard += 1;
                        }
                        done.fetch_add(1, Ordering::Relaxed);
                    }) as Box<dyn FnOnce() + Send + '_>
                })
                .collect();
            run(seed, bodies);
        }
        assert_eq!(*lock.lock(), 50 * 15);
        assert_eq!(done.load(Ordering::Relaxed), 150);
    }
}
