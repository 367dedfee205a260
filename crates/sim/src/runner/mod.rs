//! The discrete-event loop: arrivals, engine steps, metric scrapes and adaptive ticks over
//! simulated time, with the Shepherd scheduler picking a server for every request.
//!
//! How a run proceeds ([`run`]):
//!
//! 1. **Set up.** One [`Engine`] per server; per picker replica (one unless
//!    [`RunOptions::replicas`] says more, `replica.rs`) a pool with one
//!    [`Endpoint`](shepherd_scheduler_core::endpoint::Endpoint) per server, and the policy's
//!    config built into a [`Scheduler`](shepherd_scheduler_core::scheduler::Scheduler) whose
//!    clock is the run's [`ManualClock`]; a policy with an `adaptive` section also gets a
//!    [`TickDriver`] bound to the scheduler's default profile. A load balancer ([`Spreader`],
//!    `spread.rs`) hands each request to one replica.
//! 2. **Seed the queue** (`events.rs`): the traffic's first issues, one staggered scrape per
//!    server, the first load sample, and the first adaptive tick.
//! 3. **Loop**: take the earliest event, set the scheduler's clock to its time, and run its
//!    handler (`handlers.rs`). An issue materializes the request's tokens, passes flow control
//!    when the policy has a `flowControl` section (`flow.rs`: shed, queue, or dispatch), asks
//!    the scheduler for a server and hands the request to that server's engine; a step end advances the
//!    engine, marks first tokens on the request's [`Decision`], and on a completion (or a
//!    timeout) reports it to the scheduler, drops the decision and lets the traffic issue what
//!    follows; scrapes, load samples and adaptive ticks reschedule themselves on their own
//!    periods while work remains.
//! 4. **Stop** when no request is live, no issue is pending and no engine is mid-step, and
//!    gather the [`RunResult`] (`results.rs`): one [`RequestRecord`] per request, the load and
//!    adaptive series, the cache totals with their infinite-cache ceiling, and what the
//!    routing decisions cost in wall-clock time ([`PickCost`], `pick_cost.rs`).
//!
//! What the router sees of a server is its last scrape
//! ([`Endpoint::set_metrics`](shepherd_scheduler_core::endpoint::Endpoint::set_metrics)), the
//! same in every replica, while its own in-flight counts are exact (each request holds its
//! [`Decision`] until it ends, and counts only in the replica that picked it). Peer plugins
//! that model routers fed by the engines themselves (Dynamo's KV events) read their replica's
//! [`EngineFeed`](crate::policy::EngineFeed): before each pick, each server's cached leading prompt blocks; at each
//! first token, a report. Equal-time
//! events run in the order they were scheduled, so a run is a pure function of its inputs and
//! seed.
//!
//! ```
//! use shepherd_sim::policy::{builtin_policy, sim_registry};
//! use shepherd_sim::runner::{Outcome, RunOptions, run};
//! use shepherd_sim::workload::Scenario;
//!
//! let scenario = Scenario::from_yaml(
//!     "
//! name: tiny
//! servers: 2
//! streams:
//!   - kind: shared-prefix
//!     groups: 2
//!     promptsPerGroup: 2
//!     systemTokens: 300
//!     questionTokens: 40
//!     outputTokens: 20
//!     load: { closed: 4 }
//!     endS: 1
//! ",
//!     "tiny.yaml",
//! )
//! .unwrap();
//! let policy = builtin_policy("adaptive").unwrap();
//! let result = run(&scenario, &policy, &sim_registry(), RunOptions::default()).unwrap();
//! assert!(!result.records.is_empty());
//! assert!(result.records.iter().all(|r| r.outcome == Outcome::Completed));
//! assert!(!result.adaptive_series.is_empty()); // one sample per adaptive tick
//! ```

mod disagg;
mod events;
mod flow;
mod handlers;
mod kv_events;
mod load_sync;
mod pick_cost;
mod replica;
mod results;
mod simulation;
mod spread;

use std::sync::Arc;
use std::time::Instant;

