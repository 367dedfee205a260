//! `context-length-aware` (upstream's name): routes a request by its context length to the
//! endpoints whose label says they serve that range (say, long-context servers for long
//! prompts). One plugin with two facets, as upstream: a scorer, and a filter when
//! `enableFiltering` is set.
//!
//! An endpoint's range is its label `label` (default `llm-d.ai/context-length-range`), written
//! `min-max` in tokens. The request's length is its prompt tokens (the `token-producer`'s count
//! when one is declared, else Shepherd's estimate of 4 bytes a token).
//!
//! | endpoint | score | filter (`enableFiltering: true`) |
//! |---|---|---|
//! | no label | 0.5 | kept |
//! | label that does not parse | 0 | dropped |
//! | length within `[min, max]` | `0.3 + 0.7 × (0.7 × 1/(1 + width/10000) + 0.3 × (max − length)/width)` (1 when width is 0): narrower ranges and more headroom score higher | kept |
//! | length outside | `0.3 / (1 + distance/1000)` | dropped |
//!
//! An [`Category::Affinity`] scorer, as upstream.
//!
//! ```
//! use shepherd_scorers::scorers::context_length::{ContextRange, range_score};
//!
//! let long = ContextRange::parse("8192-131072").unwrap();
//! let short = ContextRange::parse("0-8192").unwrap();
//! assert!(range_score(2_000, short) > range_score(2_000, long));
//! assert!(range_score(20_000, long) > range_score(20_000, short));
//! assert!(ContextRange::parse("9-1").is_none());
//! ```

use std::sync::{Arc, OnceLock};

use parking_lot::RwLock;
use serde::Deserialize;
use shepherd_scheduler_core::config::{PluginArgs, PluginError};
use shepherd_scheduler_core::endpoint::{Endpoint, EndpointLabels};
use shepherd_scheduler_core::plugin::{
    Category, CycleState, Filter, PluginInstance, Score, Scorer,
};
use shepherd_scheduler_core::request::InferenceRequest;
use shepherd_scheduler_core::resources::Resources;

use crate::producers::{TokenCount, TokenProducer};

/// Registry type name.
pub const TYPE_NAME: &str = "context-length-aware";

/// Upstream's default label.
pub const DEFAULT_LABEL: &str = "llm-d.ai/context-length-range";

/// The `context-length-aware` parameters.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase", default)]
pub struct ContextLengthParameters {
    /// The label holding an endpoint's `min-max` range.
    pub label: String,
    /// Also drop endpoints whose range excludes the request.
    pub enable_filtering: bool,
}

impl Default for ContextLengthParameters {
    fn default() -> Self {
        ContextLengthParameters {
            label: DEFAULT_LABEL.into(),
            enable_filtering: false,
        }
    }
}

/// A `min-max` context range, in tokens.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ContextRange {
    /// Smallest length served.
    pub min: u64,
    /// Largest length served.
    pub max: u64,
}

impl ContextRange {
    /// Parses `min-max` (spaces around the numbers allowed); `None` when malformed or when
    /// min > max.
    pub fn parse(text: &str) -> Option<ContextRange> {
        let (min, max) = text.split_once('-')?;
        if max.contains('-') {
            return None;
        }
        let min: u64 = min.trim().parse().ok()?;
        let max: u64 = max.trim().parse().ok()?;
        (min <= max).then_some(ContextRange { min, max })
    }

    fn contains(self, length: u64) -> bool {
        (self.min..=self.max).contains(&length)
    }
}

/// The score an endpoint gets whose range is far from the request's length.
const FALLBACK: f64 = 0.3;

/// The part of a range's score that depends on the range alone.
#[inline]
fn width_score(range: ContextRange) -> f64 {
    1.0 / (1.0 + (range.max - range.min) as f64 / 10_000.0)
}

/// Upstream's score of a request of `length` tokens on an endpoint serving `range`.
pub fn range_score(length: u64, range: ContextRange) -> f64 {
    scored(length, range, width_score(range))
}

