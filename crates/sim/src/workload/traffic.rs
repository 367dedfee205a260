//! Turning a scenario's streams into requests over time: open-loop arrivals, closed-loop
//! sessions, multi-turn conversations and trace replay, all from seeded generators.
//!
//! The driver asks [`Traffic::initial`] for the first issue times, calls [`Traffic::issue`] when
//! one is due (getting a request and maybe the next issue time), and [`Traffic::after`] when a
//! request ends (getting the session's next issue time, if any).
//!
//! ```
//! use shepherd_sim::workload::{Scenario, Traffic};
//!
//! let yaml = "name: t\nservers: 1\nstreams:\n  - kind: multi-turn\n    turns: 2\n    userTokens: 10\n    outputTokens: 5\n    load: { closed: 1 }\n    endS: 100\n";
//! let scenario = Scenario::from_yaml(yaml, "t.yaml").unwrap();
//! let mut traffic = Traffic::new(&scenario, 1);
//! let (t0, first) = traffic.initial().remove(0);
//! let (req, _) = traffic.issue(first, t0);
//! let req = req.unwrap();
//! let (t1, second) = traffic.after(req.stream, req.session, 1.0).unwrap();
//! let (req2, _) = traffic.issue(second, t1);
//! // The second turn's prompt extends the first turn's prompt and answer.
//! assert_eq!(req2.unwrap().prompt_len(), 10 + 5 + 10);
//! ```

use ahash::AHashMap;
use shepherd_scheduler_core::rng::PickRng;

use super::spec::{Load, Scenario, Stream, StreamKind};
use super::tokens::{Segment, segment_id};
use super::trace::TRACE_BLOCK_TOKENS;

const NS_SYSTEM: u64 = 1;
const NS_QUESTION: u64 = 2;
const NS_USER: u64 = 3;
const NS_OUTPUT: u64 = 4;
const NS_TRACE: u64 = 5;
const NS_TRACE_TAIL: u64 = 6;

/// One request to send.
#[derive(Debug, Clone, PartialEq)]
pub struct RequestSpec {
    /// Index of its stream in the scenario.
    pub stream: usize,
    /// Its session (conversation) within the stream.
    pub session: u64,
    /// The prompt.
    pub segments: Vec<Segment>,
    /// The output's content (its length is the number of tokens to generate).
    pub output: Segment,
}

impl RequestSpec {
    /// Prompt length in tokens.
    pub fn prompt_len(&self) -> u32 {
        self.segments.iter().map(|s| s.len).sum()
    }
}

/// A pending reason to issue a request.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Issue {
    /// A new open-loop session (or the next trace record) arrives.
    Arrival {
        /// Stream index.
        stream: usize,
    },
    /// A session issues its next request (a closed-loop session starts when it is unknown).
    Session {
        /// Stream index.
        stream: usize,
        /// Session id.
        session: u64,
    },
}

#[derive(Debug)]
struct Conversation {
    turn: u32,
    history: Vec<Segment>,
}

#[derive(Debug)]
struct StreamState {
    stream: Stream,
    rng: PickRng,
    next_session: u64,
    conversations: AHashMap<u64, Conversation>,
    trace_pos: usize,
}

/// The request generators of a scenario.
#[derive(Debug)]
pub struct Traffic {
    streams: Vec<StreamState>,
}

impl Traffic {
    /// Generators for `scenario`, seeded with `seed`.
    pub fn new(scenario: &Scenario, seed: u64) -> Self {
        let streams = scenario
            .streams
            .iter()
            .enumerate()
            .map(|(i, s)| {
                let stream_seed = seed ^ (i as u64 + 1).wrapping_mul(0xA24B_AED4_963E_E407);
                let mut stream = s.clone();
                spread_within_resolution(&mut stream, stream_seed);
                StreamState {
                    stream,
                    rng: PickRng::seed_from(stream_seed),
                    next_session: 0,
                    conversations: AHashMap::new(),
                    trace_pos: 0,
                }
            })
            .collect();
        Traffic { streams }
    }

    /// The first issue times (seconds) of every stream.
    pub fn initial(&mut self) -> Vec<(f64, Issue)> {
        let mut out = Vec::new();
        for (i, st) in self.streams.iter_mut().enumerate() {
            let start = st.stream.spec.start_s;
            match (st.stream.spec.kind, st.stream.load) {
                (StreamKind::Trace, _) => {
                    if let Some(r) = st.stream.trace.first() {
                        out.push((
                            start + r.timestamp_ms / 1000.0 * st.stream.spec.time_scale,
                            Issue::Arrival { stream: i },
                        ));
                    }
                }
                (_, Some(Load::Closed(c))) => {
                    for _ in 0..c.get() {
                        let session = st.fresh_session();
                        out.push((start, Issue::Session { stream: i, session }));
                    }
                }
                (_, Some(Load::Rate(r))) => {
                    let t = start + exponential(&mut st.rng, r);
                    if t < st.stream.end_s {
                        out.push((t, Issue::Arrival { stream: i }));
                    }
                }
                (_, None) => {}
            }
        }
        out
    }

