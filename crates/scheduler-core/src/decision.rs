//! What the scheduler decided, and why.

use std::fmt;
use std::sync::Arc;

use serde::Serialize;

use crate::completion::{Completion, RequestHandle};
use crate::disagg::{EncodeStage, PrefillStage};
use crate::endpoint::{Endpoint, EndpointId, PoolSnapshot};
use crate::plugin::{Annotations, Category, Score};
use crate::profile::Profile;

/// The scheduler's answer for one request: where to send it, why, and the
/// [`RequestHandle`] that counts it in flight until it ends.
///
/// Keep the decision — or, once the destination is sent on, only its handle
/// ([`Decision::into_handle`]), which drops the breakdown — until the response ends, then
/// [`finish`](Decision::finish) it. Dropping it unfinished ends the request as cancelled.
#[derive(Debug)]
#[must_use = "dropping the decision ends the request as cancelled"]
pub struct Decision {
    handle: RequestHandle,
    /// Every scorer's score for every candidate.
    pub breakdown: Breakdown,
    prefill: Option<PrefillStage>,
    encode: Option<EncodeStage>,
    kv_cache_source: Option<String>,
}

impl Decision {
    pub(crate) fn new(handle: RequestHandle, breakdown: Breakdown) -> Self {
        Decision {
            handle,
            breakdown,
            prefill: None,
            encode: None,
            kv_cache_source: None,
        }
    }

    /// Records the stage's [`KvCacheSource`](crate::disagg::KvCacheSource).
    pub(crate) fn with_kv_cache_source(mut self, source: Option<String>) -> Self {
        self.kv_cache_source = source;
        self
    }

    /// The server to pull the prompt's cached KV blocks from
    /// ([`KV_CACHE_SOURCE_HEADER`](crate::disagg::KV_CACHE_SOURCE_HEADER)): the one the
    /// stage that computes the prompt found — the prefill stage when there is one, else the
    /// decode stage. `None` when no plugin set one.
    pub fn kv_cache_source(&self) -> Option<&str> {
        match &self.prefill {
            Some(prefill) => prefill.kv_cache_source.as_deref(),
            None => self.kv_cache_source.as_deref(),
        }
    }

    /// Adds the encode stage `encode` (its servers stay counted until this request's first
    /// token).
    pub(crate) fn with_encode(mut self, encode: Decision) -> Self {
        let Decision {
            handle, breakdown, ..
        } = encode;
        let endpoints = handle.endpoints().to_vec();
        self.handle.attach_encode(handle);
        self.encode = Some(EncodeStage {
            endpoints,
            breakdown,
        });
        self
    }

    /// The encode stage, when the request's media are encoded on separate servers (see
    /// [`crate::disagg`]): the adapters send its endpoints in
    /// [`ENCODER_ENDPOINTS_HEADER`](crate::disagg::ENCODER_ENDPOINTS_HEADER).
    pub fn encode(&self) -> Option<&EncodeStage> {
        self.encode.as_ref()
    }

    /// Adds the prefill stage `prefill` (its handle ends with this request's first token).
    pub(crate) fn with_prefill(mut self, prefill: Decision) -> Self {
        let Decision {
            handle,
            breakdown,
            kv_cache_source,
            ..
        } = prefill;
        let endpoint = Arc::clone(handle.endpoint());
        self.handle.attach_prefill(handle);
        self.prefill = Some(PrefillStage {
            endpoint,
            kv_cache_source,
            breakdown,
        });
        self
    }

    /// The prefill stage, when the request is disaggregated (see [`crate::disagg`]): the
    /// adapters send its endpoint in [`PREFILL_ENDPOINT_HEADER`](crate::disagg::PREFILL_ENDPOINT_HEADER).
    pub fn prefill(&self) -> Option<&PrefillStage> {
        self.prefill.as_ref()
    }

    /// The endpoint that should serve the request.
    pub fn primary(&self) -> &Arc<Endpoint> {
        &self.handle.endpoints()[0]
    }

    /// The ordered fallbacks.
    pub fn fallbacks(&self) -> &[Arc<Endpoint>] {
        self.handle.endpoints().get(1..).unwrap_or(&[])
    }