/// [`range_score`] with the range's [`width_score`] computed beforehand (the same arithmetic).
#[inline]
fn scored(length: u64, range: ContextRange, width_score: f64) -> f64 {
    if range.contains(length) {
        let width = range.max - range.min;
        if width == 0 {
            return 1.0;
        }
        let position = (range.max - length) as f64 / width as f64;
        return FALLBACK + (0.7 * width_score + 0.3 * position) * (1.0 - FALLBACK);
    }
    let distance = if length > range.max {
        length - range.max
    } else {
        range.min - length
    };
    FALLBACK / (1.0 + distance as f64 / 1000.0)
}

/// The plugin (both facets; see the module docs).
#[derive(Debug)]
pub struct ContextLengthAware {
    label: String,
    filtering: bool,
    resources: Arc<Resources>,
    tokens: OnceLock<Option<Arc<TokenProducer>>>,
    /// What the endpoints' labels said, remembered: a pick parses none and reads no label
    /// map.
    parsed: RwLock<Remembered>,
}

/// The remembered parses.
#[derive(Debug, Default)]
struct Remembered {
    /// Per endpoint id: the stamp of the labels it was parsed from
    /// ([`Endpoint::labels_stamp`]) and what they said. Labels change rarely.
    endpoints: Vec<Option<Parsed>>,
    /// The distinct ranges seen, in the order first seen (at most [`MEMO`]; later ones get
    /// no slot): a pick scores each once, however many endpoints share it.
    ranges: Vec<ContextRange>,
}

impl Remembered {
    /// `range`'s memo slot, given one if there is room.
    fn slot_of(&mut self, range: ContextRange) -> u8 {
        if let Some(i) = self.ranges.iter().position(|r| *r == range) {
            return i as u8;
        }
        if self.ranges.len() < MEMO {
            self.ranges.push(range);
            return (self.ranges.len() - 1) as u8;
        }
        NO_SLOT
    }
}

/// What an endpoint's label says.
#[derive(Debug, Clone, Copy)]
enum Labelled {
    None,
    Bad,
    /// A range, with its [`width_score`] and its slot in a pick's memo ([`NO_SLOT`]: none).
    Range(ContextRange, f64, u8),
}

/// How many distinct ranges a pick scores once each (pools have a handful).
const MEMO: usize = 16;

/// [`Labelled::Range`]'s slot of a range not in the memo.
const NO_SLOT: u8 = u8::MAX;

/// One endpoint's remembered parse.
#[derive(Debug, Clone, Copy)]
struct Parsed {
    stamp: u64,
    said: Labelled,
}

/// Endpoint ids past this are parsed at every pick instead of remembered (ids are dense, and
/// a pool this large is far past any real one).
const MAX_REMEMBERED: usize = 1 << 16;

impl ContextLengthAware {
    fn length(&self, request: &InferenceRequest) -> u64 {
        let producer = self.tokens.get_or_init(|| {
            self.resources
                .all::<TokenProducer>()
                .into_iter()
                .next()
                .map(|(_, p)| p)
        });
        let count = match producer {
            Some(p) => p.count(request),
            None => TokenCount::of(request),
        };
        count.tokens as u64
    }

    fn parse(&self, labels: &EndpointLabels) -> Labelled {
        match labels.get(&self.label) {
            None => Labelled::None,
            Some(text) => ContextRange::parse(text).map_or(Labelled::Bad, |r| {
                Labelled::Range(r, width_score(r), NO_SLOT)
            }),
        }
    }

    /// Calls `each` with every candidate's index and label verdict, reading the remembered
    /// parses under one read lock and remembering the new ones afterwards.
    fn for_each_range(&self, candidates: &[&Arc<Endpoint>], mut each: impl FnMut(usize, Labelled)) {
        let mut fresh: Vec<(usize, Parsed)> = Vec::new();
        {
            let parsed = self.parsed.read();
            let parsed = &parsed.endpoints;
            for (i, endpoint) in candidates.iter().enumerate() {
                // The stamp first: labels set after it was read show as a new stamp.
                let stamp = endpoint.labels_stamp();
                let slot = endpoint.id().0 as usize;
                match parsed.get(slot) {
                    Some(Some(seen)) if seen.stamp == stamp => each(i, seen.said),
                    _ => {
                        let said = self.parse(&endpoint.labels());
                        each(i, said);
                        if slot < MAX_REMEMBERED {
                            fresh.push((slot, Parsed { stamp, said }));
                        }
                    }
                }
            }
        }
        if !fresh.is_empty() {
            let mut parsed = self.parsed.write();
            for (slot, mut entry) in fresh {
                if let Labelled::Range(range, _, memo) = &mut entry.said {
                    *memo = parsed.slot_of(*range);
                }
                if parsed.endpoints.len() <= slot {
                    parsed.endpoints.resize(slot + 1, None);
                }
                parsed.endpoints[slot] = Some(entry);
            }
        }
    }
}

