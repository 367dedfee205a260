//! Model rewrites (`InferenceModelRewrite`): a request for one model name is sent to another,
//! or split across several by weight — canary and LoRA rollouts without touching clients.
//!
//! Precedence follows upstream's: a rule matching the model exactly wins over a generic rule
//! (one with no `matches`); among several, the oldest object (by creation time, then name)
//! wins, and within one object the first rule in list order. Target choice: each target's
//! `weight` over the sum of weights; targets without a weight are never chosen when others
//! have one; with no weights at all, every target is equally likely.
//!
//! ```
//! use shepherd_runtime::policies::{ModelRewrites, RewriteObject, RewriteRule, RewriteTarget};
//!
//! let canary = RewriteObject {
//!     name: "food-review-canary".into(),
//!     created: "2026-01-01T00:00:00Z".into(),
//!     rules: vec![RewriteRule {
//!         matches: vec!["food-review".into()],
//!         targets: vec![
//!             RewriteTarget { model: "food-review-v1".into(), weight: Some(90) },
//!             RewriteTarget { model: "food-review-v2".into(), weight: Some(10) },
//!         ],
//!     }],
//! };
//! let rewrites = ModelRewrites::new(vec![canary]);
//! // `draw` is uniform in 0..u64::MAX: the low draws take the first 90 %.
//! assert_eq!(rewrites.choose("food-review", 0).unwrap().target.as_ref(), "food-review-v1");
//! assert_eq!(rewrites.choose("food-review", u64::MAX).unwrap().target.as_ref(), "food-review-v2");
//! assert!(rewrites.choose("other-model", 0).is_none());
//! ```

use std::collections::HashMap;
use std::sync::Arc;

/// One `InferenceModelRewrite` object of the pool.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RewriteObject {
    /// `metadata.name`.
    pub name: String,
    /// `metadata.creationTimestamp` (RFC 3339, as the API server writes it; older sorts first).
    pub created: String,
    /// `spec.rules`, in order.
    pub rules: Vec<RewriteRule>,
}

/// One rule: the models it matches (none: every model) and where they go.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RewriteRule {
    /// `matches[].model.value` (type `Exact`); empty: the rule is generic.
    pub matches: Vec<String>,
    /// `targets`: the models to send to.
    pub targets: Vec<RewriteTarget>,
}

/// A weighted destination.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RewriteTarget {
    /// `modelRewrite`.
    pub model: String,
    /// `weight` (1 to 1,000,000 upstream), when given.
    pub weight: Option<u32>,
}

/// A rewrite decided for one request.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RewriteChoice {
    /// The `InferenceModelRewrite` whose rule applied (the `model_rewrite_name` label).
    pub rule: Arc<str>,
    /// The model the request goes to (may equal the incoming one).
    pub target: Arc<str>,
}

/// A rule ready to choose: its object's name and its targets' cumulative weights.
#[derive(Debug)]
struct Compiled {
    object: Arc<str>,
    /// (cumulative weight, model); a target without a weight adds 0 when others have one.
    targets: Vec<(u64, Arc<str>)>,
    total: u64,
}

/// Every rewrite rule of the pool, indexed for a lookup per request. Built whole from the
/// objects each time one changes (there are few).
#[derive(Debug, Default)]
pub struct ModelRewrites {
    exact: HashMap<String, Arc<Compiled>>,
    generic: Option<Arc<Compiled>>,
    objects: usize,
}

impl ModelRewrites {
    /// The rules of `objects`, with upstream's precedence.
    pub fn new(mut objects: Vec<RewriteObject>) -> Self {
        objects.sort_by(|a, b| a.created.cmp(&b.created).then(a.name.cmp(&b.name)));
        let mut rewrites = ModelRewrites {
            objects: objects.len(),
            ..Default::default()
        };
        for object in &objects {
            let name: Arc<str> = Arc::from(object.name.as_str());
            for rule in &object.rules {
                let Some(compiled) = compile(&name, &rule.targets) else {
                    continue;
                };
                let compiled = Arc::new(compiled);
                if rule.matches.is_empty() {
                    rewrites.generic.get_or_insert(compiled);
                } else {
                    for model in &rule.matches {
                        rewrites
                            .exact
                            .entry(model.clone())
                            .or_insert_with(|| Arc::clone(&compiled));
                    }
                }
            }
        }
        rewrites
    }

    /// Whether no rule applies to anything.
    pub fn is_empty(&self) -> bool {
        self.exact.is_empty() && self.generic.is_none()
    }

    /// How many objects the rules came from.
    pub fn objects(&self) -> usize {
        self.objects
    }

    /// Every model name the rules name (sources and targets): the names metric labels keep.
    pub fn model_names(&self) -> Vec<Arc<str>> {
        let mut names: Vec<Arc<str>> = self.exact.keys().map(|k| Arc::from(k.as_str())).collect();
        for compiled in self.exact.values().chain(self.generic.iter()) {
            names.extend(compiled.targets.iter().map(|(_, m)| Arc::clone(m)));
        }
        names.sort();
        names.dedup();
        names
    }

