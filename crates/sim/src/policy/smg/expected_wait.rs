//! LeastLoad's expected-wait pick as SGLang Model Gateway 1.13's `cache_aware` policy makes
//! its final choice (`LeastLoadPolicy::select_min_expected_wait_with_freshness` and `score`,
//! `model_gateway/src/policies/least_load.rs`; `ExpectedWait`, `src/worker/expected_wait.rs`).
//!
//! The selector reads the workers' loads as the last **poll** of their load endpoints left
//! them (every 10 s at launch defaults), never live. A worker that reported scores, in seconds,
//!
//! ```text
//! (queued + running · p̄ + unaccounted · p̄ + since-poll tokens) / throughput + w · k / (1 − k)
//! ```
//!
//! - `queued`: the report's waiting uncached prompt tokens (else waiting requests · p̄);
//! - `unaccounted`: requests the router holds on the worker beyond the report's running and
//!   waiting ones and the since-poll dispatches (work in transit);
//! - since-poll tokens: what this router dispatched there since the poll sampled it — `p̄` per
//!   request on the HTTP path, which does not know token counts; a poll releases the
//!   dispatches made up to its sample;
//! - `throughput`: the report's generation rate, else the default (2000 tok/s); `k`: the KV
//!   usage, clamped to `[0, 0.999]`; `w` 0.15 s; `p̄` 1024 tokens.
//!
//! A worker without a report while others have one scores as the best reporting candidate
//! plus its in-flight count · p̄ at the candidates' mean reported throughput; a fleet without
//! any report scores by in-flight count. The lowest score wins, scores within 1 µs of it tie
//! and are drawn from uniformly (a seeded draw here), and the winner is credited with the
//! request's tokens.
//!
//! ```
//! # use shepherd_sim::policy::smg_expected_wait_seconds as seconds;
//! // 800 queued tokens + 200 dispatched since the poll, at 500 tok/s, KV half full, w = 0.2:
//! assert!((seconds(800.0, 500.0, 0.5, 0.2, 200) - 2.2).abs() < 1e-12);
//! ```

use std::collections::VecDeque;

use ahash::AHashMap;
use shepherd_scheduler_core::endpoint::EndpointId;

use crate::policy::feed::{LoadPoll, LoadReport};

/// Expected waits within this many seconds of the minimum are one tie.
pub(crate) const TIE_EPSILON_SECS: f64 = 1e-6;

/// Since-poll dispatches kept per worker.
const SINCE_POLL_DISPATCHES_KEPT: usize = 8_192;

/// The expected wait in seconds of `queued_tokens` plus `dispatched_tokens` at `throughput`
/// tokens/s, with KV usage `usage` weighted by `weight` seconds.
pub fn expected_wait_seconds(
    queued_tokens: f64,
    throughput: f64,
    usage: f64,
    weight: f64,
    dispatched_tokens: u64,
) -> f64 {
    let k = if usage.is_nan() {
        0.999
    } else {
        usage.clamp(0.0, 0.999)
    };
    (queued_tokens + dispatched_tokens as f64) / throughput + weight * k / (1.0 - k)
}

/// The selector's knobs (upstream's `--least-load-*` flags, launch defaults).
#[derive(Debug, Clone, Copy, PartialEq)]
pub(crate) struct Knobs {
    /// KV-pressure weight, seconds (0.15).
    pub(crate) kv_pressure_weight: f64,
    /// p̄, tokens (1024).
    pub(crate) mean_prefill_tokens: u32,
    /// Drain rate of a worker that reports none, tokens/s (2000).
    pub(crate) default_throughput: f64,
}

impl Default for Knobs {
    fn default() -> Self {
        Knobs {
            kv_pressure_weight: 0.15,
            mean_prefill_tokens: 1024,
            default_throughput: 2000.0,
        }
    }
}

/// A worker's last polled report and the generation rate it implies.
#[derive(Debug, Clone, Copy, Default)]
struct Polled {
    report: LoadReport,
    at_ns: u64,
    /// Tokens/s generated between the previous poll and this one (0 when unknown).
    gen_throughput: f64,
}

#[derive(Debug, Default)]
struct SincePoll {
    tokens: u64,
    requests: u64,
    dispatches: VecDeque<(u64, u64)>,
}

impl SincePoll {
    fn record(&mut self, at_ns: u64, tokens: u64) {
        self.tokens += tokens;
        self.requests += 1;
        self.dispatches.push_back((at_ns, tokens));
        if self.dispatches.len() > SINCE_POLL_DISPATCHES_KEPT {
            self.pop_oldest();
        }
    }

    fn release_through(&mut self, sampled_ns: u64) {
        while self
            .dispatches
            .front()
            .is_some_and(|&(at, _)| at <= sampled_ns)
        {
            self.pop_oldest();
        }
    }

    fn pop_oldest(&mut self) {
        if let Some((_, tokens)) = self.dispatches.pop_front() {
            self.tokens = self.tokens.saturating_sub(tokens);
            self.requests = self.requests.saturating_sub(1);
        }
    }
}

/// A candidate: its id and the requests the router has in flight on it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Candidate {
    pub(crate) id: EndpointId,
    pub(crate) in_flight: usize,
}

/// The selector's state: polled loads, since-poll credit, the tie draw.
#[derive(Debug)]
pub(crate) struct Selector {
    knobs: Knobs,
    polled: AHashMap<EndpointId, Polled>,
    since_poll: AHashMap<EndpointId, SincePoll>,
    applied_seq: u64,
    rng: u64,
}