impl Scorer for ContextLengthAware {
    fn category(&self) -> Category {
        Category::Affinity
    }

    fn score(&self, cycle: &mut CycleState<'_>, candidates: &[&Arc<Endpoint>], out: &mut [Score]) {
        let length = self.length(cycle.request);
        // Each distinct range scored once (NaN: not yet).
        let mut memo = [f64::NAN; MEMO];
        self.for_each_range(candidates, |i, said| {
            if let Some(slot) = out.get_mut(i) {
                // Every value below is in [0, 1] by construction.
                slot.neutral = false;
                slot.value = match said {
                    Labelled::None => 0.5,
                    Labelled::Bad => 0.0,
                    Labelled::Range(range, width, memo_slot) => {
                        match memo.get_mut(usize::from(memo_slot)) {
                            Some(known) if !known.is_nan() => *known,
                            Some(unknown) => {
                                *unknown = scored(length, range, width);
                                *unknown
                            }
                            None => scored(length, range, width),
                        }
                    }
                };
            }
        });
    }
}

impl Filter for ContextLengthAware {
    fn filter(&self, cycle: &mut CycleState<'_>, candidates: &mut Vec<&Arc<Endpoint>>) {
        if !self.filtering {
            return;
        }
        let length = self.length(cycle.request);
        // One bit per candidate to keep (a pick's candidates fit in a few words).
        let mut keep = vec![false; candidates.len()];
        self.for_each_range(candidates, |i, said| {
            keep[i] = match said {
                Labelled::None => true,
                Labelled::Bad => false,
                Labelled::Range(range, _, _) => range.contains(length),
            };
        });
        let mut i = 0;
        candidates.retain(|_| {
            let kept = keep[i];
            i += 1;
            kept
        });
    }
}

