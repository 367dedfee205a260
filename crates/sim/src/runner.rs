//! The discrete-event loop: arrivals, engine steps, metric scrapes and adaptive ticks over
//! simulated time, with the Shepherd scheduler picking a server for every request.
//!
//! Events sit in a binary heap ordered by (time, insertion number), so equal-time events run
//! in the order they were scheduled and a run is a pure function of its inputs and seed. The
//! scheduler's clock is a [`ManualClock`] set to each event's time; what the router sees of a
//! server is its last scrape ([`Endpoint::set_metrics`]), while its own in-flight counts are
//! exact (each request holds its [`Decision`] until it ends).

use std::cmp::Reverse;
use std::collections::BinaryHeap;
use std::sync::Arc;
use std::time::Instant;

use ahash::{AHashMap, AHashSet};
use shepherd_scheduler_core::clock::{ManualClock, Timestamp};
use shepherd_scheduler_core::config::{Registry, build_scheduler};
use shepherd_scheduler_core::decision::Decision;
use shepherd_scheduler_core::endpoint::{Endpoint, EndpointId, EndpointMetrics, Pool};
use shepherd_scheduler_core::plugin::{Completion, Usage};
use shepherd_scheduler_core::request::{InferenceRequest, Prompt};
use shepherd_scheduler_core::scheduler::Scheduler;

use crate::engine::{Engine, EngineEvent, EngineRequest};
use crate::error::SimError;
use crate::policy::Policy;
use crate::workload::{Issue, Scenario, Traffic, block_hashes, materialize};

pub use shepherd_adaptive::driver::{AdaptiveSample, TickDriver};

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
}

impl Default for RunOptions {
    fn default() -> Self {
        RunOptions {
            seed: 42,
            fresh_metrics: false,
            check_invariants: false,
        }
    }
}

/// How a request ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Outcome {
    /// Still running when the run ended (never happens in a finished run).
    Pending,
    /// Answered in full.
    Completed,
    /// Abandoned after the scenario's request timeout.
    TimedOut,
    /// Refused: no endpoint could be picked, or the prompt can never fit a server.
    Dropped,
}

/// Everything measured about one request. Times in nanoseconds of simulated time.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct RequestRecord {
    /// Stream index.
    pub stream: u32,
    /// Server index (`u32::MAX` when dropped before a pick).
    pub server: u32,
    /// Arrival at the router.
    pub arrival: u64,
    /// First put in a batch.
    pub first_scheduled: Option<u64>,
    /// First output token.
    pub first_token: Option<u64>,
    /// End (completion, timeout or drop).
    pub end: Option<u64>,
    /// Prompt tokens.
    pub prompt_tokens: u32,
    /// Output tokens asked for.
    pub output_tokens: u32,
    /// Prompt tokens served from the prefix cache.
    pub cached_tokens: u32,
    /// Times preempted.
    pub preemptions: u32,
    /// How it ended.
    pub outcome: Outcome,
}