    /// Issues the request due at `now` for `issue`, and says when the stream's next arrival is.
    pub fn issue(&mut self, issue: Issue, now: f64) -> (Option<RequestSpec>, Option<(f64, Issue)>) {
        match issue {
            Issue::Arrival { stream } => {
                let Some(st) = self.streams.get_mut(stream) else {
                    return (None, None);
                };
                if st.stream.spec.kind == StreamKind::Trace {
                    let req = st.trace_request(stream);
                    let next = st.stream.trace.get(st.trace_pos).map(|r| {
                        (
                            st.stream.spec.start_s
                                + r.timestamp_ms / 1000.0 * st.stream.spec.time_scale,
                            Issue::Arrival { stream },
                        )
                    });
                    let next = next.filter(|(t, _)| *t < st.stream.end_s);
                    return (req, next);
                }
                let session = st.fresh_session();
                let req = st.next_turn(stream, session);
                let next = match st.stream.load {
                    Some(Load::Rate(r)) => {
                        let t = now + exponential(&mut st.rng, r);
                        (t < st.stream.end_s).then_some((t, Issue::Arrival { stream }))
                    }
                    _ => None,
                };
                (Some(req), next)
            }
            Issue::Session { stream, session } => {
                let Some(st) = self.streams.get_mut(stream) else {
                    return (None, None);
                };
                if now >= st.stream.end_s {
                    return (None, None);
                }
                (Some(st.next_turn(stream, session)), None)
            }
        }
    }

    /// A request of `session` ended at `now`: when (and what) it issues next.
    pub fn after(&mut self, stream: usize, session: u64, now: f64) -> Option<(f64, Issue)> {
        let st = self.streams.get_mut(stream)?;
        let spec = &st.stream.spec;
        if spec.kind == StreamKind::Trace {
            return None;
        }
        let continues = st
            .conversations
            .get(&session)
            .is_some_and(|c| c.turn < spec.turns.get());
        if continues {
            let t = now + spec.think_time_s;
            if t < st.stream.end_s {
                return Some((t, Issue::Session { stream, session }));
            }
        }
        st.conversations.remove(&session);
        match st.stream.load {
            Some(Load::Closed(_)) if now < st.stream.end_s => {
                let session = st.fresh_session();
                Some((now, Issue::Session { stream, session }))
            }
            _ => None,
        }
    }
}

impl StreamState {
    fn fresh_session(&mut self) -> u64 {
        self.next_session += 1;
        self.next_session
    }

    fn next_turn(&mut self, stream: usize, session: u64) -> RequestSpec {
        let spec = &self.stream.spec;
        let key = self.stream.prefix_key;
        let output = |turn: u32| Segment {
            id: segment_id(&[NS_OUTPUT, key, stream as u64, session, u64::from(turn)]),
            len: spec.output_tokens.get(),
        };
        match spec.kind {
            StreamKind::MultiTurn => {
                let rng = &mut self.rng;
                let conv = self.conversations.entry(session).or_insert_with(|| {
                    let group = rng.below(spec.groups.get() as usize) as u64;
                    let mut history = Vec::new();
                    if spec.system_tokens > 0 {
                        history.push(Segment {
                            id: segment_id(&[NS_SYSTEM, key, group]),
                            len: spec.system_tokens,
                        });
                    }
                    Conversation { turn: 0, history }
                });
                conv.turn += 1;
                let user = Segment {
                    id: segment_id(&[NS_USER, key, stream as u64, session, u64::from(conv.turn)]),
                    len: spec.user_tokens.get(),
                };
                conv.history.push(user);
                let segments = conv.history.clone();
                let out = output(conv.turn);
                conv.history.push(out);
                RequestSpec {
                    stream,
                    session,
                    segments,
                    output: out,
                }
            }
            _ => {
                let group = self.rng.below(spec.groups.get() as usize) as u64;
                let question = self.rng.below(spec.prompts_per_group.get() as usize) as u64;
                let mut segments = Vec::with_capacity(2);
                if spec.system_tokens > 0 {
                    segments.push(Segment {
                        id: segment_id(&[NS_SYSTEM, key, group]),
                        len: spec.system_tokens,
                    });
                }
                segments.push(Segment {
                    id: segment_id(&[NS_QUESTION, key, group, question]),
                    len: spec.question_tokens.get(),
                });
                RequestSpec {
                    stream,
                    session,
                    segments,
                    output: output(0),
                }
            }
        }
    }

    fn trace_request(&mut self, stream: usize) -> Option<RequestSpec> {
        let record = self.stream.trace.get(self.trace_pos)?;
        let index = self.trace_pos as u64;
        self.trace_pos += 1;
        let mut remaining = record.input_length;
        let mut segments = Vec::with_capacity(record.hash_ids.len() + 1);
        for &h in &record.hash_ids {
            if remaining == 0 {
                break;
            }
            let len = remaining.min(TRACE_BLOCK_TOKENS);
            segments.push(Segment {
                id: segment_id(&[NS_TRACE, h]),
                len,
            });
            remaining -= len;
        }
        if remaining > 0 {
            segments.push(Segment {
                id: segment_id(&[NS_TRACE_TAIL, index]),
                len: remaining,
            });
        }
        Some(RequestSpec {
            stream,
            session: index,
            segments,
            output: Segment {
                id: segment_id(&[NS_OUTPUT, u64::MAX, stream as u64, index]),
                len: record.output_length,
            },
        })
    }
}

/// Places each trace record at a uniform point of its recorded interval (its own generator,
/// so the stream's other draws do not move), then sorts the records by arrival.
fn spread_within_resolution(stream: &mut Stream, seed: u64) {
    let resolution = stream.spec.timestamp_resolution_ms;
    if resolution <= 0.0 {
        return;
    }
    let mut rng = PickRng::seed_from(seed ^ 0x0005_EED0_FA24_17A1);
    for record in &mut stream.trace {
        record.timestamp_ms += rng.unit_f64() * resolution;
    }
    stream
        .trace
        .sort_by(|a, b| a.timestamp_ms.total_cmp(&b.timestamp_ms));
}

fn exponential(rng: &mut PickRng, rate: f64) -> f64 {
    -(1.0 - rng.unit_f64()).ln() / rate
}