    /// Primary first, then the fallbacks in order.
    pub fn endpoints(&self) -> &[Arc<Endpoint>] {
        self.handle.endpoints()
    }

    /// The request's id (its own, or the one generated for it).
    pub fn request_id(&self) -> &str {
        self.handle.id()
    }

    /// The name of the profile that decided.
    pub fn profile(&self) -> &str {
        self.breakdown.profile.name()
    }

    /// `ip:port[,ip:port...]`: the value of `x-gateway-destination-endpoint`.
    pub fn destination_header(&self) -> String {
        let mut out = String::new();
        for (i, e) in self.handle.endpoints().iter().enumerate() {
            if i > 0 {
                out.push(',');
            }
            out.push_str(e.address());
        }
        out
    }

    /// The request's handle.
    pub fn handle(&self) -> &RequestHandle {
        &self.handle
    }

    /// The request's handle, mutably (to report the first token or move to a fallback).
    pub fn handle_mut(&mut self) -> &mut RequestHandle {
        &mut self.handle
    }

    /// Keeps only the handle: what an adapter holds while the response streams.
    pub fn into_handle(self) -> RequestHandle {
        self.handle
    }

    /// The request ended as `completion` says (see [`RequestHandle::finish`]).
    pub fn finish(self, completion: Completion) {
        self.handle.finish(completion);
    }
}

/// A scorer's column in a [`Breakdown`].
#[derive(Debug, Clone, Serialize)]
pub struct ScorerColumn {
    /// Plugin name.
    pub name: Arc<str>,
    /// Category.
    pub category: Category,
    /// Weight in force for this pick.
    pub weight: f64,
}

/// One candidate's row in a [`Breakdown`].
#[derive(Debug, Clone, Serialize)]
pub struct BreakdownRow {
    /// Candidate address (empty if the endpoint has since left the pool's snapshot).
    pub address: Arc<str>,
    /// One score per scorer column.
    pub scores: Vec<Score>,
    /// Σ weight × score.
    pub total: f64,
    /// Position in the pick (0 = primary), when picked.
    pub rank: Option<usize>,
    /// Figures plugins recorded for this candidate beside their scores (a predicted latency,
    /// a headroom), by column; see [`Annotations`].
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub notes: Vec<(Arc<str>, f64)>,
}

/// Every scorer's raw score and weight for every candidate that survived the filters, so any
/// pick can be explained.
///
/// It is recorded cheaply on the request path (flat arrays, no per-row allocation); the row and
/// column views are built when asked for.
pub struct Breakdown {
    pub(crate) candidates_before_filters: usize,
    pub(crate) profile: Arc<Profile>,
    pub(crate) weights: Vec<f64>,
    pub(crate) snapshot: Arc<PoolSnapshot>,
    pub(crate) candidates: Vec<EndpointId>,
    /// Column-major: `scores[s * n + i]` is scorer `s` on candidate `i`.
    pub(crate) scores: Vec<Score>,
    pub(crate) totals: Vec<f64>,
    pub(crate) picked: Vec<usize>,
    pub(crate) annotations: Annotations,
}

impl Breakdown {
    /// Candidates before filtering.
    pub fn candidates_before_filters(&self) -> usize {
        self.candidates_before_filters
    }

    /// Number of scored candidates (after filters).
    pub fn len(&self) -> usize {
        self.candidates.len()
    }

    /// Whether no candidate was scored.
    pub fn is_empty(&self) -> bool {
        self.candidates.is_empty()
    }

    /// The scored candidates' ids, in scoring order.
    pub fn candidates(&self) -> &[EndpointId] {
        &self.candidates
    }

    /// Scorer `s`'s score for candidate `i`.
    pub fn score(&self, s: usize, i: usize) -> Option<Score> {
        self.scores.get(s * self.candidates.len() + i).copied()
    }

    /// Candidate `i`'s weighted total.
    pub fn total(&self, i: usize) -> Option<f64> {
        self.totals.get(i).copied()
    }

    /// Candidate indexes picked, primary first.
    pub fn picked(&self) -> &[usize] {
        &self.picked
    }

    /// The name of the profile that scored.
    pub fn profile(&self) -> &str {
        self.profile.name()
    }