/// The raw outcome of one run.
#[derive(Debug, Clone)]
pub struct RunResult {
    /// Policy name.
    pub policy: String,
    /// One record per request, in arrival order.
    pub records: Vec<RequestRecord>,
    /// Per tick: time (ns) and each server's load (running + waiting).
    pub load_series: Vec<(u64, Vec<u32>)>,
    /// Adaptive ticks (empty for static policies).
    pub adaptive_series: Vec<AdaptiveSample>,
    /// Scorer names of the default profile (for the weights plot).
    pub scorer_names: Vec<String>,
    /// Simulated events processed.
    pub events: u64,
    /// Preemptions across servers.
    pub preemptions: u64,
    /// Prompt tokens (first admissions) and of those cached, across servers.
    pub prompt_tokens: u64,
    /// Cached prompt tokens across servers.
    pub cached_tokens: u64,
    /// Prompt tokens an infinite cache would have served (same request order).
    pub ceiling_cached_tokens: u64,
    /// Total prompt tokens offered, for the ceiling.
    pub ceiling_prompt_tokens: u64,
    /// Wall-clock seconds the run took (not part of any deterministic output).
    pub wall_seconds: f64,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
enum Event {
    Issue(IssueKey),
    StepEnd(u32),
    Scrape(u32),
    Tick,
    Adapt,
    Timeout(u64),
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
struct IssueKey {
    stream: usize,
    session: Option<u64>,
}

impl From<Issue> for IssueKey {
    fn from(i: Issue) -> Self {
        match i {
            Issue::Arrival { stream } => IssueKey {
                stream,
                session: None,
            },
            Issue::Session { stream, session } => IssueKey {
                stream,
                session: Some(session),
            },
        }
    }
}

impl From<IssueKey> for Issue {
    fn from(k: IssueKey) -> Self {
        match k.session {
            None => Issue::Arrival { stream: k.stream },
            Some(session) => Issue::Session {
                stream: k.stream,
                session,
            },
        }
    }
}

struct Live {
    request: InferenceRequest,
    decision: Decision,
    server: u32,
    record: usize,
    session: u64,
}

struct Sim<'a> {
    scenario: &'a Scenario,
    opts: RunOptions,
    clock: Arc<ManualClock>,
    pool: Arc<Pool>,
    scheduler: Scheduler,
    endpoints: Vec<Arc<Endpoint>>,
    by_id: AHashMap<EndpointId, u32>,
    engines: Vec<Engine>,
    traffic: Traffic,
    heap: BinaryHeap<Reverse<(u64, u64, Event)>>,
    seq: u64,
    pending_issues: u64,
    live: AHashMap<u64, Live>,
    records: Vec<RequestRecord>,
    next_id: u64,
    load_series: Vec<(u64, Vec<u32>)>,
    adaptive_series: Vec<AdaptiveSample>,
    driver: Option<Box<dyn TickDriver + 'a>>,
    seen_blocks: AHashSet<u64>,
    ceiling_cached: u64,
    ceiling_prompt: u64,
    events: u64,
    tokens: Vec<u32>,
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
    let pool = Arc::new(Pool::new());
    let mut endpoints = Vec::new();
    let mut by_id = AHashMap::new();
    for i in 0..scenario.servers {
        let address = format!("10.0.{}.{}:8000", i / 256, i % 256);
        let ep = pool.add(&address);
        by_id.insert(ep.id(), i);
        endpoints.push(ep);
    }
    let mut config = policy.config.clone();
    config.scheduler.seed ^= opts.seed;
    let scheduler =
        build_scheduler(&config, registry, Arc::clone(&pool), clock.clone()).map_err(|source| {
            SimError::Config {
                policy: policy.name.clone(),
                source,
            }
        })?;
    let driver = policy.tick_driver(&scheduler)?;
    let scorer_names = scheduler
        .profiles()
        .first()
        .map(|p| p.scorers().iter().map(|s| s.name.to_string()).collect())
        .unwrap_or_default();
    let engines = (0..scenario.servers)
        .map(|_| Engine::new(scenario.engine))
        .collect();
    let mut sim = Sim {
        scenario,
        opts,
        clock,
        pool,
        scheduler,
        endpoints,
        by_id,
        engines,
        traffic: Traffic::new(scenario, opts.seed),
        heap: BinaryHeap::new(),
        seq: 0,
        pending_issues: 0,
        live: AHashMap::new(),
        records: Vec::new(),
        next_id: 0,
        load_series: Vec::new(),
        adaptive_series: Vec::new(),
        driver,
        seen_blocks: AHashSet::new(),
        ceiling_cached: 0,
        ceiling_prompt: 0,
        events: 0,
        tokens: Vec::new(),
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
        wall_seconds: started.elapsed().as_secs_f64(),
    })
}

