//! A disaggregated request's stages: decode, then encode and prefill when their deciders say
//! so, each a run of its own profile ([`Scheduler::run_disaggregated`]); or, in the
//! `prefill-first` order, prefill, then decode beside it, then encode.

use crate::decision::Decision;
use crate::disagg::{
    DEFAULT_ENCODE_ENDPOINTS, Disaggregation, ENCODE_ID_SUFFIX, PREFILL_ID_SUFFIX, PeerEndpoint,
    StageOrder,
};
use crate::plugin::Decider;
use crate::request::InferenceRequest;

use super::{ScheduleError, ScheduleObserver, ScheduleOptions, Scheduler};

impl Scheduler {
    /// The decode profile; then, when the encode profile exists and its decider says so, the
    /// encode profile under the id `<id>:encode`; then, when the prefill decider says so, the
    /// prefill profile under the id `<id>:prefill`. An encode or prefill stage that finds no
    /// server is left out (the request is served without it).
    pub(super) fn run_disaggregated(
        &self,
        d: &Disaggregation,
        request: &InferenceRequest,
        options: ScheduleOptions<'_>,
        observer: Option<&dyn ScheduleObserver>,
    ) -> Result<Decision, ScheduleError> {
        if d.stage_order == StageOrder::PrefillFirst {
            return self.run_prefill_first(d, request, options, observer);
        }
        let decode = self.profile_index(Some(&d.decode_profile))?;
        // Upstream skips the encode stage when its profile is not configured.
        let encode = d
            .encode_decider
            .as_ref()
            .and_then(|_| self.profile_index(Some(&d.encode_profile)).ok());
        let stage = Stage {
            prefill_decider: d.decider.as_deref(),
            encode_decider: encode.and(d.encode_decider.as_deref()),
            ..Stage::default()
        };
        let (mut decision, stages) =
            self.run_observed(request, options, decode, stage, observer)?;
        if let (true, Some(encode)) = (stages.encode, encode) {
            let peer = PeerEndpoint(std::sync::Arc::clone(decision.primary()));
            decision = self.run_encode(decision, encode, Some(peer), request, options, observer);
        }
        if !stages.prefill {
            return Ok(decision);
        }
        let prefill = self.profile_index(Some(&d.prefill_profile))?;
        let stage = Stage {
            id: Some(format!("{}{PREFILL_ID_SUFFIX}", decision.request_id())),
            peer: Some(PeerEndpoint(std::sync::Arc::clone(decision.primary()))),
            ..Stage::default()
        };
        match self.run_observed(request, options, prefill, stage, observer) {
            Ok((stage, _)) => Ok(decision.with_prefill(stage)),
            Err(_) => Ok(decision),
        }
    }
}

impl Scheduler {
    /// `prefill-first`: the prefill profile under `<id>:prefill` whenever it exists (no
    /// decider asked; a prefill that finds no server leaves the request aggregated), then the
    /// decode profile with the prefill pick as its [`PeerEndpoint`], then, when the encode
    /// profile exists and its decider approves, the encode profile (no peer: upstream asks the
    /// encode decider before the decode pick exists, and only the request decides it).
    fn run_prefill_first(
        &self,
        d: &Disaggregation,
        request: &InferenceRequest,
        options: ScheduleOptions<'_>,
        observer: Option<&dyn ScheduleObserver>,
    ) -> Result<Decision, ScheduleError> {
        let decode = self.profile_index(Some(&d.decode_profile))?;
        let prefilled = match self.profile_index(Some(&d.prefill_profile)) {
            Ok(prefill) => {
                // A request without an id gets a generated one per stage: unique either way.
                let stage = Stage {
                    id: (!request.id.is_empty())
                        .then(|| format!("{}{PREFILL_ID_SUFFIX}", request.id)),
                    ..Stage::default()
                };
                self.run_observed(request, options, prefill, stage, observer)
                    .ok()
                    .map(|(decision, _)| decision)
            }
            Err(_) => None,
        };
        let encode = d
            .encode_decider
            .as_ref()
            .and_then(|_| self.profile_index(Some(&d.encode_profile)).ok());
        let stage = Stage {
            encode_decider: encode.and(d.encode_decider.as_deref()),
            peer: prefilled
                .as_ref()
                .map(|p| PeerEndpoint(std::sync::Arc::clone(p.primary()))),
            ..Stage::default()
        };
        // A decode stage that finds no server fails the request; the prefill pick's handle is
        // dropped unfinished with it (counted as cancelled).
        let (mut decision, stages) =
            self.run_observed(request, options, decode, stage, observer)?;
        if let (true, Some(encode)) = (stages.encode, encode) {
            decision = self.run_encode(decision, encode, None, request, options, observer);
        }
        Ok(match prefilled {
            Some(prefill) => decision.with_prefill(prefill),
            None => decision,
        })
    }

    /// Runs the encode profile `encode` under `<id>:encode` for as many servers as its picker
    /// asks (default one), adding them to `decision` (left as it is when none is found).
    fn run_encode(
        &self,
        decision: Decision,
        encode: usize,
        peer: Option<PeerEndpoint>,
        request: &InferenceRequest,
        options: ScheduleOptions<'_>,
        observer: Option<&dyn ScheduleObserver>,
    ) -> Decision {
        let count = self
            .profiles
            .get(encode)
            .and_then(|p| p.picker().max_endpoints())
            .unwrap_or(DEFAULT_ENCODE_ENDPOINTS);
        let stage = Stage {
            id: Some(format!("{}{ENCODE_ID_SUFFIX}", decision.request_id())),
            count: Some(count),
            peer,
            ..Stage::default()
        };
        match self.run_observed(request, options, encode, stage, observer) {
            Ok((encoded, _)) => decision.with_encode(encoded),
            Err(_) => decision,
        }
    }
}

/// How one profile run is made: under which id, for how many endpoints, asking which deciders.
#[derive(Default)]
pub(super) struct Stage<'a> {
    /// The stage's request id (default: the request's own).
    pub(super) id: Option<String>,
    /// Endpoints to pick (default: the scheduler's `maxEndpoints`).
    pub(super) count: Option<usize>,
    /// Asked, with the pick, whether a prefill stage follows.
    pub(super) prefill_decider: Option<&'a dyn Decider>,
    /// Asked, with the pick, whether an encode stage follows.
    pub(super) encode_decider: Option<&'a dyn Decider>,
    /// The decode server already picked, put in the stage's cycle for its plugins.
    pub(super) peer: Option<PeerEndpoint>,
}

/// What the deciders said about a decode pick.
#[derive(Debug, Clone, Copy, Default)]
pub(super) struct Stages {
    pub(super) encode: bool,
    pub(super) prefill: bool,
}
