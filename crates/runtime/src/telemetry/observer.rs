//! The scheduler observer of a sampled request: a `llm_d.epp.profile` span per profile run
//! and a `llm_d.epp.scorer.<type>` span per scorer, under the `llm_d.epp.scoring` span, made
//! as the scheduler runs them (it calls the observer in order, on one thread).

use opentelemetry::trace::{SpanKind, Status, TraceContextExt};
use opentelemetry::{Context, KeyValue};
use parking_lot::Mutex;
use shepherd_scheduler_core::decision::Decision;
use shepherd_scheduler_core::plugin::Score;
use shepherd_scheduler_core::profile::ScorerEntry;
use shepherd_scheduler_core::scheduler::{ProfileOutcome, ScheduleError, ScheduleObserver};

use super::active::start_span;
use super::names;

/// What the first profile (the decode or only one) decided, for the scoring span.
#[derive(Debug, Clone, Copy)]
struct First {
    prompt_tokens: u64,
    cached_tokens: u64,
    candidates: usize,
}

#[derive(Debug, Default)]
struct State {
    profile: Option<Context>,
    scorer: Option<Context>,
    first: Option<First>,
}

/// Makes the spans of one scheduling call under `scoring` (the scoring span's context).
#[derive(Debug)]
pub(crate) struct SpanObserver {
    scoring: Context,
    state: Mutex<State>,
}

impl SpanObserver {
    pub(crate) fn new(scoring: Context) -> Self {
        SpanObserver {
            scoring,
            state: Mutex::new(State::default()),
        }
    }

    /// Records the decision (or error) and the adaptive `mode` on the scoring span, ends
    /// any span the scheduler left open, then the scoring span.
    pub(crate) fn finish(self, outcome: Result<&Decision, &ScheduleError>, mode: Option<String>) {
        let state = self.state.into_inner();
        for cx in [state.scorer, state.profile].into_iter().flatten() {
            cx.span().end();
        }
        let span = self.scoring.span();
        if let Some(mode) = mode {
            span.set_attribute(KeyValue::new(names::ADAPTIVE_MODE, mode));
        }
        if let Some(first) = state.first {
            span.set_attribute(KeyValue::new(
                names::PROMPT_TOKENS,
                saturating_i64(first.prompt_tokens),
            ));
            span.set_attribute(KeyValue::new(
                names::CACHED_TOKENS,
                saturating_i64(first.cached_tokens),
            ));
            span.set_attribute(KeyValue::new(
                names::CANDIDATES,
                saturating_i64(first.candidates as u64),
            ));
        }
        match outcome {
            Ok(decision) => {
                span.set_attribute(KeyValue::new(
                    names::ENDPOINT,
                    decision.primary().address().to_string(),
                ));
                span.set_attribute(KeyValue::new(
                    names::ENDPOINTS,
                    saturating_i64(decision.endpoints().len() as u64),
                ));
                span.set_attribute(KeyValue::new(
                    names::PROFILE_NAME,
                    decision.profile().to_string(),
                ));
                let prefill = decision.prefill();
                span.set_attribute(KeyValue::new(names::PD_USED, prefill.is_some()));
                if let Some(stage) = prefill {
                    span.set_attribute(KeyValue::new(
                        names::PD_PREFILL,
                        stage.endpoint().address().to_string(),
                    ));
                }
                let encode = decision.encode();
                span.set_attribute(KeyValue::new(names::ENCODE_USED, encode.is_some()));
                if let Some(stage) = encode {
                    span.set_attribute(KeyValue::new(
                        names::ENCODE_ENDPOINTS,
                        stage.header_value(),
                    ));
                }
            }
            Err(error) => {
                span.set_attribute(KeyValue::new(names::ERROR_TYPE, error_kind(error)));
                span.set_status(Status::error(error.to_string()));
            }
        }
        span.end();
    }
}

/// A short, bounded name for a scheduling error.
fn error_kind(error: &ScheduleError) -> &'static str {
    match error {
        ScheduleError::NoEndpoints => "no_endpoints",
        ScheduleError::NoCandidates { .. } => "no_candidates",
        ScheduleError::Rejected { .. } => "rejected",
        _ => "schedule_error",
    }
}

