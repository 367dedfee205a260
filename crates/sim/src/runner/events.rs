//! The event queue: what can happen in a run, and in which order.
//!
//! Events sit in a binary heap ordered by (time, insertion number), so equal-time events run
//! in the order they were scheduled and a run is a pure function of its inputs and seed.

use std::cmp::Reverse;
use std::collections::BinaryHeap;

use crate::workload::Issue;

use super::NS;

/// Something that happens at a point of simulated time.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub(super) enum Event {
    /// The traffic issues a request (an arrival, or a session's next turn).
    Issue(IssueKey),
    /// A server's engine step ends.
    StepEnd(u32),
    /// The router scrapes a server's metrics.
    Scrape(u32),
    /// The per-server load is sampled for the report.
    Tick,
    /// The adaptive driver ticks.
    Adapt,
    /// A request's timeout expires (by request id).
    Timeout(u64),
    /// A routed request has passed its server's frontend and reaches its engine (by id).
    Deliver(u64),
    /// A request may have reached its time-to-live in the flow-control queue.
    FlowTimer,
    /// A server's batch of KV-cache events reaches the router (by batch number).
    KvBatch(u64),
    /// The picker replicas exchange their in-flight counts.
    LoadSync,
    /// A load snapshot taken `replicaMediumDelayUs` ago reaches the replicas (by number).
    LoadArrives(u64),
    /// A replica's speculative index entries reach the other replicas (by delta number).
    SpeculationDelta(u64),
    /// A disaggregated request has passed its prefill server's frontend (by id).
    PrefillDeliver(u64),
    /// A disaggregated request's KV cache has reached its decode server (by id).
    KvArrived(u64),
    /// A disaggregated request's prefill may have outlived `kvTransfer.prefillTimeoutS`.
    PrefillTimeout(u64),
}

/// An [`Issue`] in a form the heap can order.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub(super) struct IssueKey {
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

/// Pending events by (time, insertion number), earliest first; counts the pending issues, so
/// the run knows when traffic is exhausted.
#[derive(Default)]
pub(super) struct EventQueue {
    heap: BinaryHeap<Reverse<(u64, u64, Event)>>,
    seq: u64,
    pending_issues: u64,
}

impl EventQueue {
    /// Schedules `event` at `time` (ns), after every event already scheduled for that time.
    pub(super) fn push(&mut self, time: u64, event: Event) {
        if matches!(event, Event::Issue(_)) {
            self.pending_issues += 1;
        }
        self.seq += 1;
        self.heap.push(Reverse((time, self.seq, event)));
    }

    /// Schedules the traffic's next issue, if any (its time in seconds).
    pub(super) fn push_issue(&mut self, next: Option<(f64, Issue)>) {
        if let Some((t, issue)) = next {
            let time = (t.max(0.0) * NS).round() as u64;
            self.push(time, Event::Issue(issue.into()));
        }
    }

    /// Takes the earliest event and its time (ns).
    pub(super) fn pop(&mut self) -> Option<(u64, Event)> {
        let Reverse((time, _, event)) = self.heap.pop()?;
        if matches!(event, Event::Issue(_)) {
            self.pending_issues -= 1;
        }
        Some((time, event))
    }

    /// Issues scheduled and not yet taken.
    pub(super) fn pending_issues(&self) -> u64 {
        self.pending_issues
    }
}
