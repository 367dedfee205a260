//! Upstream's `program-aware-fairness`: a band's flows (programs, named by the fairness id)
//! compete by **least attained service** (`strategy: las`, the only one), so a program that
//! has had little service lately goes first, with the age of its oldest waiting request as the
//! tie-breaker.
//!
//! At each dispatch from such a band, every non-empty flow scores
//! `lasWeightService × (1 − norm(service)) + lasWeightHeadWait × norm(headWait)`, where `norm`
//! scales each signal to `[0, 1]` over the competing flows (0 when they are all equal), and
//! the best score is served (on a tie, the first in the band's round). A program's attained
//! service decays with the half-life `lasHalfLifeSeconds` (`0`: no decay), and a program idle
//! for `evictionTtlSeconds` is forgotten, checked every `evictionSweepSeconds`.
//!
//! **Charging.** As upstream, a program is charged `prompt_tokens + 2 × completion_tokens`
//! of each of its requests' `usage` when the request completes (a request without usage, a
//! failure or a cancellation, costs nothing), whether it waited in the queue or went straight
//! through. The [`ProgramLedger`] does it: the flow controller notes each admitted request's
//! id and program ([`ProgramLedger::expect`]), and the ledger, a
//! [`CompletionHook`] every scheduler over the same shared resources runs (installed with
//! [`ProgramLedger::install`]), charges the program when the request's handle finishes. At
//! most [`MAX_PROGRAMS`] programs are tracked (a new one beyond that scores as unserved until
//! an idle one is forgotten) and at most [`MAX_EXPECTED`] admitted requests awaited (the
//! oldest forgotten first: its completion is then not charged). Upstream's Prometheus series
//! (`program_aware_*`) are not exported.
//!
//! ```
//! use shepherd_scheduler_core::flow::program_aware::ProgramAwareSettings;
//!
//! let settings = ProgramAwareSettings::from_parameters(&serde_json::json!({
//!     "strategy": "las", "lasWeightService": 0.8, "lasWeightHeadWait": 0.2,
//!     "lasHalfLifeSeconds": 60, "evictionTtlSeconds": 3600, "evictionSweepSeconds": 300,
//! })).unwrap();
//! assert_eq!(settings, ProgramAwareSettings::default());
//! assert!(ProgramAwareSettings::from_parameters(&serde_json::json!({"strategy": "drr"})).is_err());
//! ```

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use hashbrown::HashMap;
use parking_lot::Mutex;
use serde::Deserialize;

use super::config::FlowConfigError;
use crate::clock::Timestamp;
use crate::completion::{CompletedRequest, Completion, CompletionHook};
use crate::resources::Resources;

/// Upstream's plugin type.
pub const PROGRAM_AWARE_FAIRNESS_POLICY: &str = "program-aware-fairness";

/// Most programs whose attained service is tracked at once.
pub const MAX_PROGRAMS: usize = 65_536;

/// Most admitted requests whose completion the ledger awaits at once.
pub const MAX_EXPECTED: usize = 65_536;

/// The [`Resources`] name of the [`ProgramLedger`].
pub const PROGRAM_LEDGER: &str = "shepherd.flow.program-ledger";

/// Upstream's cost weights: a prompt token counts once, a completion token twice.
const WEIGHT_INPUT_TOKEN: f64 = 1.0;
const WEIGHT_OUTPUT_TOKEN: f64 = 2.0;

/// The policy's parameters, validated (see the [module docs](self)).
#[derive(Debug, Clone, PartialEq)]
pub struct ProgramAwareSettings {
    /// Weight of the inverted attained service.
    pub weight_service: f64,
    /// Weight of the head request's wait.
    pub weight_head_wait: f64,
    /// Half-life of attained service; `None`: no decay.
    pub half_life: Option<Duration>,
    /// A program idle this long is forgotten; `None`: never.
    pub eviction_ttl: Option<Duration>,
    /// How often idle programs are looked for.
    pub eviction_sweep: Duration,
}

impl Default for ProgramAwareSettings {
    fn default() -> Self {
        ProgramAwareSettings {
            weight_service: 0.8,
            weight_head_wait: 0.2,
            half_life: Some(Duration::from_secs(60)),
            eviction_ttl: Some(Duration::from_secs(3600)),
            eviction_sweep: Duration::from_secs(300),
        }
    }
}

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
struct Params {
    strategy: Option<String>,
    eviction_ttl_seconds: Option<f64>,
    eviction_sweep_seconds: Option<f64>,
    las_weight_service: Option<f64>,
    las_weight_head_wait: Option<f64>,
    las_half_life_seconds: Option<f64>,
}