use ahash::{AHashMap, AHashSet};
use shepherd_scheduler_core::clock::{ManualClock, Timestamp};
use shepherd_scheduler_core::config::Registry;
use shepherd_scheduler_core::decision::Decision;
use shepherd_scorers::latency::ErrorTally;

pub use pick_cost::PickCost;
pub use results::{Outcome, ReplicaCounts, RequestRecord, RunResult};
pub use shepherd_adaptive::driver::{AdaptiveSample, TickDriver};
pub use simulation::{DEFAULT_KV_EVENT_DELAY_MS, SIMULATION_SECTION};
pub use spread::{Spread, Spreader};

use crate::engine::{Engine, EngineRequest};
use crate::error::SimError;
use crate::policy::Policy;
use crate::workload::{Scenario, Traffic};
use events::{Event, EventQueue};
use flow::FlowGate;
use kv_events::KvDelivery;
use replica::Replica;
use simulation::SimulationSettings;

/// Nanoseconds per second.
const NS: f64 = 1e9;

/// Options of one run.
#[derive(Debug, Clone, Copy)]
pub struct RunOptions {
    /// Seed for traffic and the scheduler's tie-breaking.
    pub seed: u64,
    /// Scrape every server just before every pick (the zero-staleness bound).
    pub fresh_metrics: bool,
    /// Audit every engine's KV blocks after every step (slow; for tests).
    pub check_invariants: bool,
    /// Picker replicas, each with its own scheduler, prefix index and in-flight counts (at
    /// least 1; 1 is the plain run). Policies with flow control take only 1.
    pub replicas: u32,
    /// How requests are spread over the replicas.
    pub spread: Spread,
}

impl Default for RunOptions {
    fn default() -> Self {
        RunOptions {
            seed: 42,
            fresh_metrics: false,
            check_invariants: false,
            replicas: 1,
            spread: Spread::Random,
        }
    }
}

/// A request handed to a server and not yet ended.
struct Live {
    decision: Decision,
    server: u32,
    /// The replica that picked it.
    replica: u32,
    record: usize,
    session: u64,
}

/// The state of one run.
struct Sim<'a> {
    scenario: &'a Scenario,
    opts: RunOptions,
    clock: Arc<ManualClock>,
    /// The picker replicas (one unless [`RunOptions::replicas`] says more).
    replicas: Vec<Replica>,
    spreader: Spreader,
    engines: Vec<Engine>,
    traffic: Traffic,
    queue: EventQueue,
    live: AHashMap<u64, Live>,
    records: Vec<RequestRecord>,
    next_id: u64,
    load_series: Vec<(u64, Vec<u32>)>,
    adaptive_series: Vec<AdaptiveSample>,
    seen_blocks: AHashSet<u64>,
    ceiling_cached: u64,
    ceiling_prompt: u64,
    events: u64,
    tokens: Vec<u32>,
    /// The last materialized request's prompt and output tokens, when engines publish events.
    full_tokens: Option<Arc<[u32]>>,
    flow: Option<FlowGate>,
    /// The engines' KV-cache events on their way to the precise indexes.
    kv: KvDelivery,
    /// How often the replicas exchange their in-flight counts (ns), when they do.
    load_sync_ns: Option<u64>,
    /// With the load exchange, approximate-index inserts travel too.
    index_sync: bool,
    /// What the medium adds to every exchange (ns).
    medium_delay_ns: u64,
    /// Speculative index entries on their way between replicas.
    deltas: load_sync::Deltas,
    /// Wall-clock nanoseconds of every `schedule` call, in order.
    pick_ns: Vec<u64>,
    /// Requests routed and on their way through their server's frontend (HTTP, tokenization)
    /// to its engine, by id.
    delivering: AHashMap<u64, EngineRequest>,
    /// Disaggregated requests not yet on their decode server, by id.
    disagg: AHashMap<u64, disagg::PdStage>,
    /// Requests routed with a prefill stage on another server.
    disaggregated: u64,
    /// Of those, requests served aggregated after all (their prefill server lost the job).
    prefill_fallbacks: u64,
}

