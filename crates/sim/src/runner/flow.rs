//! Flow control in the simulated gateway: the policy's `flowControl` section, run with the
//! core's [`FlowQueue`] and [`SaturationDetector`] in front of the scheduler.
//!
//! When a policy's config has a `flowControl` section ([`FlowControlConfig`], upstream names),
//! every arriving request goes through the gate before it is routed:
//!
//! 1. the detector looks at the pool snapshot the scheduler sees (scraped metrics, its own
//!    in-flight counts); [`FlowQueue::admit`] sheds a sheddable request (negative priority)
//!    while the pool is saturated;
//! 2. anything else is enqueued in its priority band and flow (the stream's `fairnessId`), and
//!    may be refused if the band is full;
//! 3. the queue is then *pumped*: while the pool is not saturated, the next request (highest
//!    band first, round robin across flows, FCFS within one) is routed by the policy as usual.
//!
//! The pump runs on every arrival, every engine step end (completions free capacity), every
//! metric scrape, and at the queue's next TTL deadline, where expired requests leave with
//! `ttl_expired` (503). A request whose scenario timeout passes while it is still queued is
//! cancelled (no drop counted), as when a client goes away.
//!
//! The detector is re-asked before *each* dispatch, so what it reads must change as requests
//! are dispatched, or one pump would empty the queue onto a pool it believes idle. The
//! `concurrency-detector` reads the scheduler's in-flight counts, which rise the moment a
//! request is routed; the `utilization-detector` reads scraped queue depth and KV use, which
//! only move at the next scrape (50 ms later by default), so between scrapes it lets a burst
//! through. The simulator models both faithfully; the `overload` report shows the difference.
//!
//! A client whose request was refused (429/503) retries its session 1 s later (closed-loop
//! streams would otherwise re-issue at the same instant, forever).

use ahash::AHashMap;
use shepherd_scheduler_core::clock::Timestamp;
use shepherd_scheduler_core::config::EndpointPickerConfig;
use shepherd_scheduler_core::flow::{
    ConcurrencyDetector, Detector, DropReason, FlowControlConfig, FlowQueue, SaturationDetector,
    Ticket, UsageLimitPolicy, UtilizationDetector, is_saturated_level,
};

use crate::error::SimError;
use crate::workload::RequestSpec;

use super::events::Event;
use super::results::Outcome;
use super::{NS, Sim};

/// Bytes a prompt token stands for in the queue's byte limits (about 4 characters a token).
pub(super) const BYTES_PER_TOKEN: u64 = 4;

/// How long a refused client waits before its session issues again, ns.
const RETRY_AFTER_NS: u64 = 1_000_000_000;

/// A request that arrived and has not been routed yet.
pub(super) struct Held {
    pub(super) id: u64,
    pub(super) record: usize,
    pub(super) spec: RequestSpec,
    /// Whether its scenario timeout is already scheduled.
    pub(super) timeout_armed: bool,
}

/// The flow controller of one run.
pub(super) struct FlowGate {
    queue: FlowQueue<Held>,
    detector: Detector,
    tickets: AHashMap<u64, Ticket>,
    /// Time of the earliest pending [`Event::FlowTimer`].
    timer: Option<u64>,
}

impl FlowGate {
    /// The gate of `config`'s `flowControl` section, or `None` when it has none.
    pub(super) fn from_config(
        policy: &str,
        config: &EndpointPickerConfig,
    ) -> Result<Option<FlowGate>, SimError> {
        let settings = FlowControlConfig::from_picker_config(config).map_err(|source| {
            SimError::FlowControl {
                policy: policy.to_string(),
                source,
            }
        })?;
        Ok(settings.map(|settings| FlowGate {
            detector: settings.detector.clone(),
            queue: FlowQueue::new(settings),
            tickets: AHashMap::new(),
            timer: None,
        }))
    }

    /// Whether nothing is queued.
    pub(super) fn is_empty(&self) -> bool {
        self.queue.is_empty()
    }
}

/// `config` without its flow-control plugin instances (saturation detectors, usage-limit
/// policies): flow control reads them, the scheduler has no such plugin type.
pub(super) fn without_detector_plugins(config: &EndpointPickerConfig) -> EndpointPickerConfig {
    let mut config = config.clone();
    config.plugins.retain(|p| {
        ![
            UtilizationDetector::TYPE,
            ConcurrencyDetector::TYPE,
            UsageLimitPolicy::STATIC_TYPE,
            UsageLimitPolicy::HOLDBACK_TYPE,
        ]
        .contains(&p.plugin_type.as_str())
    });
    config
}

