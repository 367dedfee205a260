//! What each event does to the simulation: scrapes, load samples, adaptive ticks, arrivals
//! (through flow control if the policy has it, then pick a server and hand the request to its
//! engine), step ends (progress, first tokens, completions) and timeouts.

use std::sync::Arc;
use std::time::Instant;

use shepherd_scheduler_core::clock::Timestamp;
use shepherd_scheduler_core::endpoint::EndpointMetrics;
use shepherd_scheduler_core::plugin::{Completion, Usage};
use shepherd_scheduler_core::request::{InferenceRequest, Prompt};

use crate::engine::{EngineEvent, EngineRequest};
use crate::policy::LoadReport;
use crate::workload::{Issue, RequestSpec, block_hashes, materialize};

use super::disagg::prefill_job;
use super::events::Event;
use super::flow::Held;
use super::results::{Outcome, RequestRecord};
use super::{Live, NS, Sim};

/// The model every simulated request names.
pub(super) const MODEL: &str = "llama-3-8b";

impl Sim<'_> {
    /// Stores server `s`'s metrics, stamped by the pool's clock (set to the event's time).
    pub(super) fn scrape(&self, s: u32) {
        let Some(engine) = self.engines.get(s as usize) else {
            return;
        };
        let snap = engine.snapshot();
        // Every replica scrapes the same server and reads the same figures.
        for replica in &self.replicas {
            replica.endpoints[s as usize].set_metrics(EndpointMetrics {
                waiting: snap.waiting,
                running: snap.running,
                kv_utilization: snap.kv_utilization,
                block_size: Some(snap.block_size),
                num_gpu_blocks: Some(u64::from(snap.num_gpu_blocks)),
                ..Default::default()
            });
        }
    }

    pub(super) fn on_tick(&mut self, now: u64) {
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

    /// Runs one adaptive tick on every replica (each on its own pool view; the series keeps
    /// replica 0's samples); returns the period until the next one, ns (at least 1 ms).
    pub(super) fn on_adapt(&mut self, now: u64) -> u64 {
        let mut period = None;
        for (r, replica) in self.replicas.iter_mut().enumerate() {
            let Some(driver) = replica.driver.as_mut() else {
                continue;
            };
            let snapshot = replica.pool.snapshot();
            let sample = driver.tick(&snapshot, Timestamp::from_nanos(now));
            if let Some(sample) = sample
                && r == 0
            {
                self.adaptive_series.push(sample);
            }
            let p = u64::try_from(driver.interval().as_nanos())
                .unwrap_or(u64::MAX / 2)
                .max(1_000_000);
            period = Some(period.map_or(p, |q: u64| q.min(p)));
        }
        period.unwrap_or(u64::MAX / 2)
    }

    pub(super) fn on_issue(&mut self, now: u64, issue: Issue) {
        let (spec, next) = self.traffic.issue(issue, now as f64 / NS);
        self.queue.push_issue(next);
        let Some(spec) = spec else {
            return;
        };
        let id = self.next_id;
        self.next_id += 1;
        let bs = self.scenario.engine.block_size as usize;
        let (prompt_len, hashes) = self.materialize(&spec);

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
            dispatched: None,
            first_scheduled: None,
            first_token: None,
            end: None,
            prompt_tokens: prompt_len,
            output_tokens: spec.output.len,
            cached_tokens: 0,
            preemptions: 0,
            outcome: Outcome::Pending,
            prefill_server: None,
            transferred_tokens: 0,
        });
        let held = Held {
            id,
            record,
            spec,
            timeout_armed: false,
        };
        if self.flow.is_some() {
            self.offer(now, held);
        } else {
            self.route_materialized(now, held, hashes);
        }
    }

    /// Fills `self.tokens` with the prompt of `spec`; returns its length and the block hashes
    /// of the prompt followed by the output.
    fn materialize(&mut self, spec: &RequestSpec) -> (u32, Vec<u64>) {
        let bs = self.scenario.engine.block_size as usize;
        self.tokens.clear();
        materialize(&spec.segments, &mut self.tokens);
        let prompt_len = self.tokens.len() as u32;
        materialize(&[spec.output], &mut self.tokens);
        let hashes = block_hashes(&self.tokens, bs);
        // The engines' KV events carry the blocks' tokens: keep them for the request.
        self.full_tokens = self.kv.on.then(|| Arc::from(self.tokens.as_slice()));
        self.tokens.truncate(prompt_len as usize);
        (prompt_len, hashes)
    }

    /// Asks the scheduler for a server and hands the request to its engine.
    pub(super) fn route(&mut self, now: u64, held: Held) {
        let (_, hashes) = self.materialize(&held.spec);
        self.route_materialized(now, held, hashes);
    }

    /// [`Sim::route`] once `self.tokens` holds the prompt and `hashes` its block hashes.
    fn route_materialized(&mut self, now: u64, held: Held, hashes: Vec<u64>) {
        let Held {
            id,
            record,
            spec,
            timeout_armed,
        } = held;
        let prompt_len = self.tokens.len() as u32;
        let bs = self.scenario.engine.block_size as usize;
        self.records[record].dispatched = Some(now);
        if self.opts.fresh_metrics || self.scenario.scrape_interval_ms == 0 {
            for s in 0..self.engines.len() as u32 {
                self.scrape(s);
            }
        }
        let stream = &self.scenario.streams[spec.stream].spec;
        let mut request =
            InferenceRequest::new(id.to_string(), MODEL, Prompt::Tokens(self.tokens.clone()));
        request.max_tokens = Some(spec.output.len);
        request.priority = stream.priority;
        request.fairness_id = stream.fairness_id.clone();
        if let Some(slo) = &stream.slo {
            request.headers.extend(slo.headers());
        }
        let r = self.spreader.pick(spec.stream, spec.session);
        let replica = &mut self.replicas[r as usize];
        if replica.feed.wants_cached_blocks() {
            // What each server's KV events would have told the router: the request's leading
            // full prompt blocks in its prefix cache.
            let prompt_blocks = &hashes[..(prompt_len as usize / bs).min(hashes.len())];
            let cached = self
                .engines
                .iter()
                .zip(&replica.endpoints)
                .map(|(e, ep)| (ep.id(), e.cached_prefix_blocks(prompt_blocks) as u32));
            replica.feed.publish_cached_blocks(&request.id, cached);
        }
        if replica.feed.load_poll_due(now) {
            // A peer polls the servers' load endpoints: what each reports at this instant.
            let reports = self.engines.iter().zip(&replica.endpoints).map(|(e, ep)| {
                let snap = e.snapshot();
                let report = LoadReport {
                    waiting: snap.waiting,
                    running: snap.running,
                    waiting_uncached_tokens: e.waiting_uncached_tokens(),
                    kv_utilization: snap.kv_utilization,
                    generated_tokens: e.stats().generated_tokens,
                };
                (ep.id(), report)
            });
            replica.feed.publish_load_poll(now, reports);
        }
        if self.load_sync_ns == Some(0) {
            // The instantaneous exchange (a bound): every replica's view is exact at each pick.
            self.sync_replica_loads();
        }
        let replica = &mut self.replicas[r as usize];
        let started = Instant::now();
        let picked = replica.scheduler.schedule(&request);
        let elapsed = started.elapsed().as_nanos();
        self.pick_ns
            .push(u64::try_from(elapsed).unwrap_or(u64::MAX));
        let decision = match picked {
            Ok(d) => d,
            Err(_) => {
                self.end_request(record, now, Outcome::Dropped);
                let next = self
                    .traffic
                    .after(spec.stream, spec.session, now as f64 / NS);
                self.queue.push_issue(next);
                return;
            }
        };
        replica.picks += 1;
        let server = replica
            .by_id
            .get(&decision.primary().id())
            .copied()
            .unwrap_or(0);
        // A prefill stage on another server: the request is disaggregated.
        let prefill = decision
            .prefill()
            .and_then(|stage| replica.by_id.get(&stage.endpoint().id()).copied())
            .filter(|&p| p != server);
        self.share_speculation(r, server, now);
        self.records[record].server = server;
        let engine_request = EngineRequest {
            id,
            prompt_len,
            output_len: spec.output.len,
            block_hashes: hashes,
            // Only for policies with a precise index: their engines publish KV-cache events,
            // which carry the blocks' tokens.
            tokens: self.full_tokens.take(),
        };
        self.live.insert(
            id,
            Live {
                decision,
                server,
                replica: r,
                record,
                session: spec.session,
            },
        );
        if !timeout_armed {
            let timeout = (self.scenario.request_timeout_s * NS) as u64;
            self.queue.push(now + timeout, Event::Timeout(id));
        }
        if let Some(prefill) = prefill {
            self.disaggregated += 1;
            self.start_prefill(now, engine_request, prefill);
            return;
        }
        let frontend = self.scenario.engine.cost.frontend_nanos(prompt_len);
        if frontend == 0 {
            self.deliver(now, engine_request);
        } else {
            self.delivering.insert(id, engine_request);
            self.queue.push(now + frontend, Event::Deliver(id));
        }
    }

    /// A routed request has passed its server's frontend: unless it timed out meanwhile, it
    /// reaches the engine.
    pub(super) fn on_deliver(&mut self, now: u64, id: u64) {
        if let Some(request) = self.delivering.remove(&id) {
            self.deliver(now, request);
        }
    }

    pub(super) fn deliver(&mut self, now: u64, request: EngineRequest) {
        let id = request.id;
        let Some(server) = self.live.get(&id).map(|l| l.server) else {
            return;
        };
        if self.engines[server as usize]
            .add_request(request, now)
            .is_err()
        {
            self.drop_live(now, id);
            return;
        }
        self.kick(server, now);
    }

    /// Ends live request `id` as dropped (its server refused it).
    pub(super) fn drop_live(&mut self, now: u64, id: u64) {
        if let Some(live) = self.live.remove(&id) {
            self.finish(live, now, Outcome::Dropped, None);
        }
    }

    pub(super) fn end_request(&mut self, record: usize, now: u64, outcome: Outcome) {
        if let Some(r) = self.records.get_mut(record) {
            r.end = Some(now);
            r.outcome = outcome;
        }
    }

    /// Starts a step on an idle server that has work.
    pub(super) fn kick(&mut self, server: u32, now: u64) {
        let engine = &mut self.engines[server as usize];
        if engine.in_step() || !engine.has_work() {
            return;
        }
        if let Some(d) = engine.begin_step(now) {
            self.queue.push(now + d, Event::StepEnd(server));
        }
        self.handle_engine_events(server, now);
        self.publish_kv_events(server, now);
    }

    pub(super) fn on_step_end(&mut self, now: u64, server: u32) {
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
        self.publish_kv_events(server, now);
        self.kick(server, now);
        self.pump(now);
    }

    fn handle_engine_events(&mut self, server: u32, now: u64) {
        for event in self.engines[server as usize].drain_events() {
            if let Some(id) = prefill_job(&event) {
                self.on_prefill_event(now, id, event);
                continue;
            }
            match event {
                EngineEvent::Scheduled { id } => {
                    if let Some(live) = self.live.get(&id) {
                        // A disaggregated request was first batched on its prefill server.
                        self.records[live.record].first_scheduled.get_or_insert(now);
                    }
                }
                EngineEvent::FirstToken { id } => {
                    if let Some(live) = self.live.get_mut(&id) {
                        self.records[live.record].first_token = Some(now);
                        // The prefill is done; the guard keeps the request in flight until
                        // it finishes.
                        live.decision.handle_mut().first_token();
                        if let Some(replica) = self.replicas.get(live.replica as usize)
                            && replica.feed.wants_first_tokens()
                        {
                            replica.feed.first_token(&id.to_string());
                        }
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
        let completion = match outcome {
            Outcome::Completed => Completion::success(usage),
            Outcome::Dropped | Outcome::Rejected(_) => Completion::failed(),
            Outcome::TimedOut | Outcome::Pending => Completion::cancelled(),
        };
        live.decision.finish(completion);
        if let Some(replica) = self.replicas.get_mut(live.replica as usize) {
            replica.completions += 1;
        }
        let stream = self.records[live.record].stream as usize;
        self.end_request(live.record, now, outcome);
        let next = self.traffic.after(stream, live.session, now as f64 / NS);
        self.queue.push_issue(next);
    }

    pub(super) fn on_timeout(&mut self, now: u64, id: u64) {
        let Some(live) = self.live.remove(&id) else {
            self.cancel_held(now, id);
            return;
        };
        self.abandon_prefill(id);
        if self.delivering.remove(&id).is_none() {
            self.engines[live.server as usize].abort(id);
        }
        self.finish(live, now, Outcome::TimedOut, None);
        self.pump(now);
    }
}