/// Runs `scenario` under `policy`, building the policy's scheduler with `registry`.
pub fn run(
    scenario: &Scenario,
    policy: &Policy,
    registry: &Registry,
    opts: RunOptions,
) -> Result<RunResult, SimError> {
    let started = Instant::now();
    let clock = Arc::new(ManualClock::default());
    let flow = FlowGate::from_config(&policy.name, &policy.config)?;
    if flow.is_some() && opts.replicas > 1 {
        return Err(SimError::Input {
            file: format!("<policy {}>", policy.name),
            line: 0,
            field: "flowControl".into(),
            reason: "several picker replicas are not modelled with flow control".into(),
        });
    }
    let mut config = flow::without_detector_plugins(&policy.config);
    config.scheduler.seed ^= opts.seed;
    let replicas = (0..opts.replicas.max(1))
        .map(|r| Replica::build(r, scenario, policy, &config, registry, &clock))
        .collect::<Result<Vec<_>, _>>()?;
    let scorer_names = replicas
        .first()
        .and_then(|r| r.scheduler.profiles().first())
        .map(|p| p.scorers().iter().map(|s| s.name.to_string()).collect())
        .unwrap_or_default();
    let precise = replicas.iter().any(|r| !r.precise.is_empty());
    let settings = SimulationSettings::from_config(&policy.name, &policy.config)?;
    let kv = KvDelivery::new(precise, settings.kv_event_delay_ns);
    let engines = (0..scenario.servers)
        .map(|_| {
            let mut engine = Engine::new(scenario.engine);
            if precise {
                engine.enable_kv_events();
            }
            engine
        })
        .collect();
    // The engines' capacities, as their metrics would say: a precise index never holds more.
    for replica in &replicas {
        for (endpoint, feed) in replica
            .endpoints
            .iter()
            .flat_map(|e| replica.precise.iter().map(move |f| (e, f)))
        {
            feed.index
                .set_capacity(endpoint.id(), scenario.engine.num_gpu_blocks as usize);
        }
    }
    let mut sim = Sim {
        scenario,
        opts,
        clock,
        replicas,
        spreader: Spreader::new(opts.spread, opts.replicas, opts.seed),
        engines,
        traffic: Traffic::new(scenario, opts.seed),
        queue: EventQueue::default(),
        live: AHashMap::new(),
        records: Vec::new(),
        next_id: 0,
        load_series: Vec::new(),
        adaptive_series: Vec::new(),
        seen_blocks: AHashSet::new(),
        ceiling_cached: 0,
        ceiling_prompt: 0,
        events: 0,
        tokens: Vec::new(),
        full_tokens: None,
        flow,
        kv,
        load_sync_ns: settings.replica_load_sync_ns.filter(|_| opts.replicas > 1),
        index_sync: settings.replica_index_sync,
        medium_delay_ns: settings.replica_medium_delay_ns,
        deltas: load_sync::Deltas::default(),
        pick_ns: Vec::new(),
        delivering: AHashMap::new(),
        disagg: AHashMap::new(),
        disaggregated: 0,
        prefill_fallbacks: 0,
    };
    sim.run_loop();
    let mut preemptions = 0;
    let mut prompt_tokens = 0;
    let mut cached_tokens = 0;
    for e in &sim.engines {
        let s = e.stats();
        preemptions += s.preemptions;
        prompt_tokens += s.prompt_tokens;
        cached_tokens += s.cached_tokens;
    }
    Ok(RunResult {
        policy: policy.name.clone(),
        records: sim.records,
        load_series: sim.load_series,
        adaptive_series: sim.adaptive_series,
        scorer_names,
        events: sim.events,
        preemptions,
        prompt_tokens,
        cached_tokens,
        ceiling_cached_tokens: sim.ceiling_cached,
        ceiling_prompt_tokens: sim.ceiling_prompt,
        replicas: sim
            .replicas
            .iter()
            .map(|r| ReplicaCounts {
                picks: r.picks,
                completions: r.completions,
                in_flight_at_end: r.in_flight(),
            })
            .collect(),
        latency_errors: latency_errors(&sim.replicas),
        server_stats: sim.engines.iter().map(Engine::stats).collect(),
        disaggregated: sim.disaggregated,
        prefill_fallbacks: sim.prefill_fallbacks,
        pick_cost: PickCost::from_nanos(sim.pick_ns),
        wall_seconds: started.elapsed().as_secs_f64(),
    })
}

