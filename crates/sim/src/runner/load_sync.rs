//! Picker replicas exchanging their in-flight counts (`simulation.replicaLoadSyncMs`).
//!
//! Every period each replica learns what the others have in flight on every server, as of
//! that moment, and stores it on its endpoints ([`Endpoint::set_peer_load`]); between
//! exchanges its own counts stay exact and the peers' go stale, as with a real exchange over
//! the network every period. A period of 0 exchanges before every pick: no real exchange can
//! do that (two replicas picking at the same instant cannot see each other's picks), so it is
//! a bound.
//!
//! With precise indexes that record speculative entries, the exchange also carries each
//! pick's speculation (the request's block keys on the picked server) to the other replicas,
//! one period after the pick (at once with a period of 0): the index deltas that cover the
//! time before the engine's events, which every replica hears anyway.
//!
//! With `simulation.replicaIndexSync` it also carries each pick's approximate-index insert
//! (the request's block keys on the picked server, as the picking replica recorded them) to the
//! other replicas' approximate indexes, one period after the pick: the index deltas of an
//! approximate policy.
//!
//! With `simulation.replicaMediumDelayUs` every exchange also takes that long on its way (a
//! load snapshot arrives that much after it was taken, a delta that much after its period):
//! the Redis medium's write-to-read delivery.
//!
//! [`Endpoint::set_peer_load`]: shepherd_scheduler_core::endpoint::Endpoint::set_peer_load

use ahash::AHashMap;
use shepherd_scheduler_core::endpoint::PeerLoad;
use shepherd_scheduler_core::kv_events::precise_seed;
use shepherd_scheduler_core::prefix::{BlockKey, ChainLink, chain_seed};
use shepherd_scheduler_core::request::Prompt;

use super::Sim;
use super::events::Event;

/// Speculative entries on their way from the replica that picked to the others.
#[derive(Debug, Default)]
pub(super) struct Deltas {
    pending: AHashMap<u64, Delta>,
    next: u64,
    /// Load snapshots on their way (with a medium delay), by number.
    loads: AHashMap<u64, Vec<Vec<PeerLoad>>>,
}

/// One pick's index delta, for the other replicas: the server, the request's block keys per
/// precise index (its position in a replica's `precise` list; empty without speculation) and
/// per approximate index (its position in `approximate`; empty without index sync).
#[derive(Debug)]
struct Delta {
    from: u32,
    server: u32,
    keys: Vec<Vec<BlockKey>>,
    approximate: Vec<Vec<BlockKey>>,
}

impl Sim<'_> {
    /// One exchange: every replica's endpoints get the other replicas' counts.
    pub(super) fn sync_replica_loads(&self) {
        let own = self.replica_loads();
        self.apply_replica_loads(&own);
    }

    /// One periodic exchange at `now`: applied at once, or after the medium's delay.
    pub(super) fn send_replica_loads(&mut self, now: u64) {
        if self.medium_delay_ns == 0 {
            self.sync_replica_loads();
            return;
        }
        let own = self.replica_loads();
        let id = self.deltas.next;
        self.deltas.next += 1;
        self.deltas.loads.insert(id, own);
        self.queue
            .push(now + self.medium_delay_ns, Event::LoadArrives(id));
    }

    /// A snapshot sent a medium's delay ago arrives.
    pub(super) fn on_loads_arrive(&mut self, id: u64) {
        if let Some(own) = self.deltas.loads.remove(&id) {
            self.apply_replica_loads(&own);
        }
    }

    /// Every replica's own counts per server, now.
    fn replica_loads(&self) -> Vec<Vec<PeerLoad>> {
        self.replicas
            .iter()
            .map(|r| {
                r.endpoints
                    .iter()
                    .map(|e| PeerLoad {
                        requests: e.in_flight_requests(),
                        prompt_tokens: e.in_flight_prompt_tokens(),
                        prefill_tokens: e.pending_prefill_tokens(),
                    })
                    .collect()
            })
            .collect()
    }

    /// Stores on every replica's endpoints the others' counts of the snapshot `own`.
    fn apply_replica_loads(&self, own: &[Vec<PeerLoad>]) {
        let servers = self.engines.len();
        let mut total = vec![PeerLoad::default(); servers];
        for loads in own {
            for (t, l) in total.iter_mut().zip(loads) {
                t.requests += l.requests;
                t.prompt_tokens += l.prompt_tokens;
                t.prefill_tokens += l.prefill_tokens;
            }
        }
        for (replica, mine) in self.replicas.iter().zip(own) {
            for ((endpoint, t), m) in replica.endpoints.iter().zip(&total).zip(mine) {
                endpoint.set_peer_load(PeerLoad {
                    requests: t.requests - m.requests,
                    prompt_tokens: t.prompt_tokens - m.prompt_tokens,
                    prefill_tokens: t.prefill_tokens - m.prefill_tokens,
                });
            }
        }
    }
}