impl ProgramAwareSettings {
    /// Validates the plugin's `parameters` (`null`: none) as upstream does. As upstream's
    /// `omitempty` decoding, a `0` leaves a weight, the half-life or the TTL at its default.
    pub fn from_parameters(parameters: &serde_json::Value) -> Result<Self, FlowConfigError> {
        let p: Params =
            super::saturation::plugin_parameters(PROGRAM_AWARE_FAIRNESS_POLICY, parameters)?;
        let defaults = ProgramAwareSettings::default();
        let bad = |field: &str, message: String| FlowConfigError::Invalid {
            field: format!("{PROGRAM_AWARE_FAIRNESS_POLICY}.parameters.{field}"),
            message,
        };
        match p.strategy.as_deref() {
            None | Some("") | Some("las") => {}
            Some(other) => {
                return Err(bad(
                    "strategy",
                    format!("unknown strategy `{other}` (only `las`)"),
                ));
            }
        }
        let check = |field: &str,
                     value: Option<f64>,
                     positive: bool|
         -> Result<Option<f64>, FlowConfigError> {
            match value {
                Some(v) if !v.is_finite() => {
                    Err(bad(field, format!("must be a finite number, got {v}")))
                }
                Some(v) if positive && v <= 0.0 => Err(bad(field, format!("must be > 0, got {v}"))),
                Some(v) if v < 0.0 => Err(bad(field, format!("must be >= 0, got {v}"))),
                // 0 is Go's zero value: upstream's decoder leaves the default in place.
                Some(0.0) => Ok(None),
                other => Ok(other),
            }
        };
        let seconds = |s: f64| Duration::try_from_secs_f64(s).unwrap_or(Duration::MAX);
        let ttl = check("evictionTtlSeconds", p.eviction_ttl_seconds, false)?;
        let sweep = check("evictionSweepSeconds", p.eviction_sweep_seconds, true)?;
        let weight_service = check("lasWeightService", p.las_weight_service, false)?;
        let weight_head_wait = check("lasWeightHeadWait", p.las_weight_head_wait, false)?;
        let half_life = check("lasHalfLifeSeconds", p.las_half_life_seconds, false)?;
        Ok(ProgramAwareSettings {
            weight_service: weight_service.unwrap_or(defaults.weight_service),
            weight_head_wait: weight_head_wait.unwrap_or(defaults.weight_head_wait),
            half_life: half_life.map(seconds).or(defaults.half_life),
            eviction_ttl: ttl.map(seconds).or(defaults.eviction_ttl),
            eviction_sweep: sweep.map(seconds).unwrap_or(defaults.eviction_sweep),
        })
    }
}

#[derive(Debug, Clone, Copy)]
struct Attained {
    service: f64,
    /// When `service` was last decayed.
    anchor: Timestamp,
    /// When the program last had a request dispatched.
    active: Timestamp,
}

/// Each program's attained service, decayed lazily, bounded by [`MAX_PROGRAMS`].
#[derive(Debug, Default)]
pub(crate) struct ProgramServices {
    programs: HashMap<Box<str>, Attained, ahash::RandomState>,
    last_sweep: Option<Timestamp>,
}

impl ProgramServices {
    /// `program`'s attained service at `now` (0 when untracked).
    pub(crate) fn service(
        &mut self,
        program: &str,
        now: Timestamp,
        settings: &ProgramAwareSettings,
    ) -> f64 {
        match self.programs.get_mut(program) {
            Some(a) => {
                decay(a, now, settings);
                a.service
            }
            None => 0.0,
        }
    }

    /// Adds `cost` to `program`'s service at `now` (after decay), and forgets idle programs
    /// when a sweep is due.
    pub(crate) fn charge(
        &mut self,
        program: &str,
        cost: f64,
        now: Timestamp,
        settings: &ProgramAwareSettings,
    ) {
        self.sweep(now, settings);
        if let Some(a) = self.programs.get_mut(program) {
            decay(a, now, settings);
            a.service += cost;
            a.active = now;
            return;
        }
        if self.programs.len() < MAX_PROGRAMS {
            self.programs.insert(
                program.into(),
                Attained {
                    service: cost,
                    anchor: now,
                    active: now,
                },
            );
        }
    }

    /// How many programs are tracked.
    #[cfg(test)]
    pub(crate) fn len(&self) -> usize {
        self.programs.len()
    }

    fn sweep(&mut self, now: Timestamp, settings: &ProgramAwareSettings) {
        let Some(ttl) = settings.eviction_ttl else {
            return;
        };
        let due = self
            .last_sweep
            .is_none_or(|last| elapsed(last, now) >= settings.eviction_sweep);
        if !due {
            return;
        }
        self.last_sweep = Some(now);
        self.programs.retain(|_, a| elapsed(a.active, now) <= ttl);
    }
}