fn saturating_i64(v: u64) -> i64 {
    i64::try_from(v).unwrap_or(i64::MAX)
}

impl ScheduleObserver for SpanObserver {
    fn profile_started(&self, profile: &str) {
        let cx = start_span(
            &self.scoring,
            names::PROFILE.into(),
            SpanKind::Internal,
            vec![KeyValue::new(
                names::PROFILE_NAME,
                names::bounded(profile).to_string(),
            )],
        );
        let mut state = self.state.lock();
        if let Some(previous) = std::mem::replace(&mut state.profile, cx) {
            previous.span().end();
        }
    }

    fn scorer_started(&self, scorer: &ScorerEntry) {
        let mut state = self.state.lock();
        let parent = state.profile.as_ref().unwrap_or(&self.scoring);
        let cx = start_span(
            parent,
            names::scorer_span(&scorer.plugin_type).into(),
            SpanKind::Internal,
            vec![
                KeyValue::new(names::SCORER_NAME, names::bounded(&scorer.name).to_string()),
                KeyValue::new(
                    names::SCORER_TYPE,
                    names::bounded(&scorer.plugin_type).to_string(),
                ),
            ],
        );
        if let Some(previous) = std::mem::replace(&mut state.scorer, cx) {
            previous.span().end();
        }
    }

    fn scorer_finished(&self, _scorer: &ScorerEntry, weight: f64, scores: &[Score]) {
        let Some(cx) = self.state.lock().scorer.take() else {
            return;
        };
        let span = cx.span();
        let n = scores.len();
        let max = scores.iter().map(|s| s.value).fold(0.0f64, f64::max);
        let avg = if n == 0 {
            0.0
        } else {
            scores.iter().map(|s| s.value).sum::<f64>() / n as f64
        };
        let neutral = scores.iter().filter(|s| s.neutral).count();
        span.set_attribute(KeyValue::new(names::SCORER_WEIGHT, weight));
        span.set_attribute(KeyValue::new(names::CANDIDATES, saturating_i64(n as u64)));
        span.set_attribute(KeyValue::new(names::SCORE_MAX, max));
        span.set_attribute(KeyValue::new(names::SCORE_AVG, avg));
        span.set_attribute(KeyValue::new(
            names::SCORES_NEUTRAL,
            saturating_i64(neutral as u64),
        ));
        span.end();
    }

    fn profile_finished(&self, outcome: &ProfileOutcome<'_>) {
        let mut state = self.state.lock();
        if let Some(scorer) = state.scorer.take() {
            scorer.span().end();
        }
        if outcome.error.is_none() && state.first.is_none() {
            state.first = Some(First {
                prompt_tokens: outcome.prompt_tokens,
                cached_tokens: outcome.cached_tokens,
                candidates: outcome.candidates,
            });
        }
        let Some(cx) = state.profile.take() else {
            return;
        };
        drop(state);
        let span = cx.span();
        span.set_attribute(KeyValue::new(
            names::CANDIDATES,
            saturating_i64(outcome.candidates as u64),
        ));
        if let Some(endpoint) = outcome.endpoint {
            span.set_attribute(KeyValue::new(names::ENDPOINT, endpoint.to_string()));
            span.set_attribute(KeyValue::new(
                names::ENDPOINTS,
                saturating_i64(outcome.endpoints as u64),
            ));
            span.set_attribute(KeyValue::new(
                names::PROMPT_TOKENS,
                saturating_i64(outcome.prompt_tokens),
            ));
            span.set_attribute(KeyValue::new(
                names::CACHED_TOKENS,
                saturating_i64(outcome.cached_tokens),
            ));
            span.set_attribute(KeyValue::new(names::PD_USED, outcome.disaggregate));
        }
        if let Some(error) = outcome.error {
            span.set_attribute(KeyValue::new(names::ERROR_TYPE, error_kind(error)));
            span.set_status(Status::error(error.to_string()));
        }
        span.end();
    }
}