impl Sim<'_> {
    /// After replica `from` picked `server` for the request whose prompt is in `self.tokens`,
    /// sends its speculation to the other replicas (when the replicas exchange and the policy
    /// speculates).
    pub(super) fn share_speculation(&mut self, from: u32, server: u32, now: u64) {
        let Some(period) = self.load_sync_ns else {
            return;
        };
        let Some(replica) = self.replicas.get(from as usize) else {
            return;
        };
        let speculates = replica.precise.iter().any(|f| f.speculative_ttl.is_some());
        let syncs_index = self.index_sync && !replica.approximate.is_empty();
        if !speculates && !syncs_index {
            return;
        }
        let keys: Vec<Vec<BlockKey>> = if !speculates {
            Vec::new()
        } else {
            replica
                .precise
                .iter()
                .map(|feed| {
                    let config = feed.index.config();
                    let mut links = Vec::new();
                    let tokens = &self.tokens[..self
                        .tokens
                        .len()
                        .min(config.block_tokens * config.max_blocks)];
                    ChainLink::extend(
                        precise_seed(None),
                        None,
                        tokens,
                        config.block_tokens,
                        &mut links,
                    );
                    links.iter().map(|l| l.key()).collect()
                })
                .collect()
        };
        let approximate: Vec<Vec<BlockKey>> = if !syncs_index {
            Vec::new()
        } else {
            // The chain the picking replica's producer recorded: seeded by model and adapter,
            // over the prompt the request carried.
            let prompt = Prompt::Tokens(self.tokens.clone());
            let seed = chain_seed(super::handlers::MODEL, None, "");
            replica
                .approximate
                .iter()
                .map(|index| index.chain(seed, &prompt).complete(&prompt).to_vec())
                .collect()
        };
        let delta = Delta {
            from,
            server,
            keys,
            approximate,
        };
        if period == 0 {
            self.apply_delta(&delta, now);
        } else {
            let id = self.deltas.next;
            self.deltas.next += 1;
            self.deltas.pending.insert(id, delta);
            self.queue.push(
                now + period + self.medium_delay_ns,
                Event::SpeculationDelta(id),
            );
        }
    }

    /// Delta `id` reaches the other replicas.
    pub(super) fn on_speculation_delta(&mut self, id: u64, now: u64) {
        if let Some(delta) = self.deltas.pending.remove(&id) {
            self.apply_delta(&delta, now);
        }
    }

    fn apply_delta(&self, delta: &Delta, now: u64) {
        let now = shepherd_scheduler_core::clock::Timestamp::from_nanos(now);
        for (r, replica) in self.replicas.iter().enumerate() {
            if r == delta.from as usize {
                continue;
            }
            let endpoint = replica.endpoints[delta.server as usize].id();
            for (feed, keys) in replica.precise.iter().zip(&delta.keys) {
                if let Some(ttl) = feed.speculative_ttl {
                    feed.index.speculate(endpoint, keys, now, ttl);
                }
            }
            for (index, keys) in replica.approximate.iter().zip(&delta.approximate) {
                index.insert_blocks(endpoint, keys, None);
            }
        }
    }
}