/// Each program's attained service, charged in tokens at completion (see the
/// [module docs](self)).
///
/// ```
/// use std::sync::Arc;
/// use shepherd_scheduler_core::clock::Timestamp;
/// use shepherd_scheduler_core::flow::program_aware::{ProgramAwareSettings, ProgramLedger};
///
/// let ledger = ProgramLedger::new(ProgramAwareSettings::default());
/// ledger.expect("req-1", "agent-a");
/// ledger.complete("req-1", Some((100, 50)), Timestamp::ZERO);
/// assert_eq!(ledger.service("agent-a", Timestamp::ZERO), 200.0); // 100 + 2 × 50
/// ledger.complete("req-1", Some((100, 50)), Timestamp::ZERO); // charged once
/// assert_eq!(ledger.service("agent-a", Timestamp::ZERO), 200.0);
/// ```
#[derive(Debug)]
pub struct ProgramLedger {
    settings: ProgramAwareSettings,
    state: Mutex<LedgerState>,
}

#[derive(Debug, Default)]
struct LedgerState {
    services: ProgramServices,
    /// Admitted request id → (program, admission number).
    expected: HashMap<Box<str>, (Box<str>, u64), ahash::RandomState>,
    /// Admission number → request id, oldest first (for the bound).
    order: BTreeMap<u64, Box<str>>,
    next: u64,
}

impl ProgramLedger {
    /// An empty ledger with these parameters.
    pub fn new(settings: ProgramAwareSettings) -> Self {
        ProgramLedger {
            settings,
            state: Mutex::new(LedgerState::default()),
        }
    }

    /// The ledger in `resources` ([`PROGRAM_LEDGER`]), made with `settings` if absent: every
    /// scheduler built over these resources afterwards runs it as a completion hook.
    pub fn install(resources: &Resources, settings: ProgramAwareSettings) -> Arc<ProgramLedger> {
        resources.get_or_insert_with(PROGRAM_LEDGER, || ProgramLedger::new(settings))
    }

    /// The parameters it runs with.
    pub fn settings(&self) -> &ProgramAwareSettings {
        &self.settings
    }

    /// Notes that request `id` of `program` was admitted: its completion will be charged to
    /// `program`.
    pub fn expect(&self, id: &str, program: &str) {
        let mut state = self.state.lock();
        let n = state.next;
        state.next += 1;
        if let Some((_, old)) = state.expected.insert(id.into(), (program.into(), n)) {
            state.order.remove(&old);
        }
        state.order.insert(n, id.into());
        while state.expected.len() > MAX_EXPECTED {
            let Some((_, oldest)) = state.order.pop_first() else {
                break;
            };
            state.expected.remove(&oldest);
        }
    }

    /// Request `id` completed at `now` with `usage` (`(prompt_tokens, completion_tokens)`):
    /// its program is charged `prompt + 2 × completion`. Nothing for a request not expected
    /// (or already charged).
    pub fn complete(&self, id: &str, usage: Option<(u64, u64)>, now: Timestamp) {
        let mut state = self.state.lock();
        let Some((program, n)) = state.expected.remove(id) else {
            return;
        };
        state.order.remove(&n);
        let Some((prompt, completion)) = usage else {
            return;
        };
        let cost = WEIGHT_INPUT_TOKEN * prompt as f64 + WEIGHT_OUTPUT_TOKEN * completion as f64;
        state.services.charge(&program, cost, now, &self.settings);
    }

    /// `program`'s attained service at `now`, in tokens (decayed).
    pub fn service(&self, program: &str, now: Timestamp) -> f64 {
        self.state
            .lock()
            .services
            .service(program, now, &self.settings)
    }

    /// How many admitted requests await their completion.
    pub fn expected_len(&self) -> usize {
        self.state.lock().expected.len()
    }
}

impl CompletionHook for ProgramLedger {
    fn on_complete(&self, request: &CompletedRequest<'_>, completion: &Completion) {
        let usage = completion
            .usage
            .as_ref()
            .map(|u| (u.prompt_tokens, u.completion_tokens));
        self.complete(request.id, usage, request.finished_at);
    }
}

fn elapsed(from: Timestamp, to: Timestamp) -> Duration {
    Duration::from_nanos(to.as_nanos().saturating_sub(from.as_nanos()))
}

fn decay(a: &mut Attained, now: Timestamp, settings: &ProgramAwareSettings) {
    let dt = elapsed(a.anchor, now);
    if dt.is_zero() {
        return;
    }
    if let Some(half_life) = settings.half_life {
        a.service *= (-(dt.as_secs_f64() / half_life.as_secs_f64())).exp2();
    }
    a.anchor = now;
}

