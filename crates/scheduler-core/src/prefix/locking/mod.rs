//! The index's locks: what each protects, the order they are taken in, why that cannot
//! deadlock, and how an insert racing the removal of its endpoint settles.
//!
//! # The locks
//!
//! | lock | protects | held for |
//! | --- | --- | --- |
//! | the endpoint registry: an `ArcSwap` of the live map, and its write `Mutex` | which endpoints the index knows (id → per-endpoint state); the mutex also guards the retired ids (kept in bounded space, see `retired`) | reads: none (a lock-free load); changes: one read-copy-swap of the map, once per batch of removals |
//! | one `Mutex` per endpoint (its [`EndpointBlocks`](super::endpoint_blocks::EndpointBlocks)) | the endpoint's eviction queue, its counts (`live`, `evicting`, `deficit`), its capacity and its `retired` flag | queue and count work, and the table removals of `remove_blocks`, compaction and removal |
//! | one `RwLock` per shard (its `BlockTable`) | the shard's slots, interned holder sets and runs | a lookup: one read lock for the whole walk; a writer: a stretch of keys in that shard |
//!
//! The tables and the bookkeeping are deliberately under different locks: an insert writes
//! the tables with its endpoint unlocked, so picks that send requests to the same endpoint
//! overlap, and a lookup never touches an endpoint lock at all. The counters behind
//! `PrefixIndex::stats` are relaxed atomics with no lock of their own, moved under the
//! endpoint lock the caller already holds (never by a lookup).
//!
//! # The order
//!
//! 1. The registry write mutex is a leaf: nothing else is locked while it is held. It is
//!    taken to add an endpoint on its first insert, and to retire endpoints: record their
//!    ids, swap in the map without them, release, and only then lock each removed
//!    endpoint's own mutex to clear its entries.
//! 2. An endpoint mutex may be held while shard locks are taken (`remove_blocks`,
//!    compaction, `remove_endpoint`), never the other way round: an insert drops its shard
//!    guard before it locks the endpoint, and the eviction clock runs over its batch with
//!    the endpoint *unlocked*, relocking it afterwards.
//! 3. At most one shard lock is held at a time (a writer's shard guard switches shards by
//!    dropping the guard first), and at most one endpoint mutex (the whole-index queries
//!    lock the endpoints one after another).
//!
//! So every thread takes locks in the order *endpoint, then shard*, holds at most one of
//! each kind, and takes the registry mutex only with nothing else held: the wait-for graph
//! has no cycle, and no set of threads can deadlock. Lookups take a single read lock and
//! nothing else.
//!
//! # What stays true
//!
//! - `live` counts the endpoint's entries that inserts have *counted*: an insert adds to the
//!   tables first and counts under the endpoint lock afterwards. An entry removed before its
//!   insert counted it goes to `deficit`, settled when the insert counts.
//! - Every counted entry is either in the endpoint's queue or in an eviction batch in flight
//!   (`evicting` of them), so the clock reaches every entry and capacity holds once every
//!   eviction has finished.
//! - `retired` is set once, under the endpoint lock, after the registry has dropped the
//!   endpoint, and never cleared.
//!
//! # An insert racing the removal of its endpoint
//!
//! - The insert loaded the registry after the removal swapped it: the id is not live, the
//!   insert takes the registry mutex to add it and finds it retired; nothing is written.
//! - The insert loaded the endpoint's state before the swap and writes the tables; then
//!   whichever of the two locks the endpoint first:
//!   - the removal: it sets `retired` and removes every queued entry. The insert then finds
//!     `retired` and removes the entries it added itself (its other keys were queued
//!     already, so the removal took them).
//!   - the insert: it queues and counts its entries as usual, and the removal, next, takes
//!     them all off the queue.
//! - An eviction in flight (its batch off the queue, the endpoint unlocked) relocks, finds
//!   `retired`, and removes the entries the clock kept.
//! - `remove_blocks` holding a stale state finds it retired and does nothing;
//!   `set_capacity` sets a capacity nobody reads and evicts nothing (the clock stops at
//!   `retired`).
//!
//! Either way nothing of the endpoint remains once the racing calls return.
//!
//! # Testing the protocol
//!
//! Every lock of the index is taken through [`lock()`], [`read()`] and [`write()`], and a few other
//! places call [`switch_point`]. Outside tests these are the plain `parking_lot` calls and
//! nothing. In the crate's tests they are the points where the seeded scheduler of
//! `schedule` may switch threads: it runs one thread at a time and, at every such point,
//! picks the next at random from a seed, while lock attempts that would block let the others
//! run instead, so each seed is one reproducible interleaving (`tests/interleavings.rs`
//! runs a thousand, and the scheduler reports a deadlock when every thread waits for a
//! lock).

use parking_lot::{Mutex, MutexGuard, RwLock, RwLockReadGuard, RwLockWriteGuard};

#[cfg(test)]
pub(crate) mod schedule;

/// Locks `mutex` (in tests, a point where the scheduler may switch threads).
#[inline]
pub(crate) fn lock<T>(mutex: &Mutex<T>) -> MutexGuard<'_, T> {
    #[cfg(test)]
    if schedule::active() {
        return schedule::acquire(|| mutex.try_lock());
    }
    mutex.lock()
}

/// Takes a read lock on `lock` (in tests, a point where the scheduler may switch threads).
#[inline]
pub(crate) fn read<T>(lock: &RwLock<T>) -> RwLockReadGuard<'_, T> {
    #[cfg(test)]
    if schedule::active() {
        return schedule::acquire(|| lock.try_read());
    }
    lock.read()
}

/// Takes a write lock on `lock` (in tests, a point where the scheduler may switch threads).
#[inline]
pub(crate) fn write<T>(lock: &RwLock<T>) -> RwLockWriteGuard<'_, T> {
    #[cfg(test)]
    if schedule::active() {
        return schedule::acquire(|| lock.try_write());
    }
    lock.write()
}

/// A point where the test scheduler may switch threads; nothing outside tests.
#[inline(always)]
pub(crate) fn switch_point() {
    #[cfg(test)]
    schedule::switch();
}