impl Selector {
    pub(crate) fn new(knobs: Knobs, seed: u64) -> Self {
        Selector {
            knobs,
            polled: AHashMap::new(),
            since_poll: AHashMap::new(),
            applied_seq: 0,
            rng: seed ^ 0x9e37_79b9_7f4a_7c15,
        }
    }

    /// Takes in `poll` unless it was already: each worker's report replaces its last one, and
    /// the dispatches made up to the sample stop counting as since-poll credit.
    pub(crate) fn apply_poll(&mut self, poll: &LoadPoll) {
        if poll.seq <= self.applied_seq {
            return;
        }
        self.applied_seq = poll.seq;
        for (id, report) in &poll.reports {
            let gen_throughput = match self.polled.get(id) {
                Some(prev) if poll.at_ns > prev.at_ns => {
                    let tokens = report
                        .generated_tokens
                        .saturating_sub(prev.report.generated_tokens);
                    tokens as f64 / ((poll.at_ns - prev.at_ns) as f64 / 1e9)
                }
                _ => 0.0,
            };
            self.polled.insert(
                *id,
                Polled {
                    report: *report,
                    at_ns: poll.at_ns,
                    gen_throughput,
                },
            );
            if let Some(credit) = self.since_poll.get_mut(id) {
                credit.release_through(poll.at_ns);
            }
        }
    }

    /// Credits `id` with a dispatch of `tokens` at `at_ns`.
    pub(crate) fn credit(&mut self, id: EndpointId, at_ns: u64, tokens: u64) {
        self.since_poll.entry(id).or_default().record(at_ns, tokens);
    }

    /// The since-poll credit of `id`: `(tokens, requests)`.
    pub(crate) fn since_poll(&self, id: EndpointId) -> (u64, u64) {
        self.since_poll
            .get(&id)
            .map_or((0, 0), |c| (c.tokens, c.requests))
    }

    fn drain_rate(&self, p: &Polled) -> f64 {
        if p.gen_throughput > 0.0 {
            p.gen_throughput
        } else {
            self.knobs.default_throughput
        }
    }

    /// The score of a worker that reported.
    fn reported_score(&self, c: Candidate, p: &Polled) -> f64 {
        let mean = f64::from(self.knobs.mean_prefill_tokens);
        let (tokens, requests) = self.since_poll(c.id);
        let queued = if p.report.waiting_uncached_tokens > 0 {
            p.report.waiting_uncached_tokens as f64
        } else {
            f64::from(p.report.waiting) * mean
        };
        let running = f64::from(p.report.running) * mean;
        let reported = u64::from(p.report.running) + u64::from(p.report.waiting);
        let unaccounted = (c.in_flight as u64).saturating_sub(reported.saturating_add(requests));
        expected_wait_seconds(
            queued + running + unaccounted as f64 * mean,
            self.drain_rate(p),
            p.report.kv_utilization,
            self.knobs.kv_pressure_weight,
            tokens,
        )
    }

    /// Every candidate's score, in order.
    pub(crate) fn scores(&self, candidates: &[Candidate]) -> Vec<f64> {
        let reporting: Vec<&Polled> = candidates
            .iter()
            .filter_map(|c| self.polled.get(&c.id))
            .collect();
        if reporting.is_empty() {
            return candidates.iter().map(|c| c.in_flight as f64).collect();
        }
        let rates: Vec<f64> = reporting
            .iter()
            .map(|p| p.gen_throughput)
            .filter(|t| *t > 0.0)
            .collect();
        let nominal = if rates.is_empty() {
            self.knobs.default_throughput
        } else {
            rates.iter().sum::<f64>() / rates.len() as f64
        };
        let baseline = candidates
            .iter()
            .filter_map(|c| self.polled.get(&c.id).map(|p| self.reported_score(*c, p)))
            .fold(f64::INFINITY, f64::min);
        let mean = f64::from(self.knobs.mean_prefill_tokens);
        candidates
            .iter()
            .map(|c| match self.polled.get(&c.id) {
                Some(p) => self.reported_score(*c, p),
                None => baseline + c.in_flight as f64 * mean / nominal,
            })
            .collect()
    }

    fn draw(&mut self, n: u32) -> u32 {
        // splitmix64
        self.rng = self.rng.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.rng;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^= z >> 31;
        (z % u64::from(n.max(1))) as u32
    }

    /// The position in `candidates` of the lowest expected wait (ties within
    /// [`TIE_EPSILON_SECS`] drawn uniformly, reservoir style); `None` for no candidates.
    pub(crate) fn select(&mut self, candidates: &[Candidate]) -> Option<usize> {
        let scores = self.scores(candidates);
        let (&first, rest) = scores.split_first()?;
        let mut best = 0;
        let mut best_score = first;
        let mut tied = 1u32;
        for (i, &s) in rest.iter().enumerate() {
            let i = i + 1;
            if s < best_score - TIE_EPSILON_SECS {
                best = i;
                best_score = s;
                tied = 1;
            } else if (s - best_score).abs() <= TIE_EPSILON_SECS {
                tied += 1;
                best_score = best_score.min(s);
                if self.draw(tied) == 0 {
                    best = i;
                }
            }
        }
        Some(best)
    }
}