    /// Where a request for `model` goes, with `draw` a uniform random number over the whole
    /// `u64` range; `None` when no rule matches.
    pub fn choose(&self, model: &str, draw: u64) -> Option<RewriteChoice> {
        let compiled = self.exact.get(model).or(self.generic.as_ref())?;
        let target = if compiled.total == 0 {
            let i = scale(draw, compiled.targets.len() as u64) as usize;
            &compiled.targets.get(i)?.1
        } else {
            let point = scale(draw, compiled.total);
            &compiled
                .targets
                .iter()
                .find(|(cumulative, _)| point < *cumulative)
                .or(compiled.targets.last())?
                .1
        };
        Some(RewriteChoice {
            rule: Arc::clone(&compiled.object),
            target: Arc::clone(target),
        })
    }
}

/// `draw` (uniform over `u64`) mapped uniformly onto `0..n` (`n` > 0).
fn scale(draw: u64, n: u64) -> u64 {
    ((u128::from(draw) * u128::from(n)) >> 64) as u64
}

fn compile(object: &Arc<str>, targets: &[RewriteTarget]) -> Option<Compiled> {
    if targets.is_empty() {
        return None;
    }
    let mut total = 0u64;
    let targets = targets
        .iter()
        .map(|t| {
            total += u64::from(t.weight.unwrap_or(0));
            (total, Arc::from(t.model.as_str()))
        })
        .collect();
    Some(Compiled {
        object: Arc::clone(object),
        targets,
        total,
    })
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use super::*;

    fn object(name: &str, created: &str, rules: Vec<RewriteRule>) -> RewriteObject {
        RewriteObject {
            name: name.into(),
            created: created.into(),
            rules,
        }
    }

    fn rule(matches: &[&str], targets: &[(&str, Option<u32>)]) -> RewriteRule {
        RewriteRule {
            matches: matches.iter().map(|m| m.to_string()).collect(),
            targets: targets
                .iter()
                .map(|(m, w)| RewriteTarget {
                    model: m.to_string(),
                    weight: *w,
                })
                .collect(),
        }
    }

    fn target(r: &ModelRewrites, model: &str, draw: u64) -> Option<String> {
        r.choose(model, draw).map(|c| c.target.to_string())
    }

    #[test]
    fn exact_beats_generic_and_oldest_wins() {
        let r = ModelRewrites::new(vec![
            object(
                "new",
                "2026-02-01T00:00:00Z",
                vec![rule(&["a"], &[("a-new", None)])],
            ),
            object(
                "catch-all",
                "2026-03-01T00:00:00Z",
                vec![rule(&[], &[("any", None)])],
            ),
            object(
                "old",
                "2026-01-01T00:00:00Z",
                vec![rule(&["a"], &[("a-old", None)])],
            ),
        ]);
        assert_eq!(target(&r, "a", 0).as_deref(), Some("a-old"));
        assert_eq!(r.choose("a", 0).unwrap().rule.as_ref(), "old");
        assert_eq!(target(&r, "b", 0).as_deref(), Some("any"));
        assert_eq!(r.objects(), 3);
    }

    #[test]
    fn first_rule_of_an_object_wins() {
        let r = ModelRewrites::new(vec![object(
            "x",
            "2026-01-01T00:00:00Z",
            vec![
                rule(&["a"], &[("first", None)]),
                rule(&["a", "b"], &[("second", None)]),
            ],
        )]);
        assert_eq!(target(&r, "a", 0).as_deref(), Some("first"));
        assert_eq!(target(&r, "b", 0).as_deref(), Some("second"));
    }

    #[test]
    fn unweighted_targets_lose_to_weighted_ones_and_share_evenly_alone() {
        let r = ModelRewrites::new(vec![object(
            "x",
            "t",
            vec![
                rule(&["mixed"], &[("no-weight", None), ("weighted", Some(5))]),
                rule(&["even"], &[("e0", None), ("e1", None)]),
            ],
        )]);
        for draw in [0, u64::MAX / 3, u64::MAX] {
            assert_eq!(target(&r, "mixed", draw).as_deref(), Some("weighted"));
        }
        assert_eq!(target(&r, "even", 0).as_deref(), Some("e0"));
        assert_eq!(target(&r, "even", u64::MAX).as_deref(), Some("e1"));
    }

    #[test]
    fn weights_split_the_draws_in_proportion() {
        let r = ModelRewrites::new(vec![object(
            "x",
            "t",
            vec![rule(&["m"], &[("v1", Some(90)), ("v2", Some(10))])],
        )]);
        let n = 10_000u64;
        let v2 = (0..n)
            .filter(|i| target(&r, "m", i * (u64::MAX / n)).as_deref() == Some("v2"))
            .count();
        assert!(v2.abs_diff(1_000) <= 1, "{v2}");
        assert_eq!(r.model_names().len(), 3);
    }

    #[test]
    fn rules_without_targets_are_ignored() {
        let r = ModelRewrites::new(vec![object("x", "t", vec![rule(&["m"], &[])])]);
        assert!(r.is_empty());
        assert!(r.choose("m", 0).is_none());
    }
}