/// The latency producers' error tallies summed over the replicas, if the policy has any.
fn latency_errors(replicas: &[Replica]) -> Option<(ErrorTally, ErrorTally)> {
    let mut out: Option<(ErrorTally, ErrorTally)> = None;
    for producer in replicas.iter().flat_map(Replica::latency_producers) {
        let (ttft, tpot) = producer.model().error_tallies();
        let sum = out.get_or_insert_with(Default::default);
        for (acc, add) in [(&mut sum.0, ttft), (&mut sum.1, tpot)] {
            for i in 0..acc.sum.len() {
                acc.sum[i] += add.sum[i];
                acc.count[i] += add.count[i];
            }
        }
    }
    out
}

impl Sim<'_> {
    fn run_loop(&mut self) {
        for (t, issue) in self.traffic.initial() {
            self.queue.push_issue(Some((t, issue)));
        }
        let interval = self.scenario.scrape_interval_ms * 1_000_000;
        let servers = self.engines.len() as u64;
        if interval > 0 && !self.opts.fresh_metrics {
            for s in 0..servers {
                self.queue
                    .push(s * interval / servers.max(1), Event::Scrape(s as u32));
            }
        }
        self.queue.push(0, Event::Tick);
        if self.replicas.iter().any(|r| r.driver.is_some()) {
            self.queue.push(0, Event::Adapt);
        }
        if let Some(period) = self.load_sync_ns.filter(|&p| p > 0) {
            self.queue.push(period, Event::LoadSync);
        }
        while let Some((now, event)) = self.queue.pop() {
            self.events += 1;
            self.clock.set(Timestamp::from_nanos(now));
            match event {
                Event::Issue(key) => self.on_issue(now, key.into()),
                Event::StepEnd(s) => self.on_step_end(now, s),
                Event::Scrape(s) => {
                    self.scrape(s);
                    self.pump(now);
                    if !self.idle() {
                        self.queue.push(now + interval, Event::Scrape(s));
                    }
                }
                Event::Tick => {
                    self.on_tick(now);
                    if !self.idle() {
                        self.queue
                            .push(now + self.scenario.tick_ms * 1_000_000, Event::Tick);
                    }
                }
                Event::Adapt => {
                    let period = self.on_adapt(now);
                    if !self.idle() {
                        self.queue.push(now.saturating_add(period), Event::Adapt);
                    }
                }
                Event::Timeout(id) => self.on_timeout(now, id),
                Event::Deliver(id) => self.on_deliver(now, id),
                Event::FlowTimer => self.on_flow_timer(now),
                Event::KvBatch(id) => self.on_kv_batch(id),
                Event::SpeculationDelta(id) => self.on_speculation_delta(id, now),
                Event::LoadArrives(id) => self.on_loads_arrive(id),
                Event::PrefillDeliver(id) => self.on_prefill_deliver(now, id),
                Event::KvArrived(id) => self.on_kv_arrived(now, id),
                Event::PrefillTimeout(id) => self.on_prefill_timeout(now, id),
                Event::LoadSync => {
                    self.send_replica_loads(now);
                    if let (Some(period), false) = (self.load_sync_ns, self.idle()) {
                        self.queue.push(now + period, Event::LoadSync);
                    }
                }
            }
            if self.idle() && !self.engines.iter().any(Engine::in_step) {
                break;
            }
        }
    }

    fn idle(&self) -> bool {
        self.live.is_empty()
            && self.queue.pending_issues() == 0
            && self.flow.as_ref().is_none_or(FlowGate::is_empty)
    }
}
