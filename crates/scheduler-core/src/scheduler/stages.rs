//! A disaggregated request's stages: decode, then encode and prefill when their deciders say
//! so, each a run of its own profile ([`Scheduler::run_disaggregated`]).

use crate::decision::Decision;
use crate::disagg::{
    DEFAULT_ENCODE_ENDPOINTS, Disaggregation, ENCODE_ID_SUFFIX, PREFILL_ID_SUFFIX, PeerEndpoint,
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
            let count = self
                .profiles
                .get(encode)
                .and_then(|p| p.picker().max_endpoints())
                .unwrap_or(DEFAULT_ENCODE_ENDPOINTS);
            let stage = Stage {
                id: Some(format!("{}{ENCODE_ID_SUFFIX}", decision.request_id())),
                count: Some(count),
                peer: Some(PeerEndpoint(std::sync::Arc::clone(decision.primary()))),
                ..Stage::default()
            };
            if let Ok((encoded, _)) = self.run_observed(request, options, encode, stage, observer) {
                decision = decision.with_encode(encoded);
            }
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
