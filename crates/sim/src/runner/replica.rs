//! One picker replica: its own [`Pool`] view of the servers (own in-flight counts), its own
//! [`Scheduler`] built from the policy (own prefix index and plugin state), its own engine
//! feed for the peer plugins and its own adaptive driver. The engines' KV-cache events reach
//! every replica's precise indexes (each server publishes to every subscriber).
//!
//! A run has one replica unless [`RunOptions::replicas`](super::RunOptions::replicas) asks
//! for more. The replicas share nothing but the servers: every scrape is stored in every
//! replica's endpoints (all replicas scrape the same `/metrics`), while a request's pick, its
//! first token and its completion reach only the replica that picked it (the completion
//! through the [`Decision`](shepherd_scheduler_core::decision::Decision) it holds).
//! Replica 0 is seeded exactly as the one-replica run; replica `r` XORs a constant multiple of
//! `r` into the tie-breaking seed, as independent processes would draw differently.

use std::sync::Arc;

use ahash::AHashMap;
use shepherd_scheduler_core::clock::ManualClock;
use shepherd_scheduler_core::config::{EndpointPickerConfig, Registry, build_scheduler_in};
use shepherd_scheduler_core::endpoint::{Endpoint, EndpointId, Pool};
use shepherd_scheduler_core::resources::Resources;
use shepherd_scheduler_core::scheduler::Scheduler;
use shepherd_scheduler_core::shared::SharedState;

use shepherd_adaptive::driver::TickDriver;
use shepherd_scheduler_core::prefix::PrefixIndex;
use shepherd_scorers::latency::LatencyProducer;
use shepherd_scorers::producers::{PreciseKvEvents, approximate_indexes};

use crate::error::SimError;
use crate::policy::{EngineFeed, FEED_NAME, Policy, follow_engine_block_size};
use crate::workload::{ROLE_LABEL, Scenario};

/// One replica's state.
pub(super) struct Replica {
    pub(super) pool: Arc<Pool>,
    pub(super) scheduler: Scheduler,
    /// Server `i`'s endpoint in this replica's pool.
    pub(super) endpoints: Vec<Arc<Endpoint>>,
    pub(super) by_id: AHashMap<EndpointId, u32>,
    pub(super) feed: Arc<EngineFeed>,
    /// The policy's precise prefix indexes, fed the engines' KV-cache events.
    pub(super) precise: Vec<Arc<PreciseKvEvents>>,
    /// The policy's approximate prefix indexes, by name (they learn from this replica's picks,
    /// and from the others' with `simulation.replicaIndexSync`).
    pub(super) approximate: Vec<Arc<PrefixIndex>>,
    /// The shared resources, where the policy's latency producers are (a consumer creates its
    /// producer on its first pick when the config declares none, so they are looked up at the
    /// end of the run).
    pub(super) resources: Arc<Resources>,
    pub(super) driver: Option<Box<dyn TickDriver>>,
    /// Requests this replica picked a server for.
    pub(super) picks: u64,
    /// Requests this replica heard the end of.
    pub(super) completions: u64,
}

impl Replica {
    /// The policy's latency producers (their models learn from this replica's requests).
    pub(super) fn latency_producers(&self) -> Vec<Arc<LatencyProducer>> {
        self.resources
            .all::<LatencyProducer>()
            .into_iter()
            .map(|(_, producer)| producer)
            .collect()
    }

    /// Replica `index` over the scenario's servers (labelled with their roles, if any): `config` (flow-control detectors already
    /// removed, run seed applied) built with `registry`, its clock `clock`.
    pub(super) fn build(
        index: u32,
        scenario: &Scenario,
        policy: &Policy,
        config: &EndpointPickerConfig,
        registry: &Registry,
        clock: &Arc<ManualClock>,
    ) -> Result<Replica, SimError> {
        let pool = Arc::new(Pool::with_clock(clock.clone()));
        let mut endpoints = Vec::new();
        let mut by_id = AHashMap::new();
        for i in 0..scenario.servers {
            let address = format!("10.0.{}.{}:8000", i / 256, i % 256);
            let ep = pool.add(&address);
            if let Some(role) = scenario.roles.get(i as usize) {
                ep.set_labels(
                    [(ROLE_LABEL.to_string(), role.clone())]
                        .into_iter()
                        .collect(),
                );
            }
            by_id.insert(ep.id(), i);
            endpoints.push(ep);
        }
        let mut config = config.clone();
        config.scheduler.seed ^= u64::from(index).wrapping_mul(0x9e37_79b9_7f4a_7c15);
        // Dynamo's router takes the block size the engines register with.
        follow_engine_block_size(&mut config, scenario.engine.block_size);
        // The engines' side channel to the peer plugins, in place before they are built.
        let shared = SharedState::new(Arc::clone(&pool));
        let feed = Arc::new(EngineFeed::default());
        shared.resources.insert(FEED_NAME, Arc::clone(&feed));
        let scheduler =
            build_scheduler_in(&config, registry, &shared).map_err(|source| SimError::Config {
                policy: policy.name.clone(),
                source,
            })?;
        let driver = policy.tick_driver(&scheduler)?;
        let precise = shared
            .resources
            .all::<PreciseKvEvents>()
            .into_iter()
            .map(|(_, feed)| feed)
            .collect();
        let approximate = approximate_indexes(&shared.resources)
            .into_iter()
            .map(|(_, index)| index)
            .collect();
        Ok(Replica {
            resources: Arc::clone(&shared.resources),
            pool,
            scheduler,
            endpoints,
            by_id,
            feed,
            precise,
            approximate,
            driver,
            picks: 0,
            completions: 0,
        })
    }

    /// Requests this replica still counts in flight, across its endpoints.
    pub(super) fn in_flight(&self) -> u64 {
        self.pool.snapshot().in_flight_requests()
    }
}
