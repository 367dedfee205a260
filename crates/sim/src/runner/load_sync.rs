//! Picker replicas exchanging their in-flight counts (`simulation.replicaLoadSyncMs`).
//!
//! Every period each replica learns what the others have in flight on every server, as of
//! that moment, and stores it on its endpoints ([`Endpoint::set_peer_load`]); between
//! exchanges its own counts stay exact and the peers' go stale, as with a real exchange over
//! the network every period. A period of 0 exchanges before every pick: no real exchange can
//! do that (two replicas picking at the same instant cannot see each other's picks), so it is
//! a bound.
//!
//! [`Endpoint::set_peer_load`]: shepherd_scheduler_core::endpoint::Endpoint::set_peer_load

use shepherd_scheduler_core::endpoint::PeerLoad;

use super::Sim;

impl Sim<'_> {
    /// One exchange: every replica's endpoints get the other replicas' counts.
    pub(super) fn sync_replica_loads(&self) {
        let servers = self.engines.len();
        let own: Vec<Vec<PeerLoad>> = self
            .replicas
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
            .collect();
        let mut total = vec![PeerLoad::default(); servers];
        for loads in &own {
            for (t, l) in total.iter_mut().zip(loads) {
                t.requests += l.requests;
                t.prompt_tokens += l.prompt_tokens;
                t.prefill_tokens += l.prefill_tokens;
            }
        }
        for (replica, mine) in self.replicas.iter().zip(&own) {
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