    /// The figures plugins recorded beside their scores this cycle.
    pub fn annotations(&self) -> &Annotations {
        &self.annotations
    }

    /// The picker's plugin name.
    pub fn picker(&self) -> &str {
        self.profile.picker_name()
    }

    /// The scorer columns with the weights in force for this pick.
    pub fn scorers(&self) -> Vec<ScorerColumn> {
        self.profile
            .scorers()
            .iter()
            .zip(&self.weights)
            .map(|(e, &weight)| ScorerColumn {
                name: Arc::clone(&e.name),
                category: e.category,
                weight,
            })
            .collect()
    }

    /// One row per scored candidate.
    pub fn rows(&self) -> Vec<BreakdownRow> {
        let n = self.candidates.len();
        let m = self.weights.len();
        let mut rank = vec![None; n];
        for (r, &i) in self.picked.iter().enumerate() {
            if let Some(slot) = rank.get_mut(i) {
                *slot = Some(r);
            }
        }
        self.candidates
            .iter()
            .enumerate()
            .map(|(i, id)| BreakdownRow {
                address: self
                    .snapshot
                    .get(*id)
                    .map(|e| Arc::clone(e.address_arc()))
                    .unwrap_or_else(|| Arc::from("")),
                scores: (0..m).map(|s| self.scores[s * n + i]).collect(),
                total: self.totals[i],
                rank: rank[i],
                notes: self
                    .annotations
                    .columns()
                    .filter_map(|c| Some((Arc::clone(c), self.annotations.get(c, *id)?)))
                    .collect(),
            })
            .collect()
    }
}

impl Drop for Breakdown {
    /// Keeps the breakdown's buffers for this thread's next pick (see the scheduler's
    /// per-thread spares).
    fn drop(&mut self) {
        use crate::scheduler::spare;
        spare::give_floats(std::mem::take(&mut self.weights));
        spare::give_ids(std::mem::take(&mut self.candidates));
        spare::give_scores(std::mem::take(&mut self.scores));
        spare::give_floats(std::mem::take(&mut self.totals));
        spare::give_indexes(std::mem::take(&mut self.picked));
    }
}

impl fmt::Debug for Breakdown {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Breakdown")
            .field("profile", &self.profile.name())
            .field("scorers", &self.scorers())
            .field("rows", &self.rows())
            .finish()
    }
}

impl Serialize for Breakdown {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        #[derive(Serialize)]
        struct View<'a> {
            profile: &'a str,
            picker: &'a str,
            candidates_before_filters: usize,
            scorers: Vec<ScorerColumn>,
            rows: Vec<BreakdownRow>,
        }
        View {
            profile: self.profile.name(),
            picker: self.picker(),
            candidates_before_filters: self.candidates_before_filters,
            scorers: self.scorers(),
            rows: self.rows(),
        }
        .serialize(serializer)
    }
}

impl fmt::Display for Breakdown {
    /// A small text table, picked rows marked with their rank.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{:<24}", "endpoint")?;
        for c in self.scorers() {
            write!(f, " {:>30}", format!("{}×{:.2}", c.name, c.weight))?;
        }
        write!(f, " {:>8} {:>5}", "total", "rank")?;
        for c in self.annotations.columns() {
            write!(f, " {:>36}", c)?;
        }
        writeln!(f)?;
        for row in self.rows() {
            write!(f, "{:<24}", row.address)?;
            for s in &row.scores {
                let mark = if s.neutral { "~" } else { " " };
                write!(f, " {:>29.3}{}", s.value, mark)?;
            }
            let rank = row.rank.map(|r| r.to_string()).unwrap_or_default();
            write!(f, " {:>8.3} {:>5}", row.total, rank)?;
            for c in self.annotations.columns() {
                match row.notes.iter().find(|(n, _)| n == c) {
                    Some((_, v)) => write!(f, " {v:>36.3}")?,
                    None => write!(f, " {:>36}", "-")?,
                }
            }
            writeln!(f)?;
        }
        write!(
            f,
            "(~ = neutral: the scorer could not judge; profile: {}; picker: {})",
            self.profile.name(),
            self.picker()
        )
    }
}