impl Sim<'_> {
    fn push(&mut self, time: u64, event: Event) {
        if matches!(event, Event::Issue(_)) {
            self.pending_issues += 1;
        }
        self.seq += 1;
        self.heap.push(Reverse((time, self.seq, event)));
    }

    fn push_issue(&mut self, next: Option<(f64, Issue)>) {
        if let Some((t, issue)) = next {
            let time = (t.max(0.0) * NS).round() as u64;
            self.push(time, Event::Issue(issue.into()));
        }
    }

    fn run_loop(&mut self) {
        for (t, issue) in self.traffic.initial() {
            self.push_issue(Some((t, issue)));
        }
        let interval = self.scenario.scrape_interval_ms * 1_000_000;
        let servers = self.engines.len() as u64;
        if interval > 0 && !self.opts.fresh_metrics {
            for s in 0..servers {
                self.push(s * interval / servers.max(1), Event::Scrape(s as u32));
            }
        }
        self.push(0, Event::Tick);
        if self.driver.is_some() {
            self.push(0, Event::Adapt);
        }
        while let Some(Reverse((now, _, event))) = self.heap.pop() {
            self.events += 1;
            self.clock.set(Timestamp::from_nanos(now));
            match event {
                Event::Issue(key) => {
                    self.pending_issues -= 1;
                    self.on_issue(now, key.into());
                }
                Event::StepEnd(s) => self.on_step_end(now, s),
                Event::Scrape(s) => {
                    self.scrape(s, now);
                    if !self.idle() {
                        self.push(now + interval, Event::Scrape(s));
                    }
                }
                Event::Tick => {
                    self.on_tick(now);
                    if !self.idle() {
                        self.push(now + self.scenario.tick_ms * 1_000_000, Event::Tick);
                    }
                }
                Event::Adapt => {
                    let period = self.on_adapt(now);
                    if !self.idle() {
                        self.push(now.saturating_add(period), Event::Adapt);
                    }
                }
                Event::Timeout(id) => self.on_timeout(now, id),
            }
            if self.idle() && !self.engines.iter().any(Engine::in_step) {
                break;
            }
        }
    }

    fn idle(&self) -> bool {
        self.live.is_empty() && self.pending_issues == 0
    }

    fn scrape(&self, s: u32, now: u64) {
        let Some(engine) = self.engines.get(s as usize) else {
            return;
        };
        let snap = engine.snapshot();
        self.endpoints[s as usize].set_metrics(EndpointMetrics {
            waiting: snap.waiting,
            running: snap.running,
            kv_utilization: snap.kv_utilization,
            block_size: Some(snap.block_size),
            num_gpu_blocks: Some(u64::from(snap.num_gpu_blocks)),
            scraped_at: Some(Timestamp::from_nanos(now)),
            ..Default::default()
        });
    }

    fn on_tick(&mut self, now: u64) {
        let loads = self
            .engines
            .iter()
            .map(|e| {
                let s = e.snapshot();
                s.running + s.waiting
            })
            .collect();
        self.load_series.push((now, loads));
    }

    /// Runs one adaptive tick; returns the period until the next one, ns (at least 1 ms).
    fn on_adapt(&mut self, now: u64) -> u64 {
        let Some(driver) = self.driver.as_mut() else {
            return u64::MAX / 2;
        };
        let snapshot = self.pool.snapshot();
        if let Some(sample) = driver.tick(&snapshot, Timestamp::from_nanos(now)) {
            self.adaptive_series.push(sample);
        }
        u64::try_from(driver.interval().as_nanos())
            .unwrap_or(u64::MAX / 2)
            .max(1_000_000)
    }

    fn on_issue(&mut self, now: u64, issue: Issue) {
        let (spec, next) = self.traffic.issue(issue, now as f64 / NS);
        self.push_issue(next);
        let Some(spec) = spec else {
            return;
        };
        let id = self.next_id;
        self.next_id += 1;
        let bs = self.scenario.engine.block_size as usize;

        self.tokens.clear();
        materialize(&spec.segments, &mut self.tokens);
        let prompt_len = self.tokens.len() as u32;
        materialize(&[spec.output], &mut self.tokens);
        let hashes = block_hashes(&self.tokens, bs);
        self.tokens.truncate(prompt_len as usize);

        // Infinite-cache ceiling: the longest already-seen prefix, at least one token recomputed.
        let max_hit = (prompt_len.saturating_sub(1) as usize) / bs;
        let hit = hashes
            .iter()
            .take(max_hit)
            .take_while(|h| self.seen_blocks.contains(h))
            .count();
        self.ceiling_cached += (hit * bs) as u64;
        self.ceiling_prompt += u64::from(prompt_len);
        self.seen_blocks.extend(hashes.iter().copied());

        let record = self.records.len();
        self.records.push(RequestRecord {
            stream: spec.stream as u32,
            server: u32::MAX,
            arrival: now,
            first_scheduled: None,
            first_token: None,
            end: None,
            prompt_tokens: prompt_len,
            output_tokens: spec.output.len,
            cached_tokens: 0,
            preemptions: 0,
            outcome: Outcome::Pending,
        });

        if self.opts.fresh_metrics || self.scenario.scrape_interval_ms == 0 {
            for s in 0..self.engines.len() as u32 {
                self.scrape(s, now);
            }
        }
        let mut request = InferenceRequest::new(
            id.to_string(),
            "llama-3-8b",
            Prompt::Tokens(self.tokens.clone()),
        );
        request.max_tokens = Some(spec.output.len);
        let decision = match self.scheduler.schedule(&request) {
            Ok(d) => d,
            Err(_) => {
                self.end_request(record, now, Outcome::Dropped);
                let next = self
                    .traffic
                    .after(spec.stream, spec.session, now as f64 / NS);
                self.push_issue(next);
                return;
            }
        };
        let server = self
            .by_id
            .get(&decision.primary().id())
            .copied()
            .unwrap_or(0);
        self.records[record].server = server;
        let engine_request = EngineRequest {
            id,
            prompt_len,
            output_len: spec.output.len,
            block_hashes: hashes,
        };
        if self.engines[server as usize]
            .add_request(engine_request, now)
            .is_err()
        {
            self.scheduler.complete(
                &request,
                decision.primary(),
                &Completion {
                    success: false,
                    usage: None,
                },
            );
            drop(decision);
            self.end_request(record, now, Outcome::Dropped);
            let next = self
                .traffic
                .after(spec.stream, spec.session, now as f64 / NS);
            self.push_issue(next);
            return;
        }
        self.live.insert(
            id,
            Live {
                request,
                decision,
                server,
                record,
                session: spec.session,
            },
        );
        let timeout = (self.scenario.request_timeout_s * NS) as u64;
        self.push(now + timeout, Event::Timeout(id));
        self.kick(server, now);
    }

    fn end_request(&mut self, record: usize, now: u64, outcome: Outcome) {
        if let Some(r) = self.records.get_mut(record) {
            r.end = Some(now);
            r.outcome = outcome;
        }
    }

    /// Starts a step on an idle server that has work.
    fn kick(&mut self, server: u32, now: u64) {
        let engine = &mut self.engines[server as usize];
        if engine.in_step() || !engine.has_work() {
            return;
        }
        if let Some(d) = engine.begin_step(now) {
            self.push(now + d, Event::StepEnd(server));
        }
        self.handle_engine_events(server, now);
    }

    fn on_step_end(&mut self, now: u64, server: u32) {
        self.engines[server as usize].finish_step(now);
        if self.opts.check_invariants {
            let e = &self.engines[server as usize];
            let (used, queued) = e.block_pool().audit();
            assert_eq!(
                used + queued,
                e.block_pool().total_blocks(),
                "KV blocks not conserved"
            );
            assert_eq!(queued, e.block_pool().free_blocks());
        }
        self.handle_engine_events(server, now);
        self.kick(server, now);
    }

    fn handle_engine_events(&mut self, server: u32, now: u64) {
        for event in self.engines[server as usize].drain_events() {
            match event {
                EngineEvent::Scheduled { id } => {
                    if let Some(live) = self.live.get(&id) {
                        self.records[live.record].first_scheduled = Some(now);
                    }
                }
                EngineEvent::FirstToken { id } => {
                    if let Some(live) = self.live.get_mut(&id) {
                        self.records[live.record].first_token = Some(now);
                        // The prefill is done; the guard keeps the request in flight until
                        // it finishes.
                        live.decision.guard.prefill_done();
                    }
                }
                EngineEvent::Finished {
                    id,
                    cached_tokens,
                    preemptions,
                } => {
                    let Some(live) = self.live.remove(&id) else {
                        continue;
                    };
                    let r = &mut self.records[live.record];
                    r.cached_tokens = cached_tokens;
                    r.preemptions = preemptions;
                    let usage = Usage {
                        prompt_tokens: u64::from(r.prompt_tokens),
                        completion_tokens: u64::from(r.output_tokens),
                        cached_tokens: Some(u64::from(cached_tokens)),
                    };
                    self.finish(live, now, Outcome::Completed, Some(usage));
                }
            }
        }
    }

    fn finish(&mut self, live: Live, now: u64, outcome: Outcome, usage: Option<Usage>) {
        self.scheduler.complete(
            &live.request,
            live.decision.primary(),
            &Completion {
                success: outcome == Outcome::Completed,
                usage,
            },
        );
        let stream = self.records[live.record].stream as usize;
        self.end_request(live.record, now, outcome);
        let _ = live.server;
        drop(live.decision);
        let next = self.traffic.after(stream, live.session, now as f64 / NS);
        self.push_issue(next);
    }

    fn on_timeout(&mut self, now: u64, id: u64) {
        let Some(live) = self.live.remove(&id) else {
            return;
        };
        self.engines[live.server as usize].abort(id);
        self.finish(live, now, Outcome::TimedOut, None);
    }
}