/// The index of the best of `candidates` (`(service, head wait in seconds)`), by the LAS
/// score; the first on a tie. `None` when empty.
pub(crate) fn las_pick(
    candidates: &[(f64, f64)],
    settings: &ProgramAwareSettings,
) -> Option<usize> {
    let (mut min_s, mut max_s, mut min_w, mut max_w) = (f64::MAX, f64::MIN, f64::MAX, f64::MIN);
    for &(s, w) in candidates {
        min_s = min_s.min(s);
        max_s = max_s.max(s);
        min_w = min_w.min(w);
        max_w = max_w.max(w);
    }
    let norm = |v: f64, lo: f64, hi: f64| if hi > lo { (v - lo) / (hi - lo) } else { 0.0 };
    let mut best: Option<(usize, f64)> = None;
    for (i, &(s, w)) in candidates.iter().enumerate() {
        let score = settings.weight_service * (1.0 - norm(s, min_s, max_s))
            + settings.weight_head_wait * norm(w, min_w, max_w);
        if best.is_none_or(|(_, b)| score > b) {
            best = Some((i, score));
        }
    }
    best.map(|(i, _)| i)
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;
    use serde_json::json;

    fn at(secs: u64) -> Timestamp {
        Timestamp::from_nanos(secs * 1_000_000_000)
    }

    /// Upstream's validation (plugin.go `validate`, README table).
    #[test]
    fn upstreams_parameters_and_validation() {
        let s = ProgramAwareSettings::from_parameters(&json!({"lasHalfLifeSeconds": 0})).unwrap();
        assert_eq!(
            s.half_life,
            Some(Duration::from_secs(60)),
            "0 keeps the default, as omitempty"
        );
        let s = ProgramAwareSettings::from_parameters(
            &json!({"lasWeightService": 1.5, "evictionTtlSeconds": 10}),
        )
        .unwrap();
        assert_eq!(
            (s.weight_service, s.eviction_ttl),
            (1.5, Some(Duration::from_secs(10)))
        );
        for (params, says) in [
            (json!({"evictionTtlSeconds": -1}), "evictionTtlSeconds"),
            (json!({"evictionSweepSeconds": -5}), "evictionSweepSeconds"),
            (json!({"lasWeightService": -0.1}), "lasWeightService"),
            (json!({"lasWeightHeadWait": -0.1}), "lasWeightHeadWait"),
            (json!({"lasHalfLifeSeconds": -1}), "lasHalfLifeSeconds"),
            (json!({"strategy": "wfq"}), "strategy"),
            (json!({"weight": 1}), "unknown field"),
        ] {
            let err = ProgramAwareSettings::from_parameters(&params)
                .unwrap_err()
                .to_string();
            assert!(err.contains(says), "{params}: {err}");
        }
    }

    /// Upstream's strategy_las_test.go idea: the least-served program wins; with equal
    /// service the longer-waiting head does.
    #[test]
    fn least_attained_service_wins_and_head_wait_breaks_ties() {
        let s = ProgramAwareSettings::default();
        assert_eq!(
            las_pick(&[(100.0, 0.0), (10.0, 0.0), (50.0, 0.0)], &s),
            Some(1)
        );
        assert_eq!(las_pick(&[(10.0, 1.0), (10.0, 5.0)], &s), Some(1));
        // Service outweighs wait at the default weights.
        assert_eq!(las_pick(&[(0.0, 0.0), (100.0, 9.0)], &s), Some(0));
        assert_eq!(las_pick(&[], &s), None);
    }

    #[test]
    fn service_decays_by_half_life_and_idle_programs_are_forgotten() {
        let s = ProgramAwareSettings {
            eviction_ttl: Some(Duration::from_secs(100)),
            eviction_sweep: Duration::from_secs(10),
            ..ProgramAwareSettings::default()
        };
        let mut services = ProgramServices::default();
        services.charge("a", 400.0, at(0), &s);
        assert!((services.service("a", at(60), &s) - 200.0).abs() < 1e-9);
        assert!((services.service("a", at(120), &s) - 100.0).abs() < 1e-9);
        services.charge("b", 1.0, at(200), &s);
        assert_eq!(services.len(), 1, "a was idle past the TTL");
        assert_eq!(services.service("a", at(200), &s), 0.0);
        let no_decay = ProgramAwareSettings {
            half_life: None,
            ..s
        };
        let mut services = ProgramServices::default();
        services.charge("a", 5.0, at(0), &no_decay);
        assert_eq!(services.service("a", at(1000), &no_decay), 5.0);
    }
}