impl Sim<'_> {
    /// The flow controller's saturation level at `now` (0 without flow control).
    fn saturation(&self, now: u64) -> f64 {
        let Some(gate) = self.flow.as_ref() else {
            return 0.0;
        };
        if self.opts.fresh_metrics || self.scenario.scrape_interval_ms == 0 {
            for s in 0..self.engines.len() as u32 {
                self.scrape(s);
            }
        }
        gate.detector.saturation(
            &self.replicas[0].pool.snapshot(),
            Timestamp::from_nanos(now),
        )
    }

    /// An arriving request meets flow control: shed, refused, or queued (then maybe routed at
    /// once by the pump).
    pub(super) fn offer(&mut self, now: u64, held: Held) {
        let saturated = is_saturated_level(self.saturation(now));
        let Some(gate) = self.flow.as_mut() else {
            return self.route(now, held);
        };
        let stream = &self.scenario.streams[held.spec.stream].spec;
        let priority = stream.priority;
        let flow_id = stream.fairness_id.as_deref().unwrap_or("");
        if let Err(reason) = gate.queue.admit(priority, saturated) {
            return self.reject(now, held, reason);
        }
        let id = held.id;
        let bytes = u64::from(held.spec.prompt_len()) * BYTES_PER_TOKEN;
        let held = Held {
            timeout_armed: true,
            ..held
        };
        match gate
            .queue
            .enqueue(held, priority, flow_id, bytes, Timestamp::from_nanos(now))
        {
            Ok(ticket) => {
                gate.tickets.insert(id, ticket);
                let timeout = (self.scenario.request_timeout_s * NS) as u64;
                self.queue.push(now + timeout, Event::Timeout(id));
            }
            Err(rejected) => return self.reject(now, rejected.item, rejected.reason),
        }
        self.pump(now);
    }

    /// Routes queued requests while the pool is not saturated, drains the expired ones, and
    /// arms the timer for the next deadline.
    pub(super) fn pump(&mut self, now: u64) {
        let at = Timestamp::from_nanos(now);
        while self.flow.as_ref().is_some_and(|g| !g.is_empty()) {
            let level = self.saturation(now);
            let Some(gate) = self.flow.as_mut() else {
                break;
            };
            // Below the ceiling of the highest waiting band (the usage-limit policy's; 1 by
            // default: not saturated).
            let Some(held) = gate.queue.dispatch_next_under(at, level) else {
                break;
            };
            gate.tickets.remove(&held.id);
            self.route(now, held);
        }
        let Some(gate) = self.flow.as_mut() else {
            return;
        };
        let expired = gate.queue.expire(at);
        for (held, _) in &expired {
            gate.tickets.remove(&held.id);
        }
        if let Some(deadline) = gate.queue.next_deadline() {
            let deadline = deadline.as_nanos();
            if gate.timer.is_none_or(|t| deadline < t) {
                gate.timer = Some(deadline);
                self.queue.push(deadline, Event::FlowTimer);
            }
        }
        for (held, reason) in expired {
            self.reject(now, held, reason);
        }
    }

    /// The flow timer fired: a deadline may have passed.
    pub(super) fn on_flow_timer(&mut self, now: u64) {
        if let Some(gate) = self.flow.as_mut()
            && gate.timer == Some(now)
        {
            gate.timer = None;
        }
        self.pump(now);
    }

    /// Removes request `id` from the queue if it is still there (its timeout passed); true if
    /// it was.
    pub(super) fn cancel_held(&mut self, now: u64, id: u64) -> bool {
        let Some(gate) = self.flow.as_mut() else {
            return false;
        };
        let Some(ticket) = gate.tickets.remove(&id) else {
            return false;
        };
        let Some(held) = gate.queue.cancel(ticket) else {
            return false;
        };
        self.end_request(held.record, now, Outcome::TimedOut);
        let next = self
            .traffic
            .after(held.spec.stream, held.spec.session, now as f64 / NS);
        self.queue.push_issue(next);
        true
    }

    /// Answers a request flow control refused; its session retries later.
    fn reject(&mut self, now: u64, held: Held, reason: DropReason) {
        self.end_request(held.record, now, Outcome::Rejected(reason));
        let next = self.traffic.after(
            held.spec.stream,
            held.spec.session,
            (now + RETRY_AFTER_NS) as f64 / NS,
        );
        self.queue.push_issue(next);
    }
}