/// Builds a `context-length-aware` plugin (a scorer and a filter).
pub fn factory(args: &PluginArgs<'_>) -> Result<PluginInstance, PluginError> {
    let parameters: ContextLengthParameters = args.parse()?;
    if parameters.label.is_empty() {
        return Err(PluginError::invalid("label", "must be specified"));
    }
    let plugin = Arc::new(ContextLengthAware {
        label: parameters.label,
        filtering: parameters.enable_filtering,
        resources: Arc::clone(args.resources),
        tokens: OnceLock::new(),
        parsed: RwLock::new(Remembered::default()),
    });
    Ok(PluginInstance::scorer(plugin.clone()).with_filter(plugin))
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    #[test]
    fn a_label_change_is_seen_at_the_next_pick() {
        use shepherd_scheduler_core::clock::Timestamp;
        use shepherd_scheduler_core::endpoint::Pool;
        use shepherd_scheduler_core::request::Prompt;
        use shepherd_scheduler_core::shared::SharedState;
        use std::time::Duration;

        let shared = SharedState::new(Arc::new(Pool::new()));
        let args = PluginArgs::new(TYPE_NAME, TYPE_NAME, &serde_json::Value::Null, &shared, 0);
        let plugin = factory(&args).unwrap();
        let scorer = plugin.as_scorer().unwrap();
        let pool = Pool::new();
        pool.set_members(["10.0.0.1:8000"]);
        let snapshot = pool.snapshot();
        let candidates: Vec<&Arc<Endpoint>> = snapshot.endpoints().iter().collect();
        let request = InferenceRequest::new("r", "m", Prompt::Text("x".repeat(4000)));
        let mut out = [Score::NEUTRAL];
        let mut score = |labels: Option<&str>| {
            if let Some(range) = labels {
                candidates[0].set_labels(
                    [(DEFAULT_LABEL.to_string(), range.to_string())]
                        .into_iter()
                        .collect(),
                );
            }
            let mut cycle = CycleState::new(&request, Timestamp::ZERO, Duration::from_secs(1));
            scorer.score(&mut cycle, &candidates, &mut out);
            out[0].value
        };
        assert_eq!(score(None), 0.5, "no label");
        assert_eq!(
            score(Some("0-1000")),
            range_score(1000, ContextRange { min: 0, max: 1000 })
        );
        assert_eq!(
            score(None),
            range_score(1000, ContextRange { min: 0, max: 1000 })
        );
        assert_eq!(
            score(Some("5000-9000")),
            range_score(
                1000,
                ContextRange {
                    min: 5000,
                    max: 9000
                }
            )
        );
        assert_eq!(score(Some("bad")), 0.0);
    }

    #[test]
    fn shared_and_distinct_ranges_score_as_upstream_past_the_memo() {
        use shepherd_scheduler_core::clock::Timestamp;
        use shepherd_scheduler_core::endpoint::Pool;
        use shepherd_scheduler_core::request::Prompt;
        use shepherd_scheduler_core::shared::SharedState;
        use std::time::Duration;

        let shared = SharedState::new(Arc::new(Pool::new()));
        let args = PluginArgs::new(TYPE_NAME, TYPE_NAME, &serde_json::Value::Null, &shared, 0);
        let plugin = factory(&args).unwrap();
        let scorer = plugin.as_scorer().unwrap();
        let pool = Pool::new();
        // 200 endpoints over 100 distinct ranges: more than the memo holds, each shared.
        pool.set_members((0..200).map(|i| format!("10.0.{}.{}:8000", i / 100, i % 100)));
        let snapshot = pool.snapshot();
        let candidates: Vec<&Arc<Endpoint>> = snapshot.endpoints().iter().collect();
        let range_of = |i: usize| ContextRange {
            min: (i % 100) as u64 * 37,
            max: (i % 100) as u64 * 37 + 500 + (i % 7) as u64,
        };
        for (i, e) in candidates.iter().enumerate() {
            let r = range_of(i);
            e.set_labels(
                [(DEFAULT_LABEL.to_string(), format!("{}-{}", r.min, r.max))]
                    .into_iter()
                    .collect(),
            );
        }
        let request = InferenceRequest::new("r", "m", Prompt::Text("x".repeat(4000)));
        let length = TokenCount::of(&request).tokens as u64;
        let mut out = vec![Score::NEUTRAL; candidates.len()];
        // The first pick parses, the later ones read the remembered parses and the memo.
        for _ in 0..3 {
            let mut cycle = CycleState::new(&request, Timestamp::ZERO, Duration::from_secs(1));
            scorer.score(&mut cycle, &candidates, &mut out);
            for (i, score) in out.iter().enumerate() {
                assert_eq!(
                    score.value,
                    range_score(length, range_of(i)),
                    "endpoint {i}"
                );
            }
        }
    }

    #[test]
    fn upstreams_scores_on_its_examples() {
        let r = ContextRange { min: 0, max: 4096 };
        // Within: 0.3 + 0.7 × (0.7/(1+0.4096) + 0.3 × (4096−1000)/4096).
        let expected = 0.3 + 0.7 * (0.7 / 1.4096 + 0.3 * 3096.0 / 4096.0);
        assert!((range_score(1000, r) - expected).abs() < 1e-12);
        assert_eq!(range_score(5, ContextRange { min: 5, max: 5 }), 1.0);
        // Outside by 1000 tokens: 0.3 / 2.
        assert!((range_score(5096, r) - 0.15).abs() < 1e-12);
        assert_eq!(
            ContextRange::parse(" 10 - 20 "),
            Some(ContextRange { min: 10, max: 20 })
        );
        for bad in ["", "10", "a-b", "1-2-3", "-5"] {
            assert!(ContextRange::parse(bad).is_none(), "{bad}");
        }
    }
}
